"""Writes that are never seen half-done: write aside, then rename into place.

Everything written aside is named ``.<name>.<pid>-<random>.tmp`` (files) or
``.<name>.<pid>-<random>.staging`` (folders) beside its target, so that a later run can
tell the leftovers of a killed process (``leftovers``) from the work of a live one.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

_LEGACY_STALE_AFTER_S = 24 * 3600
"""Leftovers named without a process id (older releases) count as stale after a day."""


def _aside_prefix(name: str) -> str:
    return f".{name}.{os.getpid()}-"


def write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` atomically: a reader sees the old file or the new one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=_aside_prefix(path.name), suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        elif path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    write_bytes(path, text.encode("utf-8"), mode)


@contextlib.contextmanager
def staging_dir(parent: Path, name: str) -> Iterator[Path]:
    """A scratch folder beside ``parent/name``, removed unless the caller moved it away."""
    tmp = Path(tempfile.mkdtemp(prefix=_aside_prefix(name), suffix=".staging", dir=parent))
    try:
        yield tmp
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step with Linux ``renameat2(RENAME_EXCHANGE)``; False if unsupported."""
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    try:
        libc = ctypes.CDLL(libc_name, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    errno = ctypes.get_errno()
    if errno in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: the filesystem cannot exchange
        return False
    raise OSError(errno, os.strerror(errno), str(b))


def replace_dir(new: Path, target: Path) -> None:
    """Put the finished folder ``new`` at ``target``, replacing any folder there.

    On Linux the two folders are exchanged in one atomic step; elsewhere the old folder
    is renamed aside first and restored if the second rename fails.
    """
    new, target = Path(new), Path(target)
    if not target.exists():
        os.rename(new, target)
        return
    if _exchange(new, target):
        shutil.rmtree(new)
        return
    aside = target.with_name(f"{_aside_prefix(target.name)}old.staging")
    os.rename(target, aside)
    try:
        os.rename(new, target)
    except BaseException:
        os.rename(aside, target)
        raise
    shutil.rmtree(aside)


def _alive(pid: int) -> bool:
    if sys.platform.startswith("win"):  # pragma: no cover - os.kill would end the process
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def leftovers(parent: Path, name: str, legacy_stale: bool = False) -> list[Path]:
    """What interrupted writes of ``parent/name`` left beside it, if their process is gone.

    Temporary files and staging folders of a live process are never listed. Those named
    without a process id (older releases) are listed when ``legacy_stale`` (the caller
    holds the lock that every writer of ``name`` takes) or when older than a day.
    """
    pattern = re.compile(
        rf"\.{re.escape(name)}\.(?:(\d+)-[^/]*|[^/.]+|old-\d+)\.(?:tmp|staging)$"
        rf"|\.{re.escape(name)}\.old-\d+$"
    )
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    found = []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if not match:
            continue
        if match.group(1) is not None:
            stale = not _alive(int(match.group(1)))
        else:
            try:
                age = time.time() - entry.stat(follow_symlinks=False).st_mtime
            except OSError:
                continue
            stale = legacy_stale or age > _LEGACY_STALE_AFTER_S
        if stale:
            found.append(Path(entry.path))
    return sorted(found)


def remove(path: Path) -> None:
    """Delete a file, link or whole folder (links are removed, never followed)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def copy_entry(src: Path, dst: Path) -> bool:
    """Copy one file, link, FIFO or whole folder to ``dst`` as it is (links stay links,
    a FIFO is made anew, never opened). False for what cannot be copied (sockets,
    devices). Raises the first OSError, so a full disk is one error, not a list."""
    info = os.lstat(src)
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(src), dst)
    elif stat.S_ISDIR(mode):
        os.mkdir(dst)
        copied = True
        with os.scandir(src) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                copied = copy_entry(Path(entry.path), dst / entry.name) and copied
        shutil.copystat(src, dst, follow_symlinks=False)
        return copied
    elif stat.S_ISREG(mode):
        shutil.copy2(src, dst, follow_symlinks=False)
    elif stat.S_ISFIFO(mode):
        os.mkfifo(dst, stat.S_IMODE(mode))
    else:
        return False
    return True
