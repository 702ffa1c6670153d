"""Where each agent client reads skills from, and how to tell it is on this machine.

The table follows each client's own documentation (see the README's "Where skills go").
Paths are relative to the home folder (user scope) or to the project root (project scope);
the first folder of each list is the client's own, the others are shared folders it also reads.
"""

from __future__ import annotations

import itertools
import os
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Client:
    """An agent client and the skill folders it reads."""

    name: str
    title: str
    user_dirs: tuple[str, ...]
    project_dirs: tuple[str, ...]
    markers: tuple[str, ...]
    """Folders under the home folder whose presence means the client is installed."""
    executables: tuple[str, ...] = ()
    project_markers: tuple[str, ...] = ()
    legacy_user_dirs: tuple[str, ...] = ()
    """Folders the client still reads but no longer documents as the place to use."""


CLIENTS: dict[str, Client] = {
    c.name: c
    for c in (
        Client(
            "claude-code",
            "Claude Code",
            user_dirs=(".claude/skills",),
            project_dirs=(".claude/skills",),
            markers=(".claude",),
            executables=("claude",),
            project_markers=(".claude",),
        ),
        Client(
            "codex",
            "OpenAI Codex",
            user_dirs=(".agents/skills",),
            project_dirs=(".agents/skills",),
            markers=(".codex",),
            executables=("codex",),
            project_markers=(".codex",),
            legacy_user_dirs=(".codex/skills",),
        ),
        Client(
            "cursor",
            "Cursor",
            user_dirs=(".cursor/skills",),
            project_dirs=(".cursor/skills", ".agents/skills", ".claude/skills"),
            markers=(".cursor",),
            executables=("cursor", "cursor-agent"),
            project_markers=(".cursor",),
        ),
        Client(
            "opencode",
            "OpenCode",
            user_dirs=("{config}/opencode/skills", ".claude/skills", ".agents/skills"),
            project_dirs=(".opencode/skills", ".claude/skills", ".agents/skills"),
            markers=("{config}/opencode",),
            executables=("opencode",),
            project_markers=(".opencode",),
        ),
        Client(
            "gemini",
            "Gemini CLI",
            user_dirs=(".gemini/skills", ".agents/skills"),
            project_dirs=(".gemini/skills", ".agents/skills"),
            markers=(".gemini",),
            executables=("gemini",),
            project_markers=(".gemini",),
        ),
        Client(
            "copilot",
            "GitHub Copilot / VS Code",
            user_dirs=(".copilot/skills", ".agents/skills"),
            project_dirs=(".github/skills", ".claude/skills", ".agents/skills"),
            markers=(".copilot",),
            executables=("copilot",),
            project_markers=(".github/copilot-instructions.md", ".github/skills"),
        ),
        Client(
            "kiro",
            "Kiro",
            user_dirs=(".kiro/skills",),
            project_dirs=(".kiro/skills",),
            markers=(".kiro",),
            executables=("kiro", "kiro-cli"),
            project_markers=(".kiro",),
        ),
        Client(
            "agents",
            "the shared .agents folder (Codex, OpenCode, Gemini CLI, Copilot)",
            user_dirs=(".agents/skills",),
            project_dirs=(".agents/skills",),
            markers=(".agents",),
            project_markers=(".agents",),
        ),
    )
}


def _config_home(home: Path) -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg else home / ".config"


def _resolve(entry: str, root: Path, home: Path) -> Path:
    if entry.startswith("{config}/"):
        return _config_home(home) / entry.removeprefix("{config}/")
    return root / entry


def reads(client: Client, scope_root: Path, home: Path, project: bool) -> list[Path]:
    """The skill folders ``client`` reads, in order of preference (legacy folders last)."""
    entries = client.project_dirs if project else client.user_dirs + client.legacy_user_dirs
    return [_resolve(e, scope_root, home) for e in entries]


def is_legacy(client: Client, folder: Path, home: Path) -> bool:
    return any(_resolve(e, home, home) == folder for e in client.legacy_user_dirs)


def detect(home: Path, project: Path | None = None) -> list[str]:
    """Names of the clients that appear to be installed (and, for a project, used there)."""
    found = []
    for client in CLIENTS.values():
        on_machine = any(_resolve(m, home, home).exists() for m in client.markers) or any(
            shutil.which(exe) for exe in client.executables
        )
        in_project = project is not None and any(
            (project / m).exists() for m in client.project_markers
        )
        if on_machine or in_project:
            found.append(client.name)
    return found


def choose_folders(
    names: list[str], scope_root: Path, home: Path, project: bool
) -> dict[Path, list[str]]:
    """Pick the fewest skill folders so that every named client reads the skill.

    Clients that read several folders would list the skill twice if it sat in two of them,
    so the choice first minimises such duplicates, then the number of folders, then the
    use of legacy folders, and last prefers each client's own folder over shared ones. Returns ``{folder: [client names that read it]}``.
    """
    clients = [CLIENTS[n] for n in names]
    readers = {c.name: reads(c, scope_root, home, project) for c in clients}
    candidates = sorted({f for folders in readers.values() for f in folders})

    def cost(chosen: tuple[Path, ...]) -> tuple[int, int, int, int] | None:
        duplicates = 0
        preference = 0
        for folders in readers.values():
            seen = [folders.index(f) for f in chosen if f in folders]
            if not seen:
                return None
            duplicates += len(seen) - 1
            preference += min(seen)
        legacy = sum(1 for f in chosen for c in clients if is_legacy(c, f, home))
        return duplicates, len(chosen), legacy, preference

    best: tuple[tuple[int, int, int, int], tuple[Path, ...]] | None = None
    for size in range(1, len(candidates) + 1):
        for chosen in itertools.combinations(candidates, size):
            score = cost(chosen)
            if score is not None and (best is None or score < best[0]):
                best = (score, chosen)
        if best is not None and best[0][0] == 0:
            break
    assert best is not None, "every client reads at least one folder"
    return {
        folder: [n for n in names if folder in readers[n]]
        for folder in sorted(best[1], key=candidates.index)
    }
