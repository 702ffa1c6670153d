"""The code the knowledge recommends passes the project's own linter.

Every Python block of every guide, and the good code of every pitfall, must give no
`fsdp-skill lint` finding: advice that our linter flags would contradict itself.
"""

from __future__ import annotations

import pytest

from fsdp_skill import knowledge, markdown
from fsdp_skill.lint import lint_source

BLOCKS = [
    (f"{g.id}:{b.line}", b.code)
    for g in knowledge.guides()
    for b in markdown.code_blocks(g.body)
    if b.language in ("python", "py")
]
PITFALLS = [p.id for p in knowledge.pitfalls()]


def _findings(code: str, name: str) -> list[str]:
    result = lint_source(code, filename=name)
    return [f"{f['line']}: {f['code']} {f['message']}" for f in result["findings"]]


@pytest.mark.parametrize("name,code", BLOCKS, ids=[name for name, _ in BLOCKS])
def test_guide_block_is_lint_clean(name, code):
    assert not _findings(code, name)


@pytest.mark.parametrize("pitfall_id", PITFALLS)
def test_pitfall_good_code_is_lint_clean(pitfall_id):
    pitfall = knowledge.pitfall(pitfall_id)
    assert pitfall is not None, f"no pitfall {pitfall_id}"
    suffix = "py" if pitfall.code_lang == "python" else pitfall.code_lang  # a config: lint reads it
    assert not _findings(pitfall.good, f"{pitfall_id}.{suffix}")
