"""One writer at a time per bundle, and the clean-up of writers that died.

install, uninstall and refresh hold the bundle's lock: an ``fcntl`` lock on
``.<bundle name>.lock`` beside the bundle folder. The holder deletes the file before it lets
go, so no lock file outlives a run; a process that was waiting on the deleted file notices
and locks the new one instead. The kernel drops the lock of a process that dies, even by
SIGKILL, so whoever holds the lock knows that the staging folders and temporary files of
that bundle were left by runs that are over, and removes them.

While the lock is held, SIGTERM stops the run as Ctrl-C does, so that its clean-up runs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from fsdp_skill import atomic
from fsdp_skill.bundle_files import MANIFEST
from fsdp_skill.errors import Terminated, UsageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, one run at a time assumed
    fcntl = None  # type: ignore[assignment]

_INSIDE = ("references", MANIFEST)
"""Names inside a bundle that refresh and install write aside and rename into place."""


def lock_path(bundle_dir: Path) -> Path:
    """The lock file of the bundle at ``bundle_dir`` (the real folder, links resolved)."""
    return bundle_dir.parent / f".{bundle_dir.name}.lock"


@contextlib.contextmanager
def bundle_lock(bundle_dir: Path, make_parents: bool = False) -> Iterator[list[Path]]:
    """Hold the lock of ``bundle_dir`` for the block, waiting while another run holds it.

    With ``make_parents``, the missing folders above the bundle are created first; the block
    gets those this process created (deepest first). Stale leftovers of the bundle are
    removed once the lock is held. Raises OSError when the lock file cannot be created (a
    read-only or missing folder).
    """
    for _ in range(20):
        made = _make_parents(bundle_dir.parent) if make_parents else []
        try:
            fd = _acquire(lock_path(bundle_dir), _say_waiting(bundle_dir))
        except FileNotFoundError:
            if make_parents:  # an uninstall removed the folder meanwhile: make it again
                continue
            raise
        try:
            with _sigterm_raises():
                _remove_leftovers(bundle_dir)
                yield made
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock_path(bundle_dir))
            os.close(fd)  # closing the file releases the lock
        return
    raise UsageError(f"cannot lock {bundle_dir}: its folder keeps disappearing")


def _make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; return those this process created,
    deepest first (of two processes racing, the one whose mkdir succeeds owns the folder)."""
    missing = []
    probe = Path(os.path.abspath(folder))
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    made = []
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:
            continue
        made.append(path)
    return made[::-1]


def _say_waiting(bundle_dir: Path) -> Callable[[], None]:
    def say() -> None:
        print(f"fsdp-skill: waiting for another fsdp-skill run on {bundle_dir}", file=sys.stderr)

    return say


def _acquire(path: Path, on_wait: Callable[[], None]) -> int:
    """Lock ``path`` (created if needed) and return its descriptor."""
    if fcntl is None:  # pragma: no cover
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    waited = False
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if not waited:
                    on_wait()
                waited = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            # The previous holder deletes the file as it lets go: keep the lock only if
            # it is on the file that is there now, not on the deleted one.
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                return fd
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def busy(bundle_dir: Path) -> bool:
    """True while some process holds the lock of ``bundle_dir`` (writes nothing)."""
    if fcntl is None:  # pragma: no cover
        return False
    try:
        fd = os.open(lock_path(bundle_dir), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def leftovers(bundle_dir: Path) -> list[Path]:
    """What interrupted runs on the bundle left behind: staging folders beside it and inside
    it, temporary files. Empty while a run holds the lock; writes nothing."""
    return [] if busy(bundle_dir) else _stale(bundle_dir)


def _stale(bundle_dir: Path) -> list[Path]:
    found = atomic.leftovers(bundle_dir.parent, bundle_dir.name, legacy_stale=True)
    if bundle_dir.is_dir():
        for name in _INSIDE:
            found += atomic.leftovers(bundle_dir, name, legacy_stale=True)
    return found


def _remove_leftovers(bundle_dir: Path) -> None:
    for path in _stale(bundle_dir):
        with contextlib.suppress(OSError):
            atomic.remove(path)


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
