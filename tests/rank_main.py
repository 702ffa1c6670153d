"""Runs a rank's script as ``__main__``, then leaves without the interpreter's teardown.

``run_ranks`` starts every rank through this file. torch 2.13's Gloo process group can abort
at interpreter exit ("terminate called without an active exception", SIGABRT) in about one
run in ten, after the program has finished its work: a test that is not about the exit path
would fail by chance. The script's own outcome is kept: an exception prints its traceback and
exits 1, ``sys.exit(code)`` exits with that code, and output is flushed before leaving. Each
line a rank prints is written whole, so lines of two ranks never run into one.

The script's globals stay alive until then, so nothing it built at module level is destroyed.
Objects local to a function are freed when it returns, before this file can leave, and that
teardown may block too (the Trainer resume run once timed out after its training, with
``os._exit`` moved here from its ``main()``): a script that does its work inside ``main()``
ends ``main()`` itself with ``os._exit`` (``facts_probe.py``, ``trainer_resume.py``).

Usage: ``python rank_main.py SCRIPT [ARG...]`` (the script sees ``sys.argv == [SCRIPT, ARG...]``
and its own folder first on ``sys.path``, as if it were run directly).
"""

import os
import runpy
import sys
import traceback


def _leave(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    # Ranks share one pipe, and unbuffered output writes a print's text and its newline
    # apart, so two ranks' lines could run into one; a line goes out in one write instead.
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True, write_through=False)
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        namespace = runpy.run_path(script, run_name="__main__")  # noqa: F841 (kept alive)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            _leave(stop.code or 0)
        print(stop.code, file=sys.stderr)
        _leave(1)
    except BaseException:
        traceback.print_exc()
        _leave(1)
    _leave(0)


if __name__ == "__main__":
    main()
