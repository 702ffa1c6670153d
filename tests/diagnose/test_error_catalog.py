"""The error catalog mined from the installed packages keeps its mapping to explanations.

``benchmarks/mine_errors.py --fast`` (Python sources and the NCCL data file) runs here: a new
torch, transformers, accelerate or peft that adds a message no rule of
``benchmarks/error_catalog.toml`` covers, rewords a message a pitfall explains, or removes a
section a rule points at, fails this test.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fsdp_skill import knowledge
from fsdp_skill.diagnose import explain

BENCHMARKS = Path(__file__).resolve().parent.parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
mine_errors = pytest.importorskip("mine_errors")
pytest.importorskip("torch")


@pytest.fixture(scope="module")
def report():
    return mine_errors.mine(fast=True)


def test_the_catalog_finds_the_messages_of_every_module(report):
    modules = {t.module for t in report.templates}
    assert set(mine_errors.GOAL_MODULES) | {"nccl"} <= modules
    assert len(report.templates) > 500


def test_every_template_has_a_mapping_or_a_reason(report):
    loose = [
        f"{t.module} {t.path}:{t.line}: {t.text[:120]}"
        for t, m in report.mapping.items()
        if m is None
    ]
    assert not loose, "map these in benchmarks/error_catalog.toml:\n" + "\n".join(loose[:30])


def test_messages_mapped_to_a_pitfall_are_recognised_by_explain(report):
    lost = []
    for t, (rule, target) in ((t, m) for t, m in report.mapping.items() if m):
        if not target.startswith("pitfall:"):
            continue
        pitfall_id = target.removeprefix("pitfall:")
        assert knowledge.pitfall(pitfall_id), f"{rule.match.pattern}: no pitfall {pitfall_id}"
        ids = [m["id"] for m in explain(t.example())["matches"]]
        if pitfall_id not in ids:
            lost.append(f"{pitfall_id}: {t.text[:120]} (explain says {ids})")
    assert not lost, "\n".join(lost)


def test_every_pitfall_rule_still_finds_its_message(report):
    used = {m[0].match.pattern for m in report.mapping.values() if m}
    stale = [
        r.pitfall for r in mine_errors.load_rules() if r.pitfall and r.match.pattern not in used
    ]
    assert not stale, f"these pitfalls lost the message they were mapped from: {stale}"


def test_every_section_target_exists(report):
    from fsdp_skill.search import bundle_dir, sections

    ids = {s.id for s in sections.bundle_sections(bundle_dir())}
    targets = {
        m[1] for m in report.mapping.values() if m and m[1] and not m[1].startswith("pitfall:")
    }
    assert targets - ids == set()


def test_the_goal_modules_are_mostly_mapped(report):
    """Of the messages that are not internal invariants, most have an explanation."""
    rows = {row[0]: row for row in mine_errors.summary(report)}
    total = mapped = 0
    for module in mine_errors.GOAL_MODULES:
        _, count, pitfall, section, _, internal = rows[module]
        total += count - internal
        mapped += pitfall + section
    assert mapped / total >= 0.85, f"{mapped}/{total} mapped"


def test_templates_turn_formatting_into_holes():
    source = """
def f(x, name):
    raise ValueError(f"bad {name} of size {x.shape}")
    raise RuntimeError("expected %s but got %d" % (a, b))
    raise TypeError("want {} not {}".format(a, b))
    warnings.warn("FSDP " + name + " is deprecated")
"""
    found = {t.text for t in mine_errors.templates_in_source(source, "fsdp1", "x.py")}
    assert found == {
        "bad {} of size {}",
        "expected {} but got {}",
        "want {} not {}",
        "FSDP {} is deprecated",
    }
