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

from fsdp_skill.lint import config, gitignore, hfconfig

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


def _git_root(folder: Path) -> Path | None:
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _ancestor_ignores(folder: Path) -> list[gitignore.GitIgnore]:
    """``.gitignore`` files of the folders above ``folder``, up to the repository root."""
    root = _git_root(folder)
    if root is None:
        return []
    chain = []
    for candidate in reversed((folder.parent, *folder.parent.parents)):
        if candidate == root or root in candidate.parents:
            ignore = gitignore.load(candidate)
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


def discover(paths: list[str]) -> tuple[list[Path], list[Problem]]:
    """The files to lint and the paths that could not be used, in a stable order."""
    found: list[Path] = []
    problems: list[Problem] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        try:
            info = path.stat()
        except OSError as exc:
            problems.append(Problem(raw, _os_reason(exc)))
            continue
        if stat.S_ISDIR(info.st_mode):
            absolute = path.resolve()
            ignores = _ancestor_ignores(absolute)
            _walk(path, absolute, ignores, found, problems, seen)
        elif not stat.S_ISREG(info.st_mode):
            # a pipe or a device could block or never end: lint code through `-` instead
            problems.append(Problem(raw, "not a regular file"))
        else:
            if _excluded(path, config.for_folder(path.resolve().parent)):
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
) -> None:
    own = gitignore.load(absolute)
    if own is not None:
        ignores = [*ignores, own]
    cfg = config.for_folder(absolute)
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
            _walk(path, abs_path, ignores, found, problems, seen)
            continue
        if not (entry.name.endswith(".py") or hfconfig.is_config_name(entry.name)):
            continue
        if _is_ignored(abs_path, False, ignores) or _excluded(abs_path, cfg):
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
            return Problem(
                str(path), f"file too large ({size / 1e6:.1f} MB; limit {MAX_BYTES // 2**20} MiB)"
            )
        data = path.read_bytes()
    except OSError as exc:
        return Problem(str(path), _os_reason(exc))
    if b"\0" in data[:8192]:
        return Problem(str(path), "binary file (contains NUL bytes)")
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
            str(path), f"not UTF-8: invalid byte 0x{data[exc.start]:02x} at offset {exc.start}"
        )


def _declared_encoding(data: bytes) -> str | None:
    """The PEP 263 coding cookie of a source file, if it declares one."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return None
    return encoding
