"""Config files inside a project: ``lint DIR`` finds them by content and skips every other
YAML/JSON file, ties a config to the script its shell script launches (FSDP110), and applies
the project's lint configuration."""

from __future__ import annotations

import json
from pathlib import Path

from fsdp_skill.lint import lint_paths
from tests.cli import fsdp
from tests.lint.hfconfig.cases import REAL

TRAIN = """\
from transformers import Trainer, TrainingArguments


def main():
    trainer = Trainer(model=None, args=TrainingArguments(output_dir="out"))
    trainer.train()
{extra}    trainer.save_model("out")


if __name__ == "__main__":
    main()
"""
RUN = "#!/bin/bash\naccelerate launch \\\n  --config_file configs/fsdp2.yaml \\\n  train.py --lr 1e-5\n"
FORCE_FULL = '    trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")\n'


def _project(tmp_path: Path, config: str = "trl-fsdp2.yaml", extra: str = "") -> Path:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "fsdp2.yaml").write_text((REAL / config).read_text())
    (tmp_path / "train.py").write_text(TRAIN.format(extra=extra))
    (tmp_path / "run.sh").write_text(RUN)
    return tmp_path


def _codes(result: dict) -> list[tuple[str, str]]:
    return sorted((Path(f["path"]).name, f["code"]) for f in result["findings"])


def test_sharded_state_dict_with_trainer_save_model_is_flagged(tmp_path):
    result = lint_paths([str(_project(tmp_path))])
    assert _codes(result) == [("fsdp2.yaml", "FSDP110")]
    (finding,) = result["findings"]
    assert "train.py" in finding["message"] and "run.sh:2" in finding["message"]
    assert finding["line"] == 12  # fsdp_state_dict_type in the real file


def test_script_that_switches_to_a_full_state_dict_is_not(tmp_path):
    assert lint_paths([str(_project(tmp_path, extra=FORCE_FULL))])["findings"] == []


def test_full_state_dict_config_is_not(tmp_path):
    project = _project(tmp_path, config="trl-fsdp2-sharding-2gpus.yaml")
    assert lint_paths([str(project)])["findings"] == []


def test_config_without_a_launch_line_is_not_tied_to_any_script(tmp_path):
    project = _project(tmp_path)
    (project / "run.sh").write_text("python train.py\n")
    assert lint_paths([str(project)])["findings"] == []


def test_other_yaml_and_json_files_are_skipped_without_a_word(tmp_path):
    (tmp_path / "package.json").write_text(json.dumps({"name": "x", "version": "1.0.0"}))
    (tmp_path / "ds_config.json").write_text(
        json.dumps({"zero_optimization": {"stage": 3}, "activation_checkpointing": {}})
    )
    workflow = tmp_path / ".github" / "workflows"
    workflow.mkdir(parents=True)
    (workflow / "ci.yml").write_text("on: push\njobs:\n  t:\n    steps:\n    - run: echo fsdp\n")
    (tmp_path / "deepspeed.yaml").write_text(
        "distributed_type: DEEPSPEED\ndeepspeed_config: {zero_stage: 3}\nfsdp_config: {}\n"
    )
    (tmp_path / "axolotl.yaml").write_text(
        "base_model: m\nfsdp_config:\n  fsdp_offload_params: true\noutput_dir: out\n"
    )
    (tmp_path / "broken.yaml").write_text("a: [unclosed\n")
    (tmp_path / "job.yaml").write_text(  # a manifest of several documents that mentions one
        "kind: ConfigMap\n---\nkind: Job\nargs: accelerate launch --config_file fsdp_config.yaml\n"
    )
    (tmp_path / "binary.json").write_bytes(b"\x00\x01fsdp")
    (tmp_path / "big.json").write_text("[" + ",".join(['{"fsdp": 1}'] * 200_000) + "]")
    result = lint_paths([str(tmp_path)])
    assert result == {"findings": [], "files": 0, "errors": []}


def test_json_indented_with_tabs_keeps_positions(tmp_path):
    (tmp_path / "fsdp_config.json").write_text(
        '{\n\t"transformer_layer_cls_to_wrap": ["A"],\n\t"backward_prefech": "x"\n}\n'
    )
    (finding,) = lint_paths([str(tmp_path)])["findings"]
    assert (finding["code"], finding["line"], finding["col"]) == ("FSDP101", 3, 2)


def test_broken_config_is_an_error_not_a_silence(tmp_path):
    (tmp_path / "fsdp.yaml").write_text("distributed_type: FSDP\nfsdp_config:\n  a: [1\n")
    result = lint_paths([str(tmp_path)])
    assert [e["message"].split(":")[0] for e in result["errors"]] == ["invalid YAML"]


