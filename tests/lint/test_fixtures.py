"""The fixture corpus: every rule flags its positive scripts and none of its near misses, and
complete, correct training scripts give no finding at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsdp_skill.lint import lint_paths
from fsdp_skill.lint.rules import CODES

FIXTURES = Path(__file__).parent / "fixtures"
CASES = sorted(p for p in FIXTURES.glob("FSDP*/*.py"))
CLEAN = sorted((FIXTURES / "clean").glob("*.py"))


def _codes(path: Path, select: list[str] | None = None) -> list[str]:
    result = lint_paths([str(path)], select=select)
    assert result["files"] == 1 and not result["errors"], result["errors"]
    return [f["code"] for f in result["findings"]]


@pytest.mark.parametrize("code", CODES)
def test_every_rule_has_three_positives_and_three_near_misses(code):
    folder = FIXTURES / code
    assert len(list(folder.glob("pos_*.py"))) >= 3
    assert len(list(folder.glob("neg_*.py"))) >= 3


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.name}" for p in CASES])
def test_fixture(path: Path):
    code = path.parent.name
    found = _codes(path)
    if path.name.startswith("pos_"):
        assert code in found, f"{code} should flag {path.name}; found {found}"
    else:
        assert code not in found, f"{code} must not flag the near miss {path.name}"


def test_at_least_five_clean_training_scripts():
    assert len(CLEAN) >= 5


@pytest.mark.parametrize("path", CLEAN, ids=[p.name for p in CLEAN])
def test_clean_training_script_has_no_finding(path: Path):
    assert _codes(path) == []


@pytest.mark.parametrize("path", CLEAN, ids=[p.name for p in CLEAN])
def test_clean_scripts_are_not_trivially_silent(path: Path):
    """Each clean script uses the APIs the rules watch, so silence means the rules held."""
    text = path.read_text(encoding="utf-8")
    assert "fully_shard" in text or "FullyShardedDataParallel" in text
    assert "init_process_group" in text


def test_fsdp017_tells_one_shared_file_from_a_file_per_rank():
    """A path without the rank is overwritten by every rank; one with it is a file per rank
    (the layout RL frameworks write), which the message must not call overwritten."""
    messages = {
        name: [
            f["message"]
            for f in lint_paths([str(FIXTURES / "FSDP017" / name)])["findings"]
            if f["code"] == "FSDP017"
        ]
        for name in ("pos_fsdp2_model.py", "pos_per_rank_files.py")
    }
    assert "every rank overwrites the same file" in messages["pos_fsdp2_model.py"][0]
    per_rank = messages["pos_per_rank_files.py"][0]
    assert "a file of its own" in per_rank and "overwrites" not in per_rank
