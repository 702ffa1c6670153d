"""Hugging Face names in the knowledge's code resolve in the installed packages.

Every Python block of the bundle and every pitfall's code is compiled by the other knowledge
tests, and its torch names are checked; this test does the same for the names it takes from
transformers, accelerate and peft (and trl when installed), so a GPU-only block that cannot run
here still fails when it names something the pinned release does not have.
"""

from __future__ import annotations

import importlib.util

import pytest

from fsdp_skill import knowledge, markdown, symbols
from fsdp_skill.bundle_files import BUNDLE_DIR

ROOTS = tuple(
    name for name in ("transformers", "accelerate", "peft", "trl") if importlib.util.find_spec(name)
)
SKIPPED = {"trl"} - set(ROOTS)


def _codes() -> list[tuple[str, str]]:
    found = []
    for md in sorted(BUNDLE_DIR.rglob("*.md")):
        for block in markdown.code_blocks(md.read_text(encoding="utf-8")):
            if block.language in ("python", "py"):
                found.append((f"{md.relative_to(BUNDLE_DIR)}:{block.line}", block.code))
    for pitfall in (p for p in knowledge.pitfalls() if p.code_lang == "python"):
        found += [
            (f"pitfall:{pitfall.id}:bad", pitfall.bad),
            (f"pitfall:{pitfall.id}:good", pitfall.good),
        ]
    return [
        (where, code) for where, code in found if any(r in code for r in ROOTS + tuple(SKIPPED))
    ]


CODES = _codes()


def test_the_hf_guides_are_checked():
    assert len(CODES) >= 8


@pytest.mark.parametrize("where,code", CODES, ids=[w for w, _ in CODES])
def test_hf_names_resolve(where, code):
    names = symbols.longest_names(symbols.names_in_code(code, roots=ROOTS))
    unresolved = [name for _, name in names if not symbols.resolve(name)]
    assert not unresolved, f"{where}: names the installed packages lack: {unresolved}"
