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


_UNVERIFIED = re.compile(r"not verified|unverified|not checked|to be checked", re.I)


def _sourced_facts() -> list[tuple[str, str]]:
    """``(where, source)`` for every version or default fact the knowledge records."""
    found = [(f"guide {g}: {fact.get('api', '?')}", fact.get("source", "")) for g, _, fact in FACTS]
    found += [(f"symbol {name}", entry.get("source", "")) for name, entry in SYMBOLS]
    found += [(f"env {v.name}", v.source) for v in knowledge.env_vars()]
    return found


@pytest.mark.parametrize("where,source", _sourced_facts(), ids=[w for w, _ in _sourced_facts()])
def test_every_fact_carries_a_checked_source(where, source):
    """A version or default fact names where it was checked; none admits it was not."""
    assert source.strip(), f"{where}: no source"
    assert not _UNVERIFIED.search(source), f"{where}: source says it was not verified: {source}"


def test_prose_does_not_admit_unverified_version_facts():
    """The same rule for the guides' and pitfalls' prose (an 'Older versions' note, say)."""
    texts = {f"guide {g.id}": g.body for g in knowledge.guides()}
    texts.update({f"pitfall {p.id}": p.fix + p.cause for p in knowledge.pitfalls()})
    for where, text in texts.items():
        flat = " ".join(text.split())
        assert not _UNVERIFIED.search(flat), f"{where}: {_UNVERIFIED.search(flat).group(0)!r}"


def test_a_fact_without_since_says_where_it_was_checked():
    """No ``since``: the fact is about the installed release, and its source says so."""
    for guide, _, fact in FACTS:
        if not fact.get("since"):
            assert re.search(r"checked|installed", fact["source"]), f"{guide}: {fact['api']}"


@pytest.mark.parametrize(
    ("spec", "version", "allowed"),
    [
        (">=2.0", "2.13.0+cpu", True),
        ("<2.12", "2.13.0", False),
        ("<2.12", "2.12.1", False),  # the bound's precision: 2.12.x is not below 2.12
        ("<2.12", "2.11.0", True),
        (">=1.10", "1.9.1", False),
        (">=2.4,<2.6", "2.5.1", True),
        (">=2.4,<2.6", "2.6.0", False),
        ("", "2.13.0", True),
        ("any", "2.13.0", True),  # an unreadable clause does not exclude
    ],
)
def test_torch_spec_allows(spec, version, allowed):
    assert knowledge.torch_spec_allows(spec, version) is allowed


def test_every_pitfall_torch_range_is_readable():
    """explain reads each pitfall's ``torch`` field to tell whether the installed torch is in it."""
    clause = re.compile(r"^(>=|<)\s*\d+(\.\d+)*$")  # the two bounds torch_spec_allows reads
    for pitfall in knowledge.pitfalls():
        for part in pitfall.torch.split(","):
            assert clause.match(part.strip()), f"{pitfall.id}: torch = {pitfall.torch!r}"


def test_the_installed_torch_version_is_read_without_the_metadata_module():
    """explain asks for the installed torch on its fast path: the version file gives the same
    answer as the package metadata, without importing importlib.metadata (tens of ms) or torch."""
    import subprocess
    import sys

    script = (
        "import sys\nfrom fsdp_skill import knowledge\nprint(knowledge.installed_torch_version())\n"
        "print('importlib.metadata' in sys.modules, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    version, loaded = out.stdout.splitlines()
    from importlib import metadata

    assert version == metadata.version("torch")
    assert loaded == "False False"