def test_pyproject_per_file_ignores_apply_to_configs(tmp_path):
    (tmp_path / "fsdp.yaml").write_text((REAL / "halos-fsdp.yaml").read_text())
    assert [f["code"] for f in lint_paths([str(tmp_path)])["findings"]] == ["FSDP101"]
    (tmp_path / "pyproject.toml").write_text(
        '[tool.fsdp-skill.lint]\nper-file-ignores = { "*.yaml" = ["FSDP101"] }\n'
    )
    from fsdp_skill.lint import config

    config.for_folder.cache_clear()
    assert lint_paths([str(tmp_path)])["findings"] == []


def test_cli_text_json_and_sarif_carry_the_config_position(tmp_path):
    (tmp_path / "fsdp.yaml").write_text((REAL / "sparseml-fsdp.yaml").read_text())
    text = fsdp("lint", "fsdp.yaml", cwd=tmp_path)
    assert text.code == 1
    assert text.out.startswith("fsdp.yaml:7:3: FSDP101 `fsdp_backward_prefetch_policy`")
    data = fsdp("lint", "--json", ".", cwd=tmp_path).json()
    assert [(f["line"], f["col"], f["severity"]) for f in data["findings"]] == [(7, 3, "warning")]
    sarif = fsdp("lint", "--format", "sarif", ".", cwd=tmp_path).json()
    run = sarif["runs"][0]
    (hit,) = run["results"]
    assert hit["locations"][0]["physicalLocation"]["region"] == {"startLine": 7, "startColumn": 3}
    assert run["tool"]["driver"]["rules"][hit["ruleIndex"]]["id"] == "FSDP101"


def test_cli_model_config_and_stdin(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8}))
    config = (REAL / "accelerate-tests-latest-fsdp.yaml").read_text()
    result = fsdp(
        "lint",
        "-",
        "--stdin-filename",
        "a.yaml",
        "--model-config",
        "config.json",
        "--json",
        input=config,
        cwd=tmp_path,
    )
    assert [f["code"] for f in result.json()["findings"]] == ["FSDP105"]
    missing = fsdp("lint", "--model-config", "nope.json", ".", cwd=tmp_path)
    assert missing.code == 2 and "--model-config" in missing.err and "Traceback" not in missing.err


def test_cli_explain_a_config_code():
    result = fsdp("lint", "--explain", "fsdp107")
    assert result.code == 0
    assert "Bad (YAML):" in result.out and "fsdp_auto_wrap_policy" in result.out


SCRIPT = (
    "import torch.distributed as dist\n\ndist.init_process_group('gloo')\nprint(dist.get_rank())\n"
)


def _config_and_script(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "fsdp.yaml").write_bytes((REAL / "halos-fsdp.yaml").read_bytes())
    (tmp_path / "train.py").write_text(SCRIPT)
    return tmp_path / "fsdp.yaml", tmp_path / "train.py"


def test_statistics_count_config_findings_beside_script_findings(tmp_path):
    from fsdp_skill.lint.hfconfig.rules import config_rule

    _config_and_script(tmp_path)
    text = fsdp("lint", ".", "--statistics", cwd=tmp_path)
    assert text.code == 1
    lines = text.out.strip().splitlines()
    assert sorted(line.split()[1] for line in lines[:-1]) == ["FSDP014", "FSDP101"]
    assert lines[-1] == "2 findings"
    stats = fsdp("lint", ".", "--statistics", "--json", cwd=tmp_path).json()["statistics"]
    summaries = {s["code"]: s["summary"] for s in stats}
    assert summaries["FSDP101"] == config_rule("FSDP101").summary


def test_diff_and_fix_rewrite_python_only_and_keep_config_findings(tmp_path):
    config, script = _config_and_script(tmp_path)
    before = config.read_bytes()
    diff = fsdp("lint", "--diff", ".", cwd=tmp_path)
    assert diff.code == 1, diff.err
    assert "+dist.destroy_process_group()" in diff.out and "fsdp.yaml" not in diff.out
    assert script.read_text() == SCRIPT and config.read_bytes() == before
    fixed = fsdp("lint", "--fix", "--json", ".", cwd=tmp_path).json()
    assert [f["code"] for f in fixed["fixes"]] == ["FSDP014"]
    assert [(Path(f["path"]).name, f["code"]) for f in fixed["findings"]] == [
        ("fsdp.yaml", "FSDP101")
    ]
    assert fixed["files"] == 2 and fixed["errors"] == []
    assert "dist.destroy_process_group()" in script.read_text()
    assert config.read_bytes() == before


def test_an_edited_script_is_read_again_in_the_same_process(tmp_path):
    """The MCP server lints the same project again after the user edits it."""
    project = _project(tmp_path)
    assert _codes(lint_paths([str(project)])) == [("fsdp2.yaml", "FSDP110")]
    (project / "train.py").write_text(TRAIN.format(extra=FORCE_FULL))
    assert lint_paths([str(project)])["findings"] == []
