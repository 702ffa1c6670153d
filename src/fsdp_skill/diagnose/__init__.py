"""Diagnose distributed failures: ``explain`` (error text -> pitfalls) and ``hang`` (logs -> divergence).

Both are on the fast path: nothing here imports torch. The work lives in the submodules,
imported when a function is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fsdp_skill.roots import Roots


def explain(text: str) -> dict:
    """Every known error in ``text`` (a message, traceback or whole log), ranked.

    Returns ``{"matches": [{"id", "title", "cause", "fix", "refs", "confidence", "matched", ...}]}``.
    """
    from fsdp_skill.diagnose.matching import explain as run

    return run(text)


def hang(paths: list[str], roots: Roots | None = None) -> dict:
    """Read every rank's logs or flight-recorder dumps and find where the ranks diverged.

    Returns ``{"ranks", "verdict", "culprit_ranks", "first_divergence", "advice", "inputs", ...}``;
    raises ``UsageError`` when nothing could be read. With ``roots`` (the MCP server's), no
    file outside them is read.
    """
    from fsdp_skill.diagnose.divergence import hang as run

    return run(paths, roots)
