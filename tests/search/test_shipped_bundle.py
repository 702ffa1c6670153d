"""The shipped bundle: every section search returns can be shown whole."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from fsdp_skill.bundle_files import BUNDLE_DIR
from fsdp_skill.search import search, sections, show

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

QUESTIONS = Path(__file__).resolve().parents[2] / "benchmarks" / "search_questions.toml"


def test_every_result_of_the_benchmark_questions_can_be_shown(tmp_path, monkeypatch):
    monkeypatch.setenv("FSDP_SKILL_CACHE", str(tmp_path / "cache"))
    bundle = tmp_path / "pytorch-fsdp"  # a snapshot: the pages must not change mid-test
    shutil.copytree(BUNDLE_DIR, bundle)
    whole = {s.id: s.text for s in sections.searchable_sections(bundle)}
    questions = tomllib.loads(QUESTIONS.read_text(encoding="utf-8"))["question"]
    seen = set()
    for question in questions:
        for hit in search(question["q"], k=5, bundle=bundle)["results"]:
            seen.add(hit["id"])
    assert len(seen) > 100
    for section_id in sorted(seen):
        assert show(section_id, bundle=bundle)["text"] == whole[section_id]
