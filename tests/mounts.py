"""Real small and read-only filesystems for the tests of full disks and read-only installs.

Mounting needs root (or CAP_SYS_ADMIN); where it is not allowed the tests that need a mount
are skipped, never faked.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def small_tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``"2m"``) mounted at ``folder`` for the duration of the block."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        mounted = _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(folder))
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("cannot run mount here")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)


def remount_read_only(folder: Path) -> None:
    """Make the tmpfs at ``folder`` read-only (even root then cannot write to it)."""
    result = _mount("-o", "remount,ro", str(folder))
    if result.returncode != 0:
        pytest.skip(f"cannot remount read-only here: {result.stderr.strip()}")


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the filesystem of ``folder`` until at most ``leave`` bytes are free; return the
    filler file (delete it to free the space again)."""
    filler = folder / "filler.bin"
    chunk = b"\0" * 65536
    with open(filler, "wb", buffering=0) as handle:
        while True:
            free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
            if free <= leave:
                break
            try:
                handle.write(chunk[: max(4096, min(len(chunk), free - leave))])
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    return filler
