"""A question that pastes an error message gets explain's pitfalls first."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from fsdp_skill.bundle_files import BUNDLE_DIR
from fsdp_skill.diagnose import explain
from fsdp_skill.search import errors, index, search

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "errors"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> Path:
    """A snapshot of the shipped bundle with its own index cache."""
    root = tmp_path_factory.mktemp("shipped")
    bundle = root / "pytorch-fsdp"
    shutil.copytree(BUNDLE_DIR, bundle)
    mp = pytest.MonkeyPatch()
    mp.setenv("FSDP_SKILL_CACHE", str(root / "cache"))
    yield bundle
    mp.undo()


def _rows(bundle: Path) -> list[tuple]:
    return index.run(bundle, index.signatures)


def test_the_index_carries_every_signature_of_the_bundles_pitfalls(shipped):
    from fsdp_skill import knowledge

    expected = sum(len(p.signatures) for p in knowledge.pitfalls())
    assert len(_rows(shipped)) == expected > 50


def test_matches_agree_with_explain_on_real_error_texts(shipped):
    """The stored copy ranks errors exactly as explain does, on the real-world corpus."""
    rows = _rows(shipped)
    checked = 0
    for path in sorted(CORPUS.glob("*.toml")):
        text = tomllib.loads(path.read_text(encoding="utf-8"))["text"]
        wanted = [m["show"] for m in explain(text)["matches"]]
        assert errors.matched(text, rows) == wanted, path.name
        checked += bool(wanted)
    assert checked > 80


def test_a_pasted_error_puts_its_pitfall_first(shipped):
    question = (
        "单机多卡训练报错 RuntimeError: Distributed package doesn't have NCCL built in，怎么办"
    )
    first = search(question, k=3, bundle=shipped)["results"][0]
    assert first["id"] == "pitfall:nccl-not-available"


def test_words_of_an_error_without_its_message_match_nothing(shipped):
    rows = _rows(shipped)
    assert errors.matched("is NCCL built in my torch? which backend on Windows", rows) == []
    assert errors.matched("the port is already used by another job", rows) == []


def test_a_pitfall_the_bundle_lacks_is_never_returned(shipped, tmp_path, monkeypatch):
    monkeypatch.setenv("FSDP_SKILL_CACHE", str(tmp_path / "cache"))
    bundle = tmp_path / "pytorch-fsdp"
    shutil.copytree(shipped, bundle)
    pitfalls = bundle / "references" / "pitfalls.md"
    text = pitfalls.read_text(encoding="utf-8")
    start = text.index("## nccl-not-available\n")
    end = text.index("\n## ", start + 1)
    pitfalls.write_text(text[:start] + text[end + 1 :], encoding="utf-8")
    results = search("RuntimeError: Distributed package doesn't have NCCL built in", bundle=bundle)
    assert "pitfall:nccl-not-available" not in [r["id"] for r in results["results"]]


def test_signatures_are_matched_with_explains_flags():
    from fsdp_skill.diagnose.signatures import FLAGS

    assert errors.FLAGS == FLAGS
