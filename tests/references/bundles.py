"""A small skill bundle for refresh tests: a SKILL.md and one page of the user's own."""

from __future__ import annotations

from pathlib import Path

USER_PAGE = "# Mine\n\n## Kept\n\nuser text\n"


def small_bundle(tmp_path: Path) -> Path:
    """A bundle under ``tmp_path`` whose ``references/mine.md`` no refresh may touch."""
    bundle = tmp_path / "bundle" / "pytorch-fsdp"
    (bundle / "references").mkdir(parents=True)
    (bundle / "SKILL.md").write_text("---\nname: pytorch-fsdp\n---\n")
    (bundle / "references" / "mine.md").write_text(USER_PAGE)
    return bundle
