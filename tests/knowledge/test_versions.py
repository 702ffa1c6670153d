"""Version facts: symbols.toml and the guides' ``versions`` tables agree with the installed torch.

A name listed in symbols.toml must resolve in the installed torch exactly when the installed
version lies in its ``[since, until)`` range, and every version fact must name its source.
"""

from __future__ import annotations

import re

import pytest

from fsdp_skill import knowledge, symbols

SYMBOLS = sorted(knowledge.versioned_symbols().items())
FACTS = [(g.id, i, fact) for g in knowledge.guides() for i, fact in enumerate(g.versions)]
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?\b")


def test_symbols_file_is_not_empty():
    assert SYMBOLS, "symbols.toml lists no versioned names"


@pytest.mark.parametrize("name,entry", SYMBOLS, ids=[name for name, _ in SYMBOLS])
def test_symbol_entry_is_well_formed(name, entry):
    assert set(entry) <= {"name", "since", "until", "source"}, f"unknown keys in {name}"
    assert entry.get("source", "").strip(), f"{name}: a version fact needs its source"
    since, until = entry.get("since", ""), entry.get("until", "")
    for bound in (since, until):
        assert not bound or re.fullmatch(r"\d+\.\d+(\.\d+)?", bound), f"{name}: bad {bound!r}"
    if since and until:
        assert knowledge.version_tuple(since) < knowledge.version_tuple(until), name
    assert since or until, f"{name}: a name that always exists does not belong here"


@pytest.mark.parametrize("name,entry", SYMBOLS, ids=[name for name, _ in SYMBOLS])
def test_symbol_resolves_iff_installed_version_in_range(name, entry):
    version = symbols.torch_version()
    assert version is not None, "torch is not installed"
    expected = knowledge.in_range(version, entry.get("since", ""), entry.get("until", ""))
    assert symbols.resolve(name) is expected, (
        f"{name}: symbols.toml says {'present' if expected else 'absent'} in torch {version} "
        f"(since={entry.get('since')!r}, until={entry.get('until')!r})"
    )


@pytest.mark.parametrize("guide,index,fact", FACTS, ids=[f"{g}[{i}]" for g, i, _ in FACTS])
def test_guide_version_fact_is_well_formed(guide, index, fact):
    assert set(fact) <= {"api", "since", "until", "source"}, f"{guide}: unknown keys {fact}"
    assert fact.get("api", "").strip(), f"{guide}: version fact {index} names no API"
    assert fact.get("source", "").strip(), f"{guide}: {fact['api']}: no source"
    for key in ("since", "until"):
        value = fact.get(key, "")
        assert not value or _VERSION.match(value), f"{guide}: {fact['api']}: bad {key} {value!r}"
    if fact.get("since") and fact.get("until"):
        assert knowledge.version_tuple(fact["since"]) < knowledge.version_tuple(fact["until"])


# The guides whose version facts follow the "no since means not verified" convention.
PART_B_GUIDES = {
    "fsdp2",
    "fsdp1",
    "hsdp",
    "migrate-fsdp1-to-fsdp2",
    "mixed-precision",
    "cpu-offload",
    "activation-checkpointing",
    "meta-device-init",
    "checkpointing",
    "grad-clipping-accumulation",
    "torch-compile",
}


def test_unverified_facts_say_so():
    """A fact without a since version must admit, in its source, that it was not verified."""
    for guide, _, fact in FACTS:
        if guide in PART_B_GUIDES and not fact.get("since"):
            assert "not verified" in fact["source"], f"{guide}: {fact['api']}"
