"""Keeping file access inside a set of folders: the roots an MCP client declared.

The MCP server hands the tools a ``Roots``. Every path a tool opens goes through
``Roots.admit`` just before: a path argument, each file a folder walk finds, and each
configuration file looked up beside them (``pyproject.toml``, ``.gitignore``). ``admit``
resolves the path (symbolic links to files or folders, ``..``, absolute paths) and refuses
it unless the result lies inside a root, so what is checked is exactly what is read, and no
walk can reach a file that the check did not see. A refusal never says whether the path
exists.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from fsdp_skill.errors import UsageError

MAX_PATH = 4_096
"""Characters a path argument may have."""


class OutsideRoots(UsageError):
    """A path leads outside every root."""


@dataclass(frozen=True)
class Roots:
    """The folders file access is confined to (resolved once, when built)."""

    folders: tuple[Path, ...]

    @classmethod
    def of(cls, folders: Iterable[str | Path]) -> Roots:
        """Roots from folder paths (resolved now: a link as a root grants its target)."""
        return cls(tuple(Path(f).resolve() for f in folders))

    def contains(self, path: Path) -> bool:
        """Whether ``path``, resolved, lies inside a root."""
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):  # a link loop, an unreadable folder on the way
            return False
        return any(resolved.is_relative_to(root) for root in self.folders)

    def admit(self, path: str | Path, shown: str | None = None) -> Path:
        """``path`` resolved, if that lies inside a root; ``OutsideRoots`` otherwise.

        ``shown`` is the name the refusal quotes (default: ``path`` as given).
        """
        path = Path(path)
        if not self.contains(path):
            raise OutsideRoots(f"{shown or path} is outside the client's roots ({self})")
        return path.resolve()

    def locate(self, raw: str) -> Path:
        """A path argument, resolved and admitted: relative paths start at the first root.

        Raises UsageError when there are no roots, the argument is malformed, it leads
        outside the roots, or (only then) it does not exist.
        """
        if not self.folders:
            raise UsageError(
                "no roots: the client declared no roots and the server was started without "
                "--root, so no file may be read; pass the text itself instead"
            )
        if not raw or len(raw) > MAX_PATH or "\x00" in raw:
            raise UsageError(f"bad path {raw[:80]!r}")
        path = Path(raw)
        if not path.is_absolute():
            path = self.folders[0] / path
        resolved = self.admit(path, shown=raw)
        if not resolved.exists():
            raise UsageError(f"{raw} does not exist")
        return resolved

    def __str__(self) -> str:
        return ", ".join(str(f) for f in self.folders)


def readable(path: Path, roots: Roots | None) -> bool:
    """Whether ``path`` may be looked at: anywhere without roots, else only inside them."""
    return roots is None or roots.contains(path)


NOT_READ = "a link that leads outside the client's roots: not read"
"""What a tool reports for a file its walk found but ``admit`` refused."""
