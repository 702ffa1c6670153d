"""Install and uninstall the bundle, keeping a manifest of what was written.

Every install builds the new bundle in a staging folder beside the target and swaps it in,
so an interrupted install leaves the previous bundle intact. A manifest of file hashes in
each installed bundle tells which files the user edited since (kept unless ``force``) and
which files install wrote (the only ones ``uninstall`` removes).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from fsdp_skill import SKILL_NAME, __version__, atomic, locking
from fsdp_skill.bundle_files import BUNDLE_DIR, MANIFEST, bundle_files, is_executable, sha256
from fsdp_skill.errors import UsageError
from fsdp_skill.install import api_pages, mcp_config
from fsdp_skill.install.clients import CLIENTS, choose_folders, detect, reads
from fsdp_skill.install.manifest import (
    CorruptedManifest,
    adopt_generated,
    file_hash,
    merge_created,
    read_manifest,
    removable_created,
)

__all__ = ["MANIFEST", "adopt_generated", "install", "read_manifest", "sha256", "uninstall"]


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
                try:
                    mcp_config.apply(change)
                except OSError as exc:
                    raise UsageError(
                        f"cannot write {change.path}: {_reason(exc)}; the file is unchanged"
                    ) from None
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
    if target.is_symlink():
        target = real_bundle(target)
        probe = target.parent
    if target.exists() and not target.is_dir():
        raise UsageError(f"destination {target} is a file, not a folder")
    # os.access() says yes to root even on read-only mounts: probe with a real file.
    try:
        fd, name = tempfile.mkstemp(prefix=".fsdp-skill-probe-", dir=probe)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise UsageError(f"destination {probe} is not writable ({exc.strerror})") from None


def real_bundle(path: Path) -> Path:
    """The folder a bundle path stands for: itself, or where a symbolic link points.

    A link (``~/.claude/skills/pytorch-fsdp -> ~/dotfiles/pytorch-fsdp``) is followed, so the
    bundle is updated where it lives and the link stays; a link to nothing is refused.
    """
    if not path.is_symlink():
        return path
    real = path.resolve()
    if not real.exists():
        raise UsageError(
            f"{path} is a symbolic link to {real}, which does not exist; "
            "create that folder or remove the link"
        )
    if not real.is_dir():
        raise UsageError(f"{path} is a symbolic link to {real}, which is not a folder")
    return real


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc).splitlines()[0][:200]


def _backup_folder(bundle_dir: Path) -> Path:
    """Where a bundle with a corrupted manifest is moved: beside the skills folder, not in
    it, so that no client loads the old copy as a second skill."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = bundle_dir.parent.parent / f"{bundle_dir.name}.backup-{stamp}"
    candidate, n = base, 1
    while candidate.exists() or candidate.is_symlink():
        candidate = base.with_name(f"{base.name}-{n}")
        n += 1
    return candidate


def _move_aside(bundle_dir: Path, report: Report) -> None:
    backup = _backup_folder(bundle_dir)
    try:
        os.rename(bundle_dir, backup)
    except OSError as exc:
        raise UsageError(
            f"cannot move {bundle_dir} aside to {backup} ({_reason(exc)}); move it yourself "
            "and install again"
        ) from None
    report.actions.append(
        f"moved {bundle_dir} (corrupted manifest) aside to {backup}: your files are there"
    )


def _plan_files(
    bundle_dir: Path, manifest: dict | None, files: dict[str, bytes], force: bool
) -> tuple[list[str], list[str], dict[str, str], bool]:
    """(edited files kept, obsolete files removed, new hashes, whether anything changes)."""
    old_hashes: dict[str, str] = manifest["files"] if manifest else {}
    kept: list[str] = []
    new_hashes: dict[str, str] = {}
    changed = manifest is None
    for rel, data in files.items():
        on_disk = file_hash(bundle_dir / rel)
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
        if rel not in files and file_hash(bundle_dir / rel) == digest
    ]
    return kept, obsolete, new_hashes, changed or bool(obsolete)


def _install_one(
    target: Target, files: dict[str, bytes], force: bool, dry_run: bool, report: Report
) -> None:
    link = target.path
    bundle_dir = real_bundle(link)
    shown = str(link) if link == bundle_dir else f"{link} -> {bundle_dir}"
    if dry_run:
        _install_locked(target, bundle_dir, shown, files, force, True, [], report)
        return
    made: list[Path] = []
    try:
        with locking.bundle_lock(bundle_dir, make_parents=link == bundle_dir) as made:
            _install_locked(target, bundle_dir, shown, files, force, False, made, report)
            made = []  # installed: the folders are the bundle's now
    except OSError as exc:
        raise UsageError(
            f"cannot write {bundle_dir}: {_reason(exc)}; the previous state is unchanged"
        ) from None
    finally:
        _remove_empty(made)


