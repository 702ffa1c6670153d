"""Install and uninstall the bundle, keeping a manifest of what was written.

Every install builds the new bundle in a staging folder beside the target and swaps it in,
so an interrupted install leaves the previous bundle intact. A manifest of file hashes in
each installed bundle tells which files the user edited since (kept unless ``force``) and
which files install wrote (the only ones ``uninstall`` removes).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from fsdp_skill import SKILL_NAME, __version__, atomic
from fsdp_skill.bundle_files import BUNDLE_DIR, bundle_files, is_executable, sha256
from fsdp_skill.errors import UsageError
from fsdp_skill.install import api_pages, mcp_config
from fsdp_skill.install.clients import CLIENTS, choose_folders, detect, reads

MANIFEST = ".fsdp-skill-manifest.json"


@dataclass
class Target:
    """One folder the bundle goes into, and the clients that read it."""

    skills_dir: Path
    clients: list[str]

    @property
    def path(self) -> Path:
        return self.skills_dir / SKILL_NAME


@dataclass
class Report:
    """What install or uninstall did (or, on a dry run, would do)."""

    installed: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    removed: list[dict] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    mcp: list[dict] = field(default_factory=list)
    """MCP server registrations in JSON-configured clients (added, updated, removed, skipped)."""


def _home() -> Path:
    return Path(os.path.expanduser("~"))


def _validate_clients(names: list[str]) -> None:
    unknown = [n for n in names if n not in CLIENTS]
    if unknown:
        raise UsageError(f"unknown client {', '.join(unknown)!s}; choose from {', '.join(CLIENTS)}")


def split_clients(clients: list[str] | None) -> tuple[list[str] | None, list[str] | None]:
    """The skill clients and the MCP clients among ``clients`` (None: none named, detect)."""
    if not clients:
        return None, None
    unknown = [n for n in clients if n not in CLIENTS and n not in mcp_config.MCP_CLIENTS]
    if unknown:
        known = list(CLIENTS) + [n for n in mcp_config.MCP_CLIENTS if n not in CLIENTS]
        raise UsageError(f"unknown client {', '.join(unknown)}; choose from {', '.join(known)}")
    names = list(dict.fromkeys(clients))
    return [n for n in names if n in CLIENTS], [n for n in names if n in mcp_config.MCP_CLIENTS]


def _finish_mcp(changes: list, skipped: list[dict], dry_run: bool, report: Report) -> None:
    for change in changes:
        if change.action != "up to date":
            report.actions.append(mcp_config.describe(change))
            if not dry_run:
                mcp_config.apply(change)
        report.mcp.append(change.as_dict())
    for entry in skipped:
        report.actions.append(f"mcp skipped: {entry['path']}: {entry['reason']}")
    report.mcp.extend(skipped)


def plan_targets(
    clients: list[str] | None, project: Path | None, dest: Path | None
) -> tuple[list[Target], list[str]]:
    """Decide the folders to install into; returns the targets and notes for the user."""
    notes: list[str] = []
    if dest is not None:
        return [Target(Path(dest), list(clients or ["dest"]))], notes
    home = _home()
    root = Path(project) if project is not None else home
    if clients:
        _validate_clients(clients)
        names = list(dict.fromkeys(clients))
    else:
        names = detect(home, Path(project) if project is not None else None)
        if not names:
            names = ["agents"]
            notes.append("no agent client detected; installing into the shared .agents folder")
    folders = choose_folders(names, root, home, project is not None)
    return [Target(folder, readers) for folder, readers in folders.items()], notes


def _check_writable(skills_dir: Path) -> None:
    """Refuse a destination that is a file or cannot be written, before writing anything."""
    probe = skills_dir
    while not probe.exists():
        if probe.is_symlink():
            raise UsageError(f"destination {skills_dir} is a broken symbolic link")
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"destination {probe} is a file, not a folder")
    target = skills_dir / SKILL_NAME
    if target.exists() and not target.is_dir():
        raise UsageError(f"destination {target} is a file, not a folder")
    # os.access() says yes to root even on read-only mounts: probe with a real file.
    try:
        fd, name = tempfile.mkstemp(prefix=".fsdp-skill-probe-", dir=probe)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise UsageError(f"destination {probe} is not writable ({exc.strerror})") from None


def read_manifest(bundle_dir: Path) -> dict | None:
    """The manifest of an installed bundle; None if there is none; UsageError if corrupted."""
    path = bundle_dir / MANIFEST
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        files = data["files"]
        if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            raise ValueError("files is not a map of path to hash")
        if not isinstance(data.get("created_dirs", []), list):
            raise ValueError("created_dirs is not a list")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"manifest {path} is corrupted ({exc}); remove {bundle_dir} or reinstall with --force"
        ) from None
    for rel in files:
        _safe_relpath(rel, path)
    return data


def _safe_relpath(rel: str, manifest: Path) -> str:
    parts = Path(rel).parts
    if Path(rel).is_absolute() or ".." in parts or not parts:
        raise UsageError(f"manifest {manifest} is corrupted (path {rel!r} leaves the bundle)")
    return rel


def _file_hash(path: Path) -> str | None:
    try:
        return sha256(path.read_bytes()) if path.is_file() else None
    except OSError:
        return None


def _missing_ancestors(path: Path) -> list[Path]:
    """The folders from ``path`` upward that do not exist yet (deepest first)."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    return missing


