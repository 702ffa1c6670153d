"""The mined Hugging Face FSDP facts the config checks read (``knowledge/hf_fsdp_keys.toml``
and ``knowledge/hf_model_classes.json``), as lookups. Loading needs no accelerate,
transformers or torch; the model classes load only when a check needs them."""

from __future__ import annotations

import json
from functools import cache

from fsdp_skill import knowledge

# Trainer fsdp_config keys that only an FSDP configuration has (``version`` or ``xla`` alone
# could be anything): one of them, or an ``fsdp_`` prefix, makes a JSON file an fsdp_config.
TRAINER_SPECIFIC_KEYS = frozenset(
    {
        "transformer_layer_cls_to_wrap",
        "min_num_params",
        "backward_prefetch",
        "forward_prefetch",
        "cpu_ram_efficient_loading",
        "sync_module_states",
        "use_orig_params",
        "limit_all_gathers",
        "reshard_after_forward",
        "xla_fsdp_settings",
        "xla_fsdp_grad_ckpt",
        "xla_fsdp_v2",
    }
)


@cache
def _data() -> dict:
    return knowledge.hf_fsdp_keys()


def versions() -> dict[str, str]:
    """The accelerate and transformers versions the facts were mined from."""
    return dict(_data()["versions"])


@cache
def accelerate_keys() -> dict[str, dict]:
    """``fsdp_config:`` key of an accelerate config file -> its mined row."""
    return {row["key"]: row for row in _data()["accelerate_config"]}


@cache
def trainer_keys() -> dict[str, dict]:
    """Key of ``TrainingArguments(fsdp_config=...)`` -> its mined row."""
    return {row["key"]: row for row in _data()["trainer_fsdp_config"]}


@cache
def plugin_fields() -> dict[str, dict]:
    """``FullyShardedDataParallelPlugin`` field -> its mined row."""
    return {row["field"]: row for row in _data()["plugin"]}


def accelerate_top_level() -> tuple[frozenset[str], frozenset[str]]:
    """The top-level keys an accelerate config file may have, and the legacy ones it converts."""
    table = _data()["accelerate_file"]
    return frozenset(table["top_level_keys"]), frozenset(table["legacy_top_level_keys"])


def case_insensitive_keys() -> frozenset[str]:
    """Accelerate keys whose named values may be written in any case."""
    return frozenset(_data()["accelerate_values"]["case_insensitive"])


def bool_words() -> frozenset[str]:
    """The strings accelerate and the Trainer read as a boolean."""
    return frozenset(_data()["accelerate_values"]["bool_words"])


def trainer_fsdp_words(version: int) -> list[str]:
    """The words ``TrainingArguments(fsdp="...")`` accepts with that FSDP version."""
    return list(_data()["trainer_fsdp_option"][f"words_v{version}"])


def trainer_exports_offload() -> bool:
    """Whether a Trainer ``cpu_offload`` reaches accelerate's choice of process-group backend."""
    return bool(_data()["trainer_fsdp_option"]["exports_offload_to_accelerate"])


def trainer_save_model_writes() -> list[str]:
    """The state-dict types for which ``Trainer.save_model`` writes the model under FSDP."""
    return list(_data()["trainer_save_model"]["writes_with"])


@cache
def trainer_argument_names() -> frozenset[str]:
    """The fields of ``TrainingArguments``."""
    return frozenset(_data()["trainer_arguments"]["fields"])


def plugin_default(field: str, version: int) -> str:
    """The value a plugin field falls back to when its variable is unset, for this FSDP
    version (the mined default may be an expression on ``self.fsdp_version``)."""
    import ast

    text = plugin_fields()[field]["env_default"]
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return text
    while isinstance(node, ast.IfExp):
        test = ast.unparse(node.test).replace(" ", "")
        wanted = test.removeprefix("self.fsdp_version==")
        node = node.body if wanted.isdigit() and int(wanted) == version else node.orelse
    try:
        return str(ast.literal_eval(node))
    except ValueError:
        return text


def default_version(kind_is_accelerate: bool) -> int:
    """The FSDP version a file gets when it names none."""
    if kind_is_accelerate:
        return int(accelerate_keys()["fsdp_version"]["launch_default"] or 1)
    return int(trainer_keys()["version"]["default"] or 2)


@cache
def model_classes() -> dict:
    """``{"torch_nn", "model_types", "modules"}`` from ``knowledge/hf_model_classes.json``."""
    path = knowledge.KNOWLEDGE_DIR / "hf_model_classes.json"
    return json.loads(path.read_text(encoding="utf-8"))
