"""The config checks on real config files, against the judgements written before the linter
ran on them (tests/lint/hfconfig/real/labels.toml): every finding must be one judged true,
every finding judged true must be found, and a finding judged false must never come back."""

from __future__ import annotations

import sys

import pytest

from fsdp_skill.lint import lint_paths

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from tests.lint.hfconfig.cases import REAL

LABELS = {f["name"]: f for f in tomllib.loads((REAL / "labels.toml").read_text())["file"]}
RESULT = lint_paths([str(REAL)])
FOUND: dict[str, set[tuple[str, int]]] = {}
for _finding in RESULT["findings"]:
    FOUND.setdefault(_finding["path"].rsplit("/", 1)[-1], set()).add(
        (_finding["code"], _finding["line"])
    )


def test_at_least_20_real_files_each_with_its_source():
    files = [p for p in REAL.iterdir() if p.name != "labels.toml"]
    assert len(files) >= 20
    assert sorted(p.name for p in files) == sorted(LABELS)
    assert all(label["url"].startswith("https://github.com/") for label in LABELS.values())


def test_no_errors_and_non_configs_are_skipped():
    assert RESULT["errors"] == []
    configs = [n for n, label in LABELS.items() if label.get("config", True)]
    assert RESULT["files"] == len(configs)


@pytest.mark.parametrize("name", sorted(LABELS))
def test_findings_match_the_judgements(name):
    judged = {(f["code"], f["line"]): f["true_positive"] for f in LABELS[name].get("finding", [])}
    found = FOUND.get(name, set())
    unjudged = found - set(judged)
    assert not unjudged, f"{name}: findings nobody judged (judge them first): {sorted(unjudged)}"
    false_positives = {k for k in found if judged.get(k) is False}
    assert not false_positives, f"{name}: judged false positives came back: {false_positives}"
    missed = {k for k, true in judged.items() if true and k not in found}
    assert not missed, f"{name}: judged true but not found: {sorted(missed)}"