def _install_one(
    target: Target, files: dict[str, bytes], force: bool, dry_run: bool, report: Report
) -> None:
    bundle_dir = target.path
    manifest = read_manifest(bundle_dir) if bundle_dir.exists() else None
    if bundle_dir.exists() and manifest is None and any(bundle_dir.iterdir()) and not force:
        raise UsageError(
            f"{bundle_dir} exists and was not installed by fsdp-skill; move it away or pass --force"
        )
    old_hashes: dict[str, str] = manifest["files"] if manifest else {}
    created = (
        [str(p) for p in _missing_ancestors(target.skills_dir)]
        if manifest is None
        else manifest.get("created_dirs", [])
    )

    kept: list[str] = []
    new_hashes: dict[str, str] = {}
    changed = manifest is None
    for rel, data in files.items():
        on_disk = _file_hash(bundle_dir / rel)
        edited = on_disk is not None and rel in old_hashes and on_disk != old_hashes[rel]
        unknown = on_disk is not None and rel not in old_hashes and manifest is not None
        if (edited or unknown) and not force and on_disk != sha256(data):
            kept.append(rel)
            new_hashes[rel] = old_hashes.get(rel, sha256(data))
            continue
        new_hashes[rel] = sha256(data)
        if on_disk != new_hashes[rel] or old_hashes.get(rel) != new_hashes[rel]:
            changed = True
    obsolete = [
        rel
        for rel, digest in old_hashes.items()
        if rel not in files and _file_hash(bundle_dir / rel) == digest
    ]
    changed = changed or bool(obsolete)

    entries = [{"client": c, "path": str(bundle_dir)} for c in target.clients]
    if not changed:
        for c in target.clients:
            report.skipped.append({"client": c, "path": str(bundle_dir), "reason": "up to date"})
        report.actions.append(f"up to date: {bundle_dir}")
        return
    for entry in entries:
        entry["kept"] = kept
    report.installed.extend(entries)
    verb = "update" if manifest is not None else "install"
    report.actions.append(f"{verb}: {bundle_dir} (for {', '.join(target.clients)})")
    report.actions.extend(f"  keep edited file: {rel}" for rel in kept)
    if dry_run:
        return

    try:
        _write_bundle(target, bundle_dir, files, kept, obsolete, new_hashes, created)
    except OSError as exc:
        if manifest is None:
            _remove_empty(created)
        raise UsageError(
            f"cannot write {bundle_dir}: {exc.strerror or exc}; the previous state is unchanged"
        ) from None


def _remove_empty(folders: list[str]) -> None:
    """Remove the folders install created, deepest first, where they are empty."""
    for created in folders:
        folder = Path(created)
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def _write_bundle(
    target: Target,
    bundle_dir: Path,
    files: dict[str, bytes],
    kept: list[str],
    obsolete: list[str],
    new_hashes: dict[str, str],
    created: list[str],
) -> None:
    """Build the new bundle in a staging folder beside the target, then swap it in."""
    target.skills_dir.mkdir(parents=True, exist_ok=True)
    with atomic.staging_dir(target.skills_dir, SKILL_NAME) as staging:
        if bundle_dir.exists():
            shutil.copytree(bundle_dir, staging, symlinks=True, dirs_exist_ok=True)
        for rel in obsolete:
            (staging / rel).unlink(missing_ok=True)
        for rel, data in files.items():
            if rel in kept:
                continue
            dest = staging / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.unlink(missing_ok=True)
            dest.write_bytes(data)
            dest.chmod(0o755 if is_executable(rel) else 0o644)
        manifest_data = {
            "tool": "fsdp-skill",
            "version": __version__,
            "files": new_hashes,
            "created_dirs": created,
        }
        (staging / MANIFEST).write_text(json.dumps(manifest_data, indent=2, sort_keys=True))
        staging.chmod(0o755)
        atomic.replace_dir(staging, bundle_dir)


