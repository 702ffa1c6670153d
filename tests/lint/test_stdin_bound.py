"""``lint -`` reads at most what a file may hold (10 MiB), in bounded memory."""

from __future__ import annotations

import resource
import subprocess
import sys
import time

from tests.cli import fsdp

CHUNK = b"x = 1\n" * 100_000  # 600 kB


def test_a_flood_on_stdin_is_refused_in_bounded_memory():
    """200 MB piped in: one line and exit 2, long before it is all sent."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fsdp_skill", "lint", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=limit,
    )
    sent = 0
    try:
        while sent < 200_000_000:
            proc.stdin.write(CHUNK)
            sent += len(CHUNK)
        proc.stdin.close()
    except BrokenPipeError:
        pass  # it stopped reading: what we want
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err.decode()[-2000:]
    assert err.decode().strip() == "fsdp-skill: error: <stdin>: more than the limit 10 MiB"
    assert out == b""
    assert sent < 200_000_000 or time.monotonic() - started < 60


def test_stdin_just_under_the_limit_is_linted():
    line = "# " + "a" * 1021 + "\n"  # 1 KiB: long comment lines parse fast
    code = "x = 1\n" + line * (10 * 1024 - 1)
    result = fsdp("lint", "-", "--json", input=code)
    assert result.code == 0, result.err
    assert result.json()["files"] == 1


def test_binary_and_undecodable_stdin_are_one_line_errors():
    for data, reason in ((b"\x00\x01\x02", "binary file"), (b"x = '\xff'\n", "not UTF-8")):
        done = subprocess.run(
            [sys.executable, "-m", "fsdp_skill", "lint", "-"], input=data, capture_output=True
        )
        assert done.returncode == 2
        assert reason in done.stderr.decode()
        assert len(done.stderr.decode().strip().splitlines()) == 1
