"""Find the files to lint under the given paths (Python, and YAML/JSON that may be Hugging
Face FSDP configs), and read them safely.

Folders are walked without following folder symlinks (no loops), honouring ``.gitignore``
files and the configured excludes; anything unreadable becomes a ``Problem`` for that path
instead of stopping the run.
"""

from __future__ import annotations

import errno
import fnmatch
import io
import os
import stat
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fsdp_skill.lint import config, gitignore, hfconfig
from fsdp_skill.roots import NOT_READ, Roots

MAX_BYTES = 10 * 1024 * 1024
"""Larger files are reported, not read: no hand-written training script is this big."""

DEFAULT_EXCLUDES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        "__pycache__",
        "node_modules",
        "site-packages",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".eggs",
        "build",
        "dist",
    }
)


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def as_dict(self) -> dict:
        return {"path": self.path, "message": self.message}


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno == errno.ENOENT:
        return "no such file or directory"
    if exc.errno == errno.EACCES:
        return "permission denied"
    return exc.strerror or str(exc)


def _excluded(path: Path, cfg: config.LintConfig) -> bool:
    if not cfg.exclude or cfg.root is None:
        return False
    try:
        rel = path.resolve().relative_to(cfg.root.resolve()).as_posix()
    except (ValueError, OSError):
        rel = path.as_posix()
    for pattern in cfg.exclude:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(path.name, pattern):
            return True
        if rel.startswith(pattern + "/") or fnmatch.fnmatch(rel, pattern + "/*"):
            return True
    return False


def _git_root(folder: Path, roots: Roots | None) -> Path | None:
    for candidate in (folder, *folder.parents):
        if roots is not None and not roots.contains(candidate):
            return None  # above the roots: nothing there may be looked at
        if (candidate / ".git").exists():
            return candidate
    return None


def _ancestor_ignores(folder: Path, roots: Roots | None) -> list[gitignore.GitIgnore]:
    """``.gitignore`` files of the folders above ``folder``, up to the repository root."""
    root = _git_root(folder, roots)
    if root is None:
        return []
    chain = []
    for candidate in reversed((folder.parent, *folder.parent.parents)):
        if candidate == root or root in candidate.parents:
            ignore = gitignore.load(candidate, roots)
            if ignore is not None:
                chain.append(ignore)
    return chain


def _is_ignored(path: Path, is_dir: bool, ignores: list[gitignore.GitIgnore]) -> bool:
    verdict = False
    for ignore in ignores:
        decided = ignore.ignored(path, is_dir)
        if decided is not None:
            verdict = decided
    return verdict


def discover(paths: list[str], roots: Roots | None = None) -> tuple[list[Path], list[Problem]]:
    """The files to lint and the paths that could not be used, in a stable order.

    With ``roots``, every file found, and every configuration read on the way, must pass
    ``roots.admit``; a file that does not is reported instead of listed.
    """
    found: list[Path] = []
    problems: list[Problem] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if roots is not None and not roots.contains(path):
            problems.append(Problem(raw, "outside the client's roots"))
            continue
        try:
            info = path.stat()
        except OSError as exc:
            problems.append(Problem(raw, _os_reason(exc)))
            continue
        if stat.S_ISDIR(info.st_mode):
            absolute = path.resolve()
            ignores = _ancestor_ignores(absolute, roots)
            _walk(path, absolute, ignores, found, problems, seen, roots)
        elif not stat.S_ISREG(info.st_mode):
            # a pipe or a device could block or never end: lint code through `-` instead
            problems.append(Problem(raw, "not a regular file"))
        else:
            if _excluded(path, config.for_folder(path.resolve().parent, roots)):
                continue
            key = path.resolve()
            if key not in seen:
                seen.add(key)
                found.append(path)
    return found, problems


def _walk(
    folder: Path,
    absolute: Path,
    ignores: list[gitignore.GitIgnore],
    found: list[Path],
    problems: list[Problem],
    seen: set[Path],
    roots: Roots | None,
) -> None:
    own = gitignore.load(absolute, roots)
    if own is not None:
        ignores = [*ignores, own]
    cfg = config.for_folder(absolute, roots)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        problems.append(Problem(str(folder), _os_reason(exc)))
        return
    for entry in entries:
        path = folder / entry.name
        abs_path = absolute / entry.name
        if entry.is_dir(follow_symlinks=False):
            if entry.name in DEFAULT_EXCLUDES or _is_ignored(abs_path, True, ignores):
                continue
            if _excluded(abs_path, cfg):
                continue
            _walk(path, abs_path, ignores, found, problems, seen, roots)
            continue
        if not (entry.name.endswith(".py") or hfconfig.is_config_name(entry.name)):
            continue
        if _is_ignored(abs_path, False, ignores) or _excluded(abs_path, cfg):
            continue
        if roots is not None and not roots.contains(abs_path):  # before looking at its target
            problems.append(Problem(str(path), NOT_READ))
            continue
        if entry.is_symlink():
            try:
                if not stat.S_ISREG(os.stat(path).st_mode):
                    continue
            except OSError as exc:
                problems.append(Problem(str(path), _os_reason(exc)))
                continue
        elif not entry.is_file(follow_symlinks=False):
            problems.append(Problem(str(path), "not a regular file"))
            continue
        key = abs_path.resolve() if entry.is_symlink() else abs_path
        if key not in seen:
            seen.add(key)
            found.append(path)


def read_source(path: Path) -> str | Problem:
    """The file's text, or the reason it cannot be linted."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            return Problem(str(path), _too_large(size))
        data = path.read_bytes()
    except OSError as exc:
        return Problem(str(path), _os_reason(exc))
    return decode_source(data, str(path))


def read_stream(stream: BinaryIO, name: str) -> str | Problem:
    """Source read from a stream (stdin), with the same size limit as a file."""
    data = stream.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        return Problem(name, _too_large(None))
    return decode_source(data, name)


def _too_large(size: int | None) -> str:
    limit = f"limit {MAX_BYTES // 2**20} MiB"
    return f"file too large ({size / 1e6:.1f} MB; {limit})" if size else f"more than the {limit}"


def decode_source(data: bytes, name: str) -> str | Problem:
    """Source bytes as text (UTF-8, or the encoding the file declares), or why not."""
    if b"\0" in data[:8192]:
        return Problem(name, "binary file (contains NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        declared = _declared_encoding(data)
        if declared and declared not in ("utf-8", "utf-8-sig"):
            try:
                return data.decode(declared)
            except (LookupError, UnicodeDecodeError):
                pass
        return Problem(
            name, f"not UTF-8: invalid byte 0x{data[exc.start]:02x} at offset {exc.start}"
        )


def _declared_encoding(data: bytes) -> str | None:
    """The PEP 263 coding cookie of a source file, if it declares one."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return None
    return encoding
