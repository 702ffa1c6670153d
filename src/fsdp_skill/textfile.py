"""Read a text file of a bundle without ever blocking or crashing on what sits in its place.

A page may be a folder, a link to nothing, a FIFO (opening one for reading waits for a
writer, forever), a device, or bytes in another encoding: each is an ``Unreadable`` with a
reason the user can act on, and the file is opened without blocking so that nothing hangs.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class Unreadable(Exception):
    """The file cannot be read as UTF-8 text; ``str(exc)`` says why."""


def read_text(path: Path) -> str:
    """The UTF-8 text of the regular file at ``path`` (links followed); raises Unreadable."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        if os.path.islink(path):
            target = os.readlink(path)
            raise Unreadable(f"a symbolic link to {target}, which does not exist") from None
        raise Unreadable("no such file") from None
    except IsADirectoryError:
        raise Unreadable("a folder, not a file") from None
    except OSError as exc:
        raise Unreadable(exc.strerror or str(exc)) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise Unreadable("a folder, not a file")
        raise Unreadable("not a regular file (a FIFO, socket or device)")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read()
        except OSError as exc:
            raise Unreadable(exc.strerror or str(exc)) from None
    return decode(data)


def decode(data: bytes) -> str:
    """``data`` as UTF-8 text; raises Unreadable saying where it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})") from None
