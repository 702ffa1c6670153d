"""What the config checks claim is what the installed accelerate does: each case's file is
fed to the real ``accelerate launch`` argument handling and ``FullyShardedDataParallelPlugin``
(tests/lint/hfconfig/cases.py, ``truth``), and the judged real files run as the labels say."""

from __future__ import annotations

import pytest
import yaml

from tests.lint.hfconfig.cases import CASES

pytest.importorskip("accelerate")
pytest.importorskip("torch")

from fsdp_skill.references import hf_probe  # noqa: E402

TRUTHS = [c for c in CASES if c.truth and c.suffix == ".yaml"]


def _outcome(config: dict) -> tuple[str, str]:
    top = {k: v for k, v in config.items() if k != "fsdp_config"}
    return hf_probe.accelerate_outcome(dict(config.get("fsdp_config") or {}), top)


@pytest.mark.parametrize("case", TRUTHS, ids=[c.id for c in TRUTHS])
def test_accelerate_does_what_the_case_says(case):
    config = yaml.safe_load(case.text())
    outcome = _outcome(config)
    if case.truth == "raises":
        assert outcome[0] == "error", f"{case.id}: accelerate accepted it"
    elif case.truth == "ok":
        assert outcome[0] == "ok", f"{case.id}: accelerate refused it ({outcome[1]})"
    else:
        key = case.truth.removeprefix("same-without:")
        without = {**config, "fsdp_config": dict(config["fsdp_config"])}
        del without["fsdp_config"][key]
        assert outcome[0] == "ok", outcome
        assert outcome == _outcome(without), f"{case.id}: {key} changes the plugin"


def test_multi_gpu_file_does_not_turn_fsdp_on(tmp_path):
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    case = next(c for c in CASES if c.id == "111-multi-gpu")
    path = tmp_path / "c.yaml"
    path.write_text(case.text(), encoding="utf-8")
    args = launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    args, _, _ = _validate_launch_command(args)
    assert not args.use_fsdp


def test_yaml_list_of_classes_reaches_the_plugin_as_unmatchable_names():
    case = next(c for c in CASES if c.id == "106-yaml-list")
    config = yaml.safe_load(case.text())
    status, fields = _outcome(config)
    assert status == "ok"
    assert "transformer_cls_names_to_wrap=[\"['BertLayer']\"]" in fields


def test_wrap_class_lookup_fails_for_the_positive_case():
    pytest.importorskip("transformers")
    from accelerate.utils.dataclasses import get_module_class_from_name
    from transformers import BertConfig, BertModel, LlamaConfig, LlamaForCausalLM

    small = {"hidden_size": 16, "num_attention_heads": 2, "num_hidden_layers": 1}
    llama = LlamaForCausalLM(LlamaConfig(**small, intermediate_size=32, vocab_size=64))
    bert = BertModel(BertConfig(**small, intermediate_size=32, vocab_size=64))
    assert get_module_class_from_name(llama, "BertLayer") is None  # 105-bert-layer-in-llama
    assert get_module_class_from_name(bert, "BertLayer") is not None  # the near miss


def test_trainer_cases_reach_the_plugin_as_the_checks_say():
    pytest.importorskip("transformers")
    import json

    typo = json.loads(next(c for c in CASES if c.id == "101-trainer-typo").text())
    assert "activation_checkpointing=True" not in hf_probe.trainer_outcome(typo)[1]
    size = json.loads(next(c for c in CASES if c.id == "107-trainer-class-with-size-policy").text())
    assert "transformer_cls_names_to_wrap=None" in hf_probe.trainer_outcome(size)[1]
    t5 = json.loads(next(c for c in CASES if c.id == "103-near-trainer-version-1").text())
    assert "BackwardPrefetch.BACKWARD_PRE" in hf_probe.trainer_outcome(t5)[1]
    t5.pop("version")
    assert "backward_prefetch=None" in hf_probe.trainer_outcome(t5)[1]
