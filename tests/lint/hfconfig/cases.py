"""Positive and near-miss cases for the config checks, each made from a real config file
(``real/``) by a small edit, with what the installed accelerate/transformers really do with
it (``truth``), so that one test checks the linter and another checks the linter's claim."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

REAL = Path(__file__).parent / "real"

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64}
BERT = {"architectures": ["BertForMaskedLM"], "model_type": "bert", "hidden_size": 64}


@dataclass(frozen=True)
class Case:
    id: str
    base: str
    """The real file the case starts from."""
    edits: tuple[tuple[str, str], ...] = ()
    """``(old, new)`` text replacements (each ``old`` must occur once)."""
    codes: frozenset[str] = frozenset()
    """Every code the linter must report, and no other."""
    truth: str = ""
    """What the tools do: ``raises``, ``ok``, or ``same-without:<key>`` (the plugin is the
    same as without that key, i.e. the key is ignored); empty when no run can show it."""
    model: dict | None = None
    extra: dict = field(default_factory=dict)

    def text(self) -> str:
        text = (REAL / self.base).read_text(encoding="utf-8")
        for old, new in self.edits:
            assert text.count(old) == 1, f"{self.id}: {old!r} occurs {text.count(old)} times"
            text = text.replace(old, new)
        return text

    @property
    def suffix(self) -> str:
        return Path(self.base).suffix


def _c(id: str, base: str, *edits: tuple[str, str], codes=(), truth="", model=None) -> Case:
    return Case(id, base, tuple(edits), frozenset(codes), truth, model)


TEMPLATE = "accelerate-fsdp-template.yaml"
LF2 = "llamafactory-fsdp2.yaml"
TRL2 = "trl-fsdp2.yaml"
BERT_FILE = "accelerate-tests-latest-fsdp.yaml"
T5 = "t5-parallelism-fsdp-config.json"
BIOMED = "biomed-llama-fsdp-config.json"
MOE = "llamafactory-fsdp2-qwen35-moe.yaml"

CASES = [
    # FSDP101: keys nobody reads
    _c(
        "101-renamed-key",
        TEMPLATE,
        ("fsdp_backward_prefetch: BACKWARD_PRE", "fsdp_backward_prefetch_policy: BACKWARD_PRE"),
        codes={"FSDP101"},
        truth="same-without:fsdp_backward_prefetch_policy",
    ),
    _c(
        "101-trainer-typo",
        T5,
        ('"activation_checkpointing": true', '"activation_checkpoint": true'),
        codes={"FSDP101", "FSDP103"},
    ),
    _c("101-near-unprefixed-key", LF2, ("fsdp_version: 2", "version: 2"), truth="ok"),
    # FSDP102: top-level keys the launcher refuses
    _c(
        "102-fsdp-key-at-top-level",
        TRL2,
        ("machine_rank: 0\n", "machine_rank: 0\nfsdp_activation_checkpointing: true\n"),
        codes={"FSDP102"},
        truth="raises",
    ),
    _c(
        "102-near-legacy-key",
        TRL2,
        ("machine_rank: 0\n", "machine_rank: 0\ndynamo_backend: 'NO'\n"),
        truth="ok",
    ),
    # FSDP103: keys the FSDP version ignores
    _c(
        "103-sharding-strategy-with-fsdp2",
        LF2,
        ("  fsdp_version: 2\n", "  fsdp_version: 2\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n"),
        codes={"FSDP103"},
        truth="same-without:fsdp_sharding_strategy",
    ),
    _c(
        "103-reshard-after-forward-with-fsdp1",
        "peft-sft-fsdp.yaml",
        ("fsdp_sharding_strategy: SHARD_GRAD_OP", "fsdp_reshard_after_forward: SHARD_GRAD_OP"),
        codes={"FSDP103"},
        truth="same-without:fsdp_reshard_after_forward",
    ),
    _c(  # what `accelerate config` writes for FSDP1: ignored, but it is what FSDP1 does anyway
        "103-near-reshard-full-shard-with-fsdp1",
        "peft-sft-fsdp.yaml",
        ("fsdp_sharding_strategy: SHARD_GRAD_OP", "fsdp_reshard_after_forward: FULL_SHARD"),
        truth="ok",
    ),
    _c(
        "103-near-reshard-false-with-fsdp2",
        LF2,
        ("fsdp_reshard_after_forward: true", "fsdp_reshard_after_forward: false"),
        truth="ok",
    ),
    _c("103-near-trainer-version-1", T5, ("{\n", '{\n  "version": 1,\n')),
    # FSDP104: values the tools refuse
    _c(
        "104-state-dict-type",
        TRL2,
        ("SHARDED_STATE_DICT", "SHARDED"),
        codes={"FSDP104"},
        truth="raises",
    ),
    _c(
        "104-strategy-for-fsdp2-reshard",
        TRL2,
        ("fsdp_reshard_after_forward: true", "fsdp_reshard_after_forward: FULL_SHARD"),
        codes={"FSDP104"},
        truth="raises",
    ),
    _c(
        "104-version-3",
        "accelerate-tests-fsdp2.yaml",
        ("fsdp_version: 2", "fsdp_version: 3"),
        codes={"FSDP104"},
        truth="raises",
    ),
    _c(
        "104-local-state-dict-with-fsdp2",
        TRL2,
        ("SHARDED_STATE_DICT", "LOCAL_STATE_DICT"),
        codes={"FSDP104"},
        truth="raises",
    ),
    _c("104-near-lower-case-name", TRL2, ("SHARDED_STATE_DICT", "sharded_state_dict"), truth="ok"),
    _c("104-near-strategy-number", "peft-sft-fsdp.yaml", ("SHARD_GRAD_OP", "2"), truth="ok"),
    # FSDP105: a class the model does not have
    _c("105-bert-layer-in-llama", BERT_FILE, codes={"FSDP105"}, model=LLAMA),
    _c("105-near-bert-layer-in-bert", BERT_FILE, model=BERT),
    _c("105-near-no-model", MOE),
    # FSDP106: lists that can match no class
    _c(
        "106-yaml-list",
        BERT_FILE,
        (
            "fsdp_transformer_layer_cls_to_wrap: BertLayer",
            "fsdp_transformer_layer_cls_to_wrap: [BertLayer]",
        ),
        codes={"FSDP106"},
    ),
    _c(
        "106-space-after-comma",
        BERT_FILE,
        ("cls_to_wrap: BertLayer", "cls_to_wrap: BertLayer, BertAttention"),
        codes={"FSDP106"},
    ),
    _c(
        "106-dotted-path",
        BERT_FILE,
        ("cls_to_wrap: BertLayer", "cls_to_wrap: transformers.models.bert.modeling_bert.BertLayer"),
        codes={"FSDP106"},
    ),
    _c(
        "106-near-comma-list",
        BERT_FILE,
        ("cls_to_wrap: BertLayer", "cls_to_wrap: BertLayer,BertAttention"),
    ),
    # FSDP107: settings the wrap policy ignores
    _c(
        "107-class-without-policy",
        MOE,
        ("  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n", ""),
        codes={"FSDP107"},
        truth="same-without:fsdp_transformer_layer_cls_to_wrap",
    ),
    _c(
        "107-trainer-class-with-size-policy",
        BIOMED,
        ("{\n", '{\n  "auto_wrap_policy": "SIZE_BASED_WRAP",\n'),
        codes={"FSDP107"},
    ),
    _c("107-near-policy-given", MOE, truth="ok"),
    # FSDP108: settings whose companion is off
    _c(
        "108-ram-efficient-loading-without-sync",
        LF2,
        ("  fsdp_version: 2\n", "  fsdp_version: 2\n  fsdp_sync_module_states: false\n"),
        codes={"FSDP108"},
        truth="raises",
    ),
    _c(
        "108-near-both-off",
        LF2,
        (
            "fsdp_cpu_ram_efficient_loading: true",
            "fsdp_cpu_ram_efficient_loading: false\n  fsdp_sync_module_states: false",
        ),
        truth="ok",
    ),
    # FSDP109: Trainer CPU offload
    _c(
        "109-trainer-cpu-offload", BIOMED, ("{\n", '{\n  "cpu_offload": true,\n'), codes={"FSDP109"}
    ),
    _c("109-near-offload-off", BIOMED, ("{\n", '{\n  "cpu_offload": false,\n')),
    # FSDP111: FSDP settings that FSDP never sees
    _c(
        "111-multi-gpu",
        TRL2,
        ("distributed_type: FSDP", "distributed_type: MULTI_GPU"),
        codes={"FSDP111"},
    ),
    _c("111-near-fsdp", TRL2, truth="ok"),
]
