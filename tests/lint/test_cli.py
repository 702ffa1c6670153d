"""The ``fsdp-skill lint`` command as users and CI run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.cli import fsdp

BAD = "import torch.distributed as dist\n\nif dist.get_rank() == 0:\n    dist.barrier()\n"
ROOT = Path(__file__).resolve().parents[2]

# The parts of the SARIF 2.1.0 schema that code-scanning tools rely on (written from the
# OASIS specification's required properties).
SARIF_SUBSET = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string", "format": "uri"},
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["tool"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id"],
                                            "properties": {
                                                "defaultConfiguration": {
                                                    "properties": {
                                                        "level": {
                                                            "enum": [
                                                                "none",
                                                                "note",
                                                                "warning",
                                                                "error",
                                                            ]
                                                        }
                                                    }
                                                }
                                            },
                                        },
                                    }
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["message"],
                            "properties": {
                                "message": {
                                    "type": "object",
                                    "required": ["text"],
                                },
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "ruleIndex": {"type": "integer", "minimum": 0},
                                "locations": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "properties": {
                                                    "region": {
                                                        "type": "object",
                                                        "properties": {
                                                            "startLine": {
                                                                "type": "integer",
                                                                "minimum": 1,
                                                            },
                                                            "startColumn": {
                                                                "type": "integer",
                                                                "minimum": 1,
                                                            },
                                                        },
                                                    }
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(BAD, encoding="utf-8")
    (tmp_path / "ok.py").write_text("import torch\n", encoding="utf-8")
    return tmp_path


def test_text_output_is_ruff_style_and_exit_1(project: Path):
    result = fsdp("lint", ".", cwd=project)
    assert result.code == 1
    first = result.out.splitlines()[0]
    assert first.startswith("train.py:4:5: FSDP003 ")
    assert "fix:" in result.out and "1 finding in 2 files" in result.out


def test_json_output_matches_the_contract(project: Path):
    for args in (("--json",), ("--format", "json")):
        result = fsdp("lint", *args, "train.py", "ok.py", cwd=project)
        assert result.code == 1
        data = result.json()
        assert set(data) >= {"findings", "files", "errors"} and data["files"] == 2
        assert set(data["findings"][0]) >= {
            "path",
            "line",
            "col",
            "code",
            "severity",
            "message",
            "fix",
            "ref",
        }


def test_clean_file_exits_0(project: Path):
    result = fsdp("lint", "ok.py", cwd=project)
    assert result.code == 0 and "0 findings in 1 file" in result.out


def test_sarif_output_is_valid_sarif(project: Path):
    result = fsdp("lint", "--format", "sarif", ".", cwd=project)
    assert result.code == 1
    log = json.loads(result.out)
    jsonschema.validate(log, SARIF_SUBSET)
    run = log["runs"][0]
    (finding,) = run["results"]
    rule = run["tool"]["driver"]["rules"][finding["ruleIndex"]]
    assert rule["id"] == finding["ruleId"] == "FSDP003"
    assert rule["helpUri"].startswith("https://docs.pytorch.org/")
    assert finding["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.py"


def test_nothing_readable_exits_2_with_one_line(tmp_path: Path):
    result = fsdp("lint", "missing.py", cwd=tmp_path)
    assert result.code == 2
    assert result.err.strip().splitlines()[-1].startswith("fsdp-skill: error: nothing could")
    assert "Traceback" not in result.err


def test_some_unreadable_still_checks_the_rest(project: Path):
    (project / "broken.py").write_text("def (:\n", encoding="utf-8")
    result = fsdp("lint", "--json", ".", cwd=project)
    assert result.code == 1
    data = result.json()
    assert data["files"] == 2 and data["errors"][0]["path"].endswith("broken.py")


def test_unknown_code_is_usage_error(project: Path):
    result = fsdp("lint", "--select", "FSDP777", ".", cwd=project)
    assert result.code == 2 and "FSDP777" in result.err


def test_explain_prints_the_pitfall():
    result = fsdp("lint", "--explain", "fsdp003")
    assert result.code == 0
    for part in ("FSDP003", "Why:", "Bad:", "Good:", "https://docs.pytorch.org/"):
        assert part in result.out
    data = fsdp("lint", "--explain", "FSDP002", "--torch-version", "2.4", "--json").json()
    assert data["pitfall"] == "fully-shard-root-before-children"
    assert "_composable" in data["fix"]
    assert fsdp("lint", "--explain", "FSDP099").code == 2


def test_lint_never_imports_torch(project: Path):
    code = (
        "import sys\nfrom fsdp_skill.cli import main\n"
        "try:\n    main(['lint', '--json', '.'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'transformers' not in sys.modules\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


def test_pre_commit_hook_definition():
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    hook = next(h for h in hooks if h["id"] == "fsdp-skill-lint")
    assert hook["entry"].split()[:2] == ["fsdp-skill", "lint"]
    assert hook["language"] == "python" and "python" in hook["types_or"]
    assert {"yaml", "json"} <= set(hook["types_or"])  # the Hugging Face config checks


def test_stdin_is_linted_under_the_given_name(tmp_path: Path):
    result = fsdp("lint", "-", "--stdin-filename", "snippet.py", "--json", input=BAD, cwd=tmp_path)
    assert result.code == 1
    (finding,) = result.json()["findings"]
    assert finding["path"] == "snippet.py" and finding["code"] == "FSDP003"


def test_the_pre_commit_example_names_a_revision_that_exists():
    import re
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    text = (repo / ".pre-commit-hooks.yaml").read_text()
    (rev,) = re.findall(r"^#\s+rev:\s*(\S+)", text, re.MULTILINE)
    tags = subprocess.run(
        ["git", "-C", str(repo), "tag", "--list"], capture_output=True, text=True
    ).stdout.split()
    assert rev == "main" or rev in tags, f"rev {rev!r} is neither main nor a tag ({tags})"


def test_the_readme_lint_example_is_what_lint_prints_on_a_shipped_file():
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    readme = (repo / "README.md").read_text()
    examples = re.findall(r"```console\n\$ fsdp-skill lint (\S+)\n(.*?)```", readme, re.DOTALL)
    assert examples, "the README shows no lint example"
    for path, shown in examples:
        assert (repo / path).is_file(), f"the README lints {path}, which is not shipped"
        result = fsdp("lint", path, cwd=repo)
        assert result.code == 1
        assert result.out == shown, f"README shows another output than lint prints for {path}"


def test_statistics_counts_findings_per_code(tmp_path):
    from tests.cli import fsdp

    script = tmp_path / "train.py"
    script.write_text(
        "import torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "if dist.get_rank() == 0:\n"
        "    dist.barrier()\n",
        encoding="utf-8",
    )
    result = fsdp("lint", str(script), "--statistics")
    assert result.code == 1
    lines = result.out.strip().splitlines()
    assert sorted(line.split()[1] for line in lines[:-1]) == ["FSDP003", "FSDP014"]
    assert lines[-1] == "2 findings"
    stats = fsdp("lint", str(script), "--statistics", "--json").json()["statistics"]
    assert {s["code"]: s["count"] for s in stats} == {"FSDP003": 1, "FSDP014": 1}
