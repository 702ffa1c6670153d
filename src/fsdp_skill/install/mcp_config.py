"""Register the MCP server in clients configured by a JSON file, and remove it again.

Each client keeps its servers in one object of a JSON file (``mcpServers`` for Claude
Desktop and Cursor, ``servers`` for VS Code, whose file may hold comments). Registration
adds or updates one member, ``pytorch-fsdp``, and leaves every other byte of the file as it
was; the previous file is kept beside it as ``<name>.fsdp-skill.bak``; a file that is not
valid JSON is left untouched and reported. Removal deletes only that member, and the backup
when it still holds our entry (or equals the file without it).

Where each client reads its configuration (from its own documentation):

- Claude Desktop: ``claude_desktop_config.json`` in its application-data folder
  (macOS ``~/Library/Application Support/Claude``, Windows ``%APPDATA%\\Claude``; Linux
  builds use ``~/.config/Claude``). User scope only.
- Cursor: ``~/.cursor/mcp.json``; a project's ``.cursor/mcp.json``.
- VS Code: ``mcp.json`` in the user profile folder (``Code/User`` under the application-data
  folder); a workspace's ``.vscode/mcp.json``. Entries there carry ``"type": "stdio"``.
- Windsurf: ``~/.codeium/windsurf/mcp_config.json``. User scope only.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fsdp_skill import atomic
from fsdp_skill.install.json_splice import JsonSyntaxError, load, remove_member, set_member

SERVER_NAME = "pytorch-fsdp"
BACKUP_SUFFIX = ".fsdp-skill.bak"
_OURS_MARKERS = ("fsdp_skill", "fsdp-skill")


@dataclass(frozen=True)
class McpClient:
    """A client that reads MCP servers from a JSON file."""

    name: str
    title: str
    key: str
    """The top-level object that maps server names to their settings."""
    user_file: tuple[str, ...] | None
    """Path under the application-data folder (``{appdata}``) or the home folder (``~``)."""
    project_file: str | None = None
    jsonc: bool = False
    """The client accepts comments and trailing commas in the file."""
    entry_extra: Mapping[str, str] = field(default_factory=dict)


MCP_CLIENTS: dict[str, McpClient] = {
    c.name: c
    for c in (
        McpClient(
            "claude-desktop",
            "Claude Desktop",
            key="mcpServers",
            user_file=("{appdata}", "Claude", "claude_desktop_config.json"),
        ),
        McpClient(
            "cursor",
            "Cursor",
            key="mcpServers",
            user_file=("~", ".cursor", "mcp.json"),
            project_file=".cursor/mcp.json",
        ),
        McpClient(
            "vscode",
            "VS Code",
            key="servers",
            user_file=("{appdata}", "Code", "User", "mcp.json"),
            project_file=".vscode/mcp.json",
            jsonc=True,
            entry_extra={"type": "stdio"},
        ),
        McpClient(
            "windsurf",
            "Windsurf",
            key="mcpServers",
            user_file=("~", ".codeium", "windsurf", "mcp_config.json"),
        ),
    )
}


def app_data(home: Path, env: Mapping[str, str], platform: str = sys.platform) -> Path:
    """Where desktop applications keep their settings on this platform."""
    if platform == "darwin":
        return home / "Library" / "Application Support"
    if platform.startswith("win"):
        return Path(env["APPDATA"]) if env.get("APPDATA") else home / "AppData" / "Roaming"
    xdg = env.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg else home / ".config"


def config_path(
    client: McpClient,
    home: Path,
    project: Path | None = None,
    env: Mapping[str, str] | None = None,
    platform: str = sys.platform,
) -> Path | None:
    """The config file ``client`` reads, in the project or the user's scope (None: none)."""
    if project is not None:
        return Path(project) / client.project_file if client.project_file else None
    if client.user_file is None:
        return None
    first, *rest = client.user_file
    base = home if first == "~" else app_data(home, os.environ if env is None else env, platform)
    return base.joinpath(*rest)


def server_entry(client: McpClient) -> dict:
    """The settings that start this toolkit's MCP server with the Python it is installed in."""
    return {
        **client.entry_extra,
        "command": sys.executable,
        "args": ["-m", "fsdp_skill", "mcp"],
    }


def is_ours(entry: object) -> bool:
    """True if a server entry starts this toolkit (so uninstall may remove it)."""
    if not isinstance(entry, dict):
        return False
    words = [str(entry.get("command", ""))] + [str(a) for a in entry.get("args", []) or []]
    return any(marker in word for word in words for marker in _OURS_MARKERS)


