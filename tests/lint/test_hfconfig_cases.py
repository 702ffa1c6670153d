"""Each config check fires on its positive cases and on nothing else, and stays silent on the
near misses (cases made from real config files: tests/lint/hfconfig/cases.py)."""

from __future__ import annotations

import json

import pytest

from fsdp_skill import knowledge
from fsdp_skill.lint import lint_source
from fsdp_skill.lint.hfconfig import CONFIG_CODES
from fsdp_skill.lint.hfconfig.rules import config_rules
from tests.lint.hfconfig.cases import CASES, LLAMA


def _lint(case, tmp_path) -> dict:
    model = None
    if case.model is not None:
        model = tmp_path / "config.json"
        model.write_text(json.dumps(case.model), encoding="utf-8")
    return lint_source(case.text(), f"{case.id}{case.suffix}", model_config=model and str(model))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_gives_exactly_its_codes(case, tmp_path):
    result = _lint(case, tmp_path)
    assert result["files"] == 1 and result["errors"] == []
    assert {f["code"] for f in result["findings"]} == set(case.codes), result["findings"]


def test_every_code_has_a_positive_and_a_near_miss():
    positives = {code for case in CASES for code in case.codes}
    near = {case.id.split("-")[0] for case in CASES if "-near-" in case.id}
    missing = set(CONFIG_CODES) - {"FSDP110"} - positives  # FSDP110 needs a project: below
    assert not missing, f"codes without a positive case: {sorted(missing)}"
    assert {c[4:] for c in CONFIG_CODES} - {"110"} - near == set()


def test_finding_points_at_the_key_or_value(tmp_path):
    case = next(c for c in CASES if c.id == "101-renamed-key")
    (finding,) = _lint(case, tmp_path)["findings"]
    line = case.text().splitlines()[finding["line"] - 1]
    assert line[finding["col"] - 1 :].startswith("fsdp_backward_prefetch_policy")
    assert "did you mean `fsdp_backward_prefetch`" in finding["message"]


def test_finding_in_json_points_at_the_key(tmp_path):
    case = next(c for c in CASES if c.id == "109-trainer-cpu-offload")
    (finding,) = _lint(case, tmp_path)["findings"]
    line = case.text().splitlines()[finding["line"] - 1]
    assert line[finding["col"] - 1 :].startswith('"cpu_offload"')


def test_wrap_class_finding_suggests_the_models_layer(tmp_path):
    case = next(c for c in CASES if c.id == "105-bert-layer-in-llama")
    (finding,) = _lint(case, tmp_path)["findings"]
    assert "LlamaDecoderLayer" in finding["message"] and "BertLayer" in finding["message"]


def test_noqa_comment_silences_one_code_on_its_line(tmp_path):
    text = next(c for c in CASES if c.id == "101-renamed-key").text()
    quiet = text.replace("BACKWARD_PRE\n", "BACKWARD_PRE  # noqa: FSDP101\n", 1)
    assert lint_source(quiet, "a.yaml")["findings"] == []
    other = text.replace("BACKWARD_PRE\n", "BACKWARD_PRE  # noqa: FSDP104\n", 1)
    assert [f["code"] for f in lint_source(other, "a.yaml")["findings"]] == ["FSDP101"]


def test_select_and_ignore_apply_to_config_codes(tmp_path):
    text = next(c for c in CASES if c.id == "101-trainer-typo").text()
    assert {f["code"] for f in lint_source(text, "a.json", select=["FSDP101"])["findings"]} == {
        "FSDP101"
    }
    assert {f["code"] for f in lint_source(text, "a.json", ignore=["FSDP10"])["findings"]} == set()


def test_model_of_unknown_type_or_remote_code_is_not_judged(tmp_path):
    case = next(c for c in CASES if c.id == "105-bert-layer-in-llama")
    for model in ({"model_type": "no_such_type"}, {**LLAMA, "auto_map": {"AutoModel": "m.M"}}):
        path = tmp_path / "config.json"
        path.write_text(json.dumps(model), encoding="utf-8")
        result = lint_source(case.text(), "a.yaml", model_config=str(path))
        assert result["findings"] == []


@pytest.mark.parametrize("rule", config_rules(), ids=[r.code for r in config_rules()])
def test_rule_has_exactly_one_pitfall_whose_code_is_a_config(rule):
    documented = [p for p in knowledge.pitfalls() if p.lint == rule.code]
    assert [p.id for p in documented] == [rule.pitfall]
    assert documented[0].severity == rule.severity
    assert documented[0].code_lang in ("yaml", "json")


@pytest.mark.parametrize("rule", config_rules(), ids=[r.code for r in config_rules()])
def test_pitfall_bad_config_is_flagged_and_good_is_clean(rule, tmp_path):
    pitfall = knowledge.pitfall(rule.pitfall)
    name = f"{pitfall.id}.{pitfall.code_lang}"
    model = tmp_path / "config.json"
    model.write_text(json.dumps({"model_type": "qwen2", "hidden_size": 8}), encoding="utf-8")
    options = {"model_config": str(model)} if rule.code == "FSDP105" else {}
    good = lint_source(pitfall.good, name, **options)
    assert good["files"] == 1 and good["findings"] == [] and good["errors"] == []
    if rule.code == "FSDP110":
        return  # needs a launched script: tests/lint/test_hfconfig_project.py
    bad = lint_source(pitfall.bad, name, **options)
    assert rule.code in {f["code"] for f in bad["findings"]}