def install(
    clients: list[str] | None = None,
    project: Path | None = None,
    dest: Path | None = None,
    force: bool = False,
    dry_run: bool = False,
    bundle: Path = BUNDLE_DIR,
    mcp: bool = True,
    api_refs: bool = True,
) -> Report:
    """Install the bundle for ``clients`` (default: those detected) and return a report.

    ``project`` installs into that project's skill folders, ``dest`` into ``dest/pytorch-fsdp``.
    Files the user edited since the last install are kept unless ``force``; a second install
    with nothing new writes nothing. Raises UsageError before writing anything when a target
    cannot be written. With ``mcp``, the MCP server is also registered in the JSON-configured
    clients that were named, or (none named) whose config file exists. With ``api_refs``,
    the API references are rebuilt for the installed torch when it is not the version the
    shipped pages come from.
    """
    skill_names, mcp_names = split_clients(clients)
    mcp_changes, mcp_skipped = (
        mcp_config.plan_all(mcp_names, _home(), project) if mcp and dest is None else ([], [])
    )
    if clients and not skill_names and dest is None:
        targets, notes = [], []
    else:
        targets, notes = plan_targets(skill_names, project, dest)
    for target in targets:
        _check_writable(target.skills_dir)
        if target.path.exists():
            read_manifest(target.path)
    files = bundle_files(bundle)
    report = Report()
    report.actions.extend(notes)
    if api_refs and targets:
        files, note = api_pages.for_installed_torch(files)
        report.actions.extend([note] if note else [])
    for target in targets:
        _install_one(target, files, force, dry_run, report)
    _finish_mcp(mcp_changes, mcp_skipped, dry_run, report)
    return report


def uninstall(
    clients: list[str] | None = None,
    project: Path | None = None,
    dest: Path | None = None,
    dry_run: bool = False,
    mcp: bool = True,
) -> Report:
    """Remove what install wrote: unedited files it listed, and the folders it created.

    With ``mcp``, also removes this toolkit's MCP server entry (and nothing else) from the
    JSON-configured clients that were named, or (none named) from every one of them.
    """
    home = _home()
    skill_names, mcp_names = split_clients(clients)
    mcp_changes, mcp_skipped = (
        mcp_config.plan_all(mcp_names, home, project, remove=True)
        if mcp and dest is None
        else ([], [])
    )
    readers: dict[Path, list[str]] = {}
    if dest is not None:
        readers[Path(dest)] = ["dest"]
    else:
        root = Path(project) if project is not None else home
        for name in skill_names if skill_names is not None else list(CLIENTS):
            for folder in reads(CLIENTS[name], root, home, project is not None):
                readers.setdefault(folder, []).append(name)
    found = [
        (folder, names, read_manifest(folder / SKILL_NAME))
        for folder, names in readers.items()
        if (folder / SKILL_NAME).is_dir()
    ]
    report = Report()
    # MCP entries go first: a config file they empty is deleted, so that the folders the
    # bundle's install created (e.g. .cursor) can be removed with the bundle.
    _finish_mcp(mcp_changes, mcp_skipped, dry_run, report)
    for skills_dir, names, manifest in found:
        if manifest is None:
            continue
        bundle_dir = skills_dir / SKILL_NAME
        report.removed.extend({"client": n, "path": str(bundle_dir)} for n in names)
        report.actions.append(f"remove: {bundle_dir} (read by {', '.join(names)})")
        if not dry_run:
            _remove_bundle(bundle_dir, manifest, report)
    return report


def _remove_bundle(bundle_dir: Path, manifest: dict, report: Report) -> None:
    leftovers: list[str] = []
    for path in sorted(bundle_dir.rglob("*"), reverse=True):
        rel = path.relative_to(bundle_dir).as_posix()
        if path.is_dir() and not path.is_symlink():
            continue
        if rel == MANIFEST:
            continue
        if manifest["files"].get(rel) == _file_hash(path):
            path.unlink()
        else:
            leftovers.append(rel)
    for path in sorted(bundle_dir.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
            path.rmdir()
    if leftovers:
        report.actions.extend(f"  keep file not written by install: {rel}" for rel in leftovers)
        return
    (bundle_dir / MANIFEST).unlink()
    bundle_dir.rmdir()
    _remove_empty(manifest.get("created_dirs", []))


def adopt_generated(bundle_dir: Path, names: list[str]) -> None:
    """Record in an installed bundle's manifest the reference pages ``refresh`` rewrote.

    ``names`` are file names under ``references/``. Pages that exist get their new hash, pages
    that are gone leave the manifest; a bundle with no manifest (not installed by us) is left
    alone. Install and uninstall then treat the refreshed pages as their own, not as edits.
    """
    manifest = read_manifest(bundle_dir)
    if manifest is None:
        return
    for name in names:
        rel = f"references/{name}"
        digest = _file_hash(bundle_dir / rel)
        if digest is None:
            manifest["files"].pop(rel, None)
        else:
            manifest["files"][rel] = digest
    atomic.write_text(bundle_dir / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True))
