"""The real-world corpus (tests/lint/realworld): every finding on it has a verdict, no judged
false positive comes back, and judged true positives that disappear are reported.

The pinned archives are fetched from the package registry into a cache outside the
repository on first use; without the registry the test is skipped locally and fails in CI.
"""

from __future__ import annotations

import os
import warnings

import pytest

from tests.lint.realworld import corpus


@pytest.fixture(scope="module")
def findings() -> list[dict]:
    out = []
    for package in corpus.packages():
        try:
            root = corpus.fetch(package)
        except (corpus.FetchError, OSError, TimeoutError) as exc:
            if os.environ.get("CI"):
                raise
            pytest.skip(f"cannot fetch the corpus: {exc}")
        out += corpus.lint_package(package, root)
    return out


def _key(f: dict) -> tuple[str, str, int, str]:
    return (f["package"], f["path"], f["line"], f["code"])


def test_manifest_has_enough_files_and_a_holdout():
    packages = corpus.packages()
    total = sum(len(p.paths) for p in packages)
    held = sum(len(p.paths) for p in packages if p.holdout)
    assert total >= 60
    assert 0.15 <= held / total <= 0.3


def test_every_finding_is_judged(findings):
    judged = {v.key for v in corpus.verdicts()}
    unjudged = [f"{_key(f)}: {f['message']}" for f in findings if _key(f) not in judged]
    assert not unjudged, "judge these findings in verdicts.toml:\n" + "\n".join(unjudged)


def test_no_judged_false_positive_comes_back(findings):
    false = {v.key: v.reason for v in corpus.verdicts() if not v.verdict}
    back = [f"{_key(f)} (judged false: {false[_key(f)]})" for f in findings if _key(f) in false]
    assert not back, "\n".join(back)


def test_judged_true_positives_still_found(findings):
    found = {_key(f) for f in findings}
    lost = [v for v in corpus.verdicts() if v.verdict and v.key not in found]
    for v in lost:
        warnings.warn(f"judged true positive no longer found: {v.key} ({v.reason})", stacklevel=1)
    true = [v for v in corpus.verdicts() if v.verdict]
    assert len(lost) <= len(true) // 10, [v.key for v in lost]
