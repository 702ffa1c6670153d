"""fsdp-skill verify: the checks of the Agent Skills reference validator and our own."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fsdp_skill.bundle_files import BUNDLE_DIR
from fsdp_skill.verify import check_front_matter, verify
from tests.cli import fsdp

REPO = Path(__file__).resolve().parents[1]

GOOD = {"name": "pytorch-fsdp", "description": "Helps with FSDP."}


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    copy = tmp_path / "pytorch-fsdp"
    shutil.copytree(BUNDLE_DIR, copy)
    return copy


def messages(bundle: Path) -> list[str]:
    return [p.message for p in verify(bundle)]


def test_shipped_bundle_passes():
    result = fsdp("verify", "--json")
    assert result.code == 0, result.out
    assert result.json() == {"ok": True, "problems": [], "skipped": []}


@pytest.mark.parametrize(
    "meta, expected",
    [
        ({**GOOD, "name": "PyTorch-FSDP"}, "must be lowercase"),
        ({**GOOD, "name": "pytorch--fsdp"}, "'--'"),
        ({**GOOD, "name": "pytorch_fsdp"}, "only letters, digits and hyphens"),
        ({**GOOD, "name": "other-name"}, "must equal the skill name"),
        ({**GOOD, "description": "x" * 1025}, "exceeds 1024"),
        ({**GOOD, "description": "use <b>this</b>"}, "'<' or '>'"),
        ({**GOOD, "compatibility": "y" * 501}, "exceeds 500"),
        ({**GOOD, "version": "1.0.0"}, "unexpected front matter fields: version"),
        ({**GOOD, "metadata": {"version": 1}}, "map strings to strings"),
        ({"name": "pytorch-fsdp"}, "'description' must be a non-empty string"),
        ({**GOOD, "allowed-tools": 3}, "string or a list of strings"),
    ],
)
def test_front_matter_rules(meta, expected):
    errors = check_front_matter(meta, Path("pytorch-fsdp"))
    assert any(expected in e for e in errors), errors


def test_valid_front_matter_has_no_errors():
    assert check_front_matter(GOOD, Path("pytorch-fsdp")) == []


def test_missing_front_matter(bundle: Path):
    skill = bundle / "SKILL.md"
    skill.write_text("# no front matter\n")
    assert any("must start with YAML front matter" in m for m in messages(bundle))


def test_body_budget(bundle: Path):
    skill = bundle / "SKILL.md"
    skill.write_text(skill.read_text() + "line\n" * 600)
    assert any("lines (max 500)" in m for m in messages(bundle))


def test_broken_link_and_anchor(bundle: Path):
    skill = bundle / "SKILL.md"
    skill.write_text(
        skill.read_text()
        + "\nSee [missing](references/nope.md) and [anchor](SKILL.md#no-such-heading).\n"
    )
    found = messages(bundle)
    assert any("references/nope.md does not exist" in m for m in found)
    assert any("no heading #no-such-heading" in m for m in found)


def test_python_block_that_does_not_parse(bundle: Path):
    skill = bundle / "SKILL.md"
    skill.write_text(skill.read_text() + "\n```python snippet\ndef broken(:\n```\n")
    assert any("does not parse" in m for m in messages(bundle))


def test_unknown_torch_name(bundle: Path):
    pytest.importorskip("torch")
    skill = bundle / "SKILL.md"
    skill.write_text(
        skill.read_text()
        + "\n```python snippet\nimport torch.distributed as dist\ndist.all_reduce_everything()\n```\n"
        + "\nAlso `torch.distributed.no_such_helper`.\n"
    )
    found = messages(bundle)
    assert any("torch.distributed.all_reduce_everything does not resolve" in m for m in found)
    assert any("torch.distributed.no_such_helper does not resolve" in m for m in found)


def test_verify_reports_exit_1_with_problems(bundle: Path):
    (bundle / "SKILL.md").write_text("---\nname: wrong\ndescription: d\n---\nbody\n")
    result = fsdp("verify", bundle, "--json")
    assert result.code == 1
    assert result.json()["ok"] is False


def test_verify_without_torch_says_the_torch_name_check_was_skipped(tmp_path: Path):
    blocker = tmp_path / "no-torch" / "torch"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no torch here')\n")
    env = {"PYTHONPATH": f"{blocker.parent}{os.pathsep}{REPO / 'src'}"}
    text = fsdp("verify", env=env)
    assert text.code == 0, text.err
    assert "ok" in text.out and "skipped" in text.out and "torch" in text.out
    assert "[torch]" in text.out
    report = fsdp("verify", "--json", env=env).json()
    assert report["ok"] is True and report["skipped"] == [
        "torch names: torch is not importable here"
    ]
    asked = fsdp("verify", "--no-torch")
    assert "skipped" in asked.out and "--no-torch" in asked.out
    full = fsdp("verify", "--json").json()
    assert full["skipped"] == []
