"""A progress bar for long lint runs: on a terminal only, and only once the run is big."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

BIG_RUN = 300
"""Runs over fewer files finish too fast for a bar to help."""


@contextlib.contextmanager
def bar(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """Yield an ``on_file(done, total)`` callback drawing a rich bar on stderr, or None."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    progress = Progress(
        TextColumn("linting"),
        BarColumn(),
        MofNCompleteColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = None

    def on_file(done: int, total: int) -> None:
        nonlocal task
        if total < BIG_RUN:
            return
        if task is None:
            progress.start()
            task = progress.add_task("lint", total=total)
        progress.update(task, completed=done)

    try:
        yield on_file
    finally:
        progress.stop()
