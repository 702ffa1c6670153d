"""The manifest an installed bundle keeps of what install wrote, and what it lets uninstall do.

``.fsdp-skill-manifest.json`` holds the hash of every file install wrote (a file whose hash
differs was edited by the user and is kept) and the folders install created above the bundle
(removed by uninstall when empty). A manifest is data a user can edit: nothing it says may
make uninstall touch anything outside the bundle and the chain of folders right above it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fsdp_skill import atomic
from fsdp_skill.bundle_files import MANIFEST, sha256
from fsdp_skill.errors import UsageError

__all__ = ["MANIFEST", "CorruptedManifest", "read_manifest", "adopt_generated"]


class CorruptedManifest(UsageError):
    """The manifest cannot be trusted; ``install --force`` moves the bundle aside."""


def read_manifest(bundle_dir: Path) -> dict | None:
    """The manifest of an installed bundle; None if there is none; CorruptedManifest if it
    cannot be trusted (not JSON, wrong types, paths leaving the bundle)."""
    path = bundle_dir / MANIFEST
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        files = data["files"]
        if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            raise ValueError("files is not a map of path to hash")
        created = data.get("created_dirs", [])
        if not isinstance(created, list) or not all(isinstance(d, str) for d in created):
            raise ValueError("created_dirs is not a list of folder names")
        inodes = data.get("created_dir_inodes", {})
        if not isinstance(inodes, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in inodes.values()
        ):
            raise ValueError("created_dir_inodes is not a map of folder to inode number")
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CorruptedManifest(
            f"manifest {path} is corrupted ({exc}); `fsdp-skill install --force` moves "
            f"{bundle_dir} aside, keeping your files, and installs a fresh bundle"
        ) from None
    for rel in files:
        parts = Path(rel).parts
        if Path(rel).is_absolute() or ".." in parts or not parts:
            raise CorruptedManifest(
                f"manifest {path} is corrupted (path {rel!r} leaves the bundle)"
            )
    return data


def file_hash(path: Path) -> str | None:
    """The SHA-256 of a regular file (links followed); None for anything else."""
    try:
        return sha256(path.read_bytes()) if path.is_file() else None
    except OSError:
        return None


def created_entry(folders: list[Path]) -> dict:
    """The manifest fields that record ``folders`` as created by this install."""
    inodes = {}
    for folder in folders:
        try:
            inodes[str(folder)] = os.stat(folder).st_ino
        except OSError:
            continue
    return {"created_dirs": [str(f) for f in folders], "created_dir_inodes": inodes}


def merge_created(manifest: dict | None, mine: list[Path]) -> dict:
    """The created folders of an earlier install (``manifest``) and of this one, together:
    two installs that raced to create the folders each record the ones they made."""
    old = manifest or {}
    folders = [Path(d) for d in old.get("created_dirs", [])]
    folders += [f for f in mine if f not in folders]
    folders.sort(key=lambda f: len(f.parts), reverse=True)
    entry = created_entry(folders)
    entry["created_dir_inodes"] = {
        **old.get("created_dir_inodes", {}),
        **entry["created_dir_inodes"],
    }
    return entry


def _protected(home: Path) -> set[Path]:
    return {home, *home.parents}


def removable_created(manifest: dict, skills_dir: Path, scope_root: Path | None) -> list[Path]:
    """The folders uninstall may remove (when empty), deepest first.

    Only the chain of folders right above the bundle counts, as long as the manifest lists
    each one, and only while the folder is the one install created (its inode recorded at
    creation, for manifests that record inodes). The scope root (home or project), the home folder, their parents and mount
    points are never removed, whatever the manifest says.
    """
    listed = {os.path.abspath(d) for d in manifest.get("created_dirs", [])}
    recorded = "created_dir_inodes" in manifest
    inodes = {os.path.abspath(k): v for k, v in manifest.get("created_dir_inodes", {}).items()}
    protected = _protected(Path(os.path.abspath(os.path.expanduser("~"))))
    if scope_root is not None:
        protected |= _protected(Path(os.path.abspath(scope_root)))
    chain = []
    folder = Path(os.path.abspath(skills_dir))
    while str(folder) in listed and folder not in protected and not os.path.ismount(folder):
        try:
            if recorded and os.stat(folder).st_ino != inodes.get(str(folder)):
                break
        except OSError:
            break
        chain.append(folder)
        folder = folder.parent
    return chain


def write(bundle_dir: Path, data: dict) -> None:
    """Write the manifest of ``bundle_dir`` atomically."""
    atomic.write_text(bundle_dir / MANIFEST, json.dumps(data, indent=2, sort_keys=True))


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
        digest = file_hash(bundle_dir / rel)
        if digest is None:
            manifest["files"].pop(rel, None)
        else:
            manifest["files"][rel] = digest
    write(bundle_dir, manifest)