class ConfigError(ValueError):
    """The config file cannot be edited safely (not JSON, wrong shape, unreadable)."""


def _read(path: Path, jsonc: bool) -> tuple[str, bool, dict]:
    """File text (without BOM), whether it had a BOM, and the parsed top-level object."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text; left untouched") from None
    bom = text.startswith("\ufeff")
    text = text.removeprefix("\ufeff")
    if not text.strip():
        return text, bom, {}
    try:
        value, _ = load(text, jsonc)
    except JsonSyntaxError as exc:
        kind = "JSON with comments" if jsonc else "JSON"
        raise ConfigError(f"{path} is not valid {kind} ({exc}); left untouched") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path} does not hold a JSON object at the top; left untouched")
    return text, bom, value


@dataclass
class Change:
    """One planned edit of one client's config file."""

    client: str
    path: Path
    action: str
    """``add``, ``update``, ``remove`` or ``up to date``."""
    old: bytes | None
    new: bytes | None
    """The new file content; None with ``remove``: delete the file (it held only our entry)."""
    own_folders: tuple[Path, ...] = ()
    """The client's own folders above the file, removed if deleting the file empties them."""

    def as_dict(self) -> dict:
        entry: dict = {"client": self.client, "path": str(self.path), "action": self.action}
        changed = self.old is not None and self.new is not None and self.old != self.new
        if changed and self.action != "remove":
            entry["backup"] = str(backup_path(self.path))
        if self.action == "remove" and self.new is None:
            entry["file_removed"] = True
        return entry


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def _check_writable(path: Path) -> None:
    """Refuse, before anything is written, a config that could not be replaced."""
    target = path.resolve() if path.is_symlink() else path
    folder = target.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write {target}: {folder} is not a writable folder")


def plan_register(client: McpClient, path: Path) -> Change:
    """The edit that adds (or refreshes) our server in ``path``; raises ConfigError."""
    entry = server_entry(client)
    if path.is_symlink() and not path.exists():
        raise ConfigError(
            f"{path} is a symbolic link to {os.readlink(path)}, which does not exist; "
            "create that file or remove the link"
        )
    _check_writable(path)
    if not path.exists():
        text = json.dumps({client.key: {SERVER_NAME: entry}}, indent=2) + "\n"
        return Change(client.name, path, "add", None, text.encode("utf-8"))
    if not path.is_file():
        raise ConfigError(f"{path} is not a file")
    text, bom, doc = _read(path, client.jsonc)
    old = path.read_bytes()
    servers = doc.get(client.key)
    if servers is not None and not isinstance(servers, dict):
        raise ConfigError(f"{path}: {client.key!r} is not an object; left untouched")
    if not text.strip():
        new_text = json.dumps({client.key: {SERVER_NAME: entry}}, indent=2) + "\n"
        action = "add"
    elif servers is None:
        new_text = set_member(text, client.jsonc, (), client.key, {SERVER_NAME: entry})
        action = "add"
    else:
        current = servers.get(SERVER_NAME)
        if isinstance(current, dict):
            # Keep settings the user added to our entry (env, cwd...), refresh the command.
            entry = {**current, **entry}
        if current == entry:
            return Change(client.name, path, "up to date", old, old)
        action = "update" if current is not None else "add"
        new_text = set_member(text, client.jsonc, (client.key,), SERVER_NAME, entry)
    _check(new_text, client, doc, entry)
    new = ("\ufeff" if bom else "").encode("utf-8") + new_text.encode("utf-8")
    return Change(client.name, path, action, old, new)


def _check(new_text: str, client: McpClient, before: dict, entry: dict | None) -> None:
    """Re-parse the edited text: it must equal the old document plus (or minus) our entry."""
    after, _ = load(new_text, client.jsonc)
    expected = json.loads(json.dumps(before))
    servers = expected.setdefault(client.key, {})
    if entry is None:
        servers.pop(SERVER_NAME, None)
    else:
        servers[SERVER_NAME] = entry
    if after != expected:  # pragma: no cover - a bug in the splice, never the user's input
        raise RuntimeError(f"editing {client.name}'s config would change more than our entry")


def own_folders(client: McpClient, path: Path, project: bool) -> tuple[Path, ...]:
    """The folders between the scope's root and ``path`` that belong to the client
    (``.cursor``, ``Claude``, ``Code/User``...), deepest first."""
    parts = Path(client.project_file).parts if project and client.project_file else None
    depth = len(parts) - 1 if parts else len(client.user_file or ()) - 2
    return tuple(path.parents[i] for i in range(max(depth, 0)))