def _install_locked(
    target: Target,
    bundle_dir: Path,
    shown: str,
    files: dict[str, bytes],
    force: bool,
    dry_run: bool,
    made: list[Path],
    report: Report,
) -> None:
    try:
        manifest = read_manifest(bundle_dir) if bundle_dir.is_dir() else None
    except CorruptedManifest:
        if not force:
            raise
        if dry_run:
            report.actions.append(f"move aside: {bundle_dir} (corrupted manifest)")
        else:
            _move_aside(bundle_dir, report)
        manifest = None
    if bundle_dir.is_dir() and manifest is None and any(bundle_dir.iterdir()) and not force:
        raise UsageError(
            f"{bundle_dir} exists and was not installed by fsdp-skill; move it away or pass --force"
        )
    kept, obsolete, new_hashes, changed = _plan_files(bundle_dir, manifest, files, force)
    if not changed:
        if manifest is not None and made and not dry_run:
            # A concurrent install that found the folders made took the lock first and wrote
            # this same bundle: record the folders this one created, or no uninstall removes them.
            _record_created(bundle_dir, manifest, merge_created(manifest, made))
        for c in target.clients:
            report.skipped.append({"client": c, "path": str(target.path), "reason": "up to date"})
        report.actions.append(f"up to date: {shown}")
        return
    report.installed.extend(
        {"client": c, "path": str(target.path), "kept": kept} for c in target.clients
    )
    verb = "update" if manifest is not None else "install"
    report.actions.append(f"{verb}: {shown} (for {', '.join(target.clients)})")
    report.actions.extend(f"  keep edited file: {rel}" for rel in kept)
    if dry_run:
        return
    created = merge_created(manifest, made)
    _write_bundle(bundle_dir, files, kept, obsolete, new_hashes, created)


def _record_created(bundle_dir: Path, manifest: dict, created: dict) -> None:
    """Rewrite the bundle's manifest, unchanged but for the created folders it lists."""
    data = {**manifest, **created}
    text = json.dumps(data, indent=2, sort_keys=True)
    atomic.write_bytes(bundle_dir / MANIFEST, text.encode("utf-8"), mode=0o644)


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders install created, deepest first, where they are empty."""
    for folder in folders:
        with contextlib.suppress(OSError):
            if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
                folder.rmdir()


def _write_bundle(
    bundle_dir: Path,
    files: dict[str, bytes],
    kept: list[str],
    obsolete: list[str],
    new_hashes: dict[str, str],
    created: dict,
) -> None:
    """Build the new bundle in a staging folder beside the target, then swap it in."""
    with atomic.staging_dir(bundle_dir.parent, bundle_dir.name) as staging:
        if bundle_dir.is_dir():
            for entry in sorted(os.listdir(bundle_dir)):
                atomic.copy_entry(bundle_dir / entry, staging / entry)
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
            **created,
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
        if target.path.is_dir():
            try:
                read_manifest(target.path)
            except CorruptedManifest:
                if not force:
                    raise
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
    scope_root = None if dest is not None else (Path(project) if project is not None else home)
    found = []
    for folder, names in readers.items():
        link = folder / SKILL_NAME
        if link.is_dir() and read_manifest(link) is not None:
            bundle_dir = real_bundle(link)
            if not dry_run:
                _check_removable(bundle_dir)
            found.append((folder, names, link, bundle_dir))
    report = Report()
    # MCP entries go first: a config file they empty is deleted, so that the folders the
    # bundle's install created (e.g. .cursor) can be removed with the bundle.
    _finish_mcp(mcp_changes, mcp_skipped, dry_run, report)
    for skills_dir, names, link, bundle_dir in found:
        report.removed.extend({"client": n, "path": str(link)} for n in names)
        report.actions.append(f"remove: {link} (read by {', '.join(names)})")
        if dry_run:
            continue
        try:
            with locking.bundle_lock(bundle_dir):
                manifest = read_manifest(bundle_dir) if bundle_dir.is_dir() else None
                gone = manifest is not None and _remove_bundle(
                    bundle_dir, manifest, report, keep_folder=link != bundle_dir
                )
        except OSError as exc:
            raise UsageError(
                f"cannot remove {bundle_dir}: {_reason(exc)}; uninstall stopped there"
            ) from None
        if gone and link == bundle_dir:
            _remove_empty(removable_created(manifest, skills_dir, scope_root))
    return report


def _check_removable(bundle_dir: Path) -> None:
    """Refuse, before anything is removed, a bundle on a read-only or locked-down folder."""
    for folder in (bundle_dir.parent, bundle_dir):
        try:
            fd, name = tempfile.mkstemp(prefix=".fsdp-skill-probe-", dir=folder)
            os.close(fd)
            os.unlink(name)
        except OSError as exc:
            raise UsageError(
                f"cannot uninstall {bundle_dir}: {folder} is not writable ({_reason(exc)}); "
                "nothing was removed"
            ) from None


def _remove_bundle(bundle_dir: Path, manifest: dict, report: Report, keep_folder: bool) -> bool:
    """Delete the files install wrote and unedited since; True if the bundle is gone.

    With ``keep_folder`` (the bundle is a link's target, a folder the user made) the emptied
    folder stays.
    """
    leftovers: list[str] = []
    for path in sorted(bundle_dir.rglob("*"), reverse=True):
        rel = path.relative_to(bundle_dir).as_posix()
        if path.is_dir() and not path.is_symlink():
            continue
        if rel == MANIFEST:
            continue
        if manifest["files"].get(rel) == file_hash(path):
            path.unlink()
        else:
            leftovers.append(rel)
    for path in sorted(bundle_dir.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
            path.rmdir()
    if leftovers:
        report.actions.extend(f"  keep file not written by install: {rel}" for rel in leftovers)
        return False
    (bundle_dir / MANIFEST).unlink()
    if keep_folder:
        report.actions.append(f"  keep {bundle_dir}: the folder your link points to")
        return False
    bundle_dir.rmdir()
    return True
