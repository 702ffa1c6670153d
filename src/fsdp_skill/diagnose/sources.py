"""Finding the files to read and the rank each file belongs to."""

from __future__ import annotations

import os
import re
from pathlib import Path

from fsdp_skill.errors import UsageError
from fsdp_skill.roots import NOT_READ, Roots

# "rank3.log", "nccl_trace_rank_3", "stderr-rank-03.txt"
_RANK_IN_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)
# torchrun --log-dir layout: <dir>/attempt_0/<local_rank>/stderr.log
_TORCHRUN_DIR = re.compile(r"attempt_\d+[/\\](\d+)[/\\](?:stdout|stderr|error)\.\w+$")
# "nccl_trace_3", "dump.3": a number that ends the name after a separator
_TRAILING_NUMBER = re.compile(r"(?:^|[_\-.])(\d+)$")


def rank_from_path(path: Path, trailing_number: bool = False) -> tuple[int | None, bool]:
    """The rank a file's name says it holds, and whether that rank is global (not local).

    ``trailing_number`` also accepts a bare number at the end of the name, the convention of
    flight-recorder dumps; it is off for logs, whose names often end in job or process ids.
    """
    m = _RANK_IN_NAME.search(path.name)
    if m:
        return int(m.group(1)), True
    m = _TORCHRUN_DIR.search(path.as_posix())
    if m:
        return int(m.group(1)), False
    m = _TRAILING_NUMBER.search(path.name)
    if trailing_number and m:
        return int(m.group(1)), True
    return None, True


def _visible_files(folder: Path) -> list[Path]:
    """The files under ``folder``, hidden files and folders (``.git``, ``.cache``) left out."""
    found = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [Path(root) / name for name in names if not name.startswith(".")]
    return found


def expand(paths: list[str], roots: Roots | None = None) -> tuple[list[Path], list[str]]:
    """Every regular file under ``paths`` (folders walked, sorted, hidden entries skipped) and
    problems with the paths.

    With ``roots``, a path or a file found in a folder that ``roots.admit`` refuses is a
    problem, not an input.
    """
    if not paths:
        raise UsageError("give at least one log file, flight-recorder dump or folder")
    files: list[Path] = []
    problems: list[str] = []
    for raw in paths:
        path = Path(raw)
        if roots is not None and not roots.contains(path):
            problems.append(f"{path}: outside the client's roots")
        elif path.is_dir():
            found = sorted(_visible_files(path))
            if roots is not None:  # before anything looks at what a link points to
                problems += [f"{f}: {NOT_READ}" for f in found if not roots.contains(f)]
                found = [f for f in found if roots.contains(f)]
            found = [f for f in found if f.is_file()]
            if not found:
                problems.append(f"{path}: empty folder")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        elif path.exists():
            problems.append(f"{path}: not a regular file")
        else:
            problems.append(f"{path}: no such file or folder")
    return files, problems