def plan_unregister(client: McpClient, path: Path, project: bool = False) -> Change | None:
    """The edit that removes our server from ``path``; None if it is not there."""
    if not path.is_file():
        return None
    text, bom, doc = _read(path, client.jsonc)
    servers = doc.get(client.key)
    if not isinstance(servers, dict) or not is_ours(servers.get(SERVER_NAME)):
        return None
    _check_writable(path)
    old = path.read_bytes()
    rest = {k: v for k, v in doc.items() if k != client.key}
    if not rest and set(servers) == {SERVER_NAME} and not path.is_symlink():
        # Nothing but our entry: the file is ours to remove, as install may have created it.
        return Change(client.name, path, "remove", old, None, own_folders(client, path, project))
    new_text = remove_member(text, client.jsonc, (client.key,), SERVER_NAME)
    _check(new_text, client, doc, None)
    new = ("\ufeff" if bom else "").encode("utf-8") + new_text.encode("utf-8")
    return Change(client.name, path, "remove", old, new)


def apply(change: Change) -> None:
    """Write a planned change: back up the old file, then replace it atomically.

    A removal keeps no backup: what it takes out is our own entry, and a backup that still
    holds our entry (from an earlier update) is deleted with it.
    """
    # A config kept elsewhere and linked here (dotfiles) is edited where it lives, so the
    # link survives.
    target = change.path.resolve() if change.path.is_symlink() else change.path
    for folder, name in {(change.path.parent, change.path.name), (target.parent, target.name)}:
        for stale in atomic.leftovers(folder, name) + atomic.leftovers(
            folder, name + BACKUP_SUFFIX
        ):
            stale.unlink(missing_ok=True)
    if change.new is None:
        if change.action == "remove":
            change.path.unlink(missing_ok=True)
            _drop_backup(change, None)
            for folder in change.own_folders:
                if folder.is_dir() and not any(folder.iterdir()):
                    folder.rmdir()
        return
    if change.old == change.new:
        return
    if change.action == "remove":
        atomic.write_bytes(target, change.new)
        _drop_backup(change, change.new)
        return
    if change.old is not None:
        atomic.write_bytes(backup_path(change.path), change.old)
    else:
        change.path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(target, change.new)


def _drop_backup(change: Change, now: bytes | None) -> None:
    """Delete the backup of ``change.path`` if it holds our entry, or the same bytes as the
    file now: either way it keeps nothing of the user's that the file does not."""
    backup = backup_path(change.path)
    if not backup.is_file():
        return
    if now is not None and backup.read_bytes() == now:
        backup.unlink()
        return
    client = MCP_CLIENTS[change.client]
    try:
        _, _, doc = _read(backup, client.jsonc)
    except ConfigError:
        return
    servers = doc.get(client.key)
    if isinstance(servers, dict) and is_ours(servers.get(SERVER_NAME)):
        backup.unlink()


def targets(
    names: list[str] | None, home: Path, project: Path | None = None
) -> list[tuple[McpClient, Path, bool]]:
    """The config files to edit: ``(client, path, named)``.

    Named clients get their file created if needed; without names, only the clients whose
    config file already exists are touched.
    """
    chosen = []
    for client in MCP_CLIENTS.values():
        named = names is not None and client.name in names
        if names is not None and not named:
            continue
        path = config_path(client, home, project)
        if path is None:
            continue
        if named or path.is_file():
            chosen.append((client, path, named))
    return chosen


def plan_all(
    names: list[str] | None, home: Path, project: Path | None = None, remove: bool = False
) -> tuple[list[Change], list[dict]]:
    """Plan registration (or removal) for every target; nothing is written.

    A config that cannot be edited safely stops everything (UsageError) when its client was
    named, and is skipped with the reason otherwise.
    """
    from fsdp_skill.errors import UsageError

    changes: list[Change] = []
    skipped: list[dict] = []
    for client, path, named in targets(names, home, project):
        try:
            change = (
                plan_unregister(client, path, project is not None)
                if remove
                else plan_register(client, path)
            )
        except ConfigError as exc:
            if named:
                raise UsageError(str(exc)) from None
            skipped.append(
                {"client": client.name, "path": str(path), "action": "skipped", "reason": str(exc)}
            )
            continue
        if change is not None:
            changes.append(change)
    return changes, skipped


def describe(change: Change) -> str:
    """One line for the text output of install / uninstall."""
    verbs = {"add": "register", "update": "update", "remove": "unregister"}
    verb = verbs.get(change.action, change.action)
    return f"mcp {verb}: {SERVER_NAME} in {change.path} ({MCP_CLIENTS[change.client].title})"
