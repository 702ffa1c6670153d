"""``explain --file`` and ``explain -`` read a log of any size to its end, keep its last
64 MiB, give line numbers of the whole log, and say what they did not read."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fsdp_skill.diagnose.tail import MAX_BYTES, read_tail
from tests.cli import fsdp

ERROR = (
    "[rank1]: torch.distributed.DistBackendError: Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=12, OpType=ALLGATHER, NumelIn=4, NumelOut=8, "
    "Timeout(ms)=600000) ran for 600041 milliseconds before timing out.\n"
)
FILLER = "step 1234 loss 2.345678 lr 3.0e-04 grad_norm 0.98 tokens/s 123456\n"


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """70 MiB of training output with one error near the start and one at the end."""
    path = tmp_path_factory.mktemp("logs") / "train.log"
    filler_lines = (70 << 20) // len(FILLER)
    with path.open("w") as fh:
        fh.write(FILLER * 10 + ERROR.replace("SeqNum=12", "SeqNum=3"))
        fh.write(FILLER * filler_lines)
        fh.write(ERROR)
    return path, 10 + 1 + filler_lines + 1  # the last error's true line number


def _check(result: dict, error_line: int, size: int) -> None:
    (match,) = [m for m in result["matches"] if m["id"] == "nccl-watchdog-timeout"]
    assert match["line"] == error_line
    cut = result["truncated"]
    assert cut["total_bytes"] == size
    assert cut["read_bytes"] <= MAX_BYTES
    assert cut["skipped_bytes"] + cut["read_bytes"] == size
    assert "SeqNum=3" not in match["matched"]  # the early error was in the part not read


def test_file_keeps_true_line_numbers_and_says_what_was_cut(big_log):
    path, error_line = big_log
    result = fsdp("explain", "--json", "--file", path, timeout=300)
    assert result.code == 0, result.err
    _check(result.json(), error_line, path.stat().st_size)
    text = fsdp("explain", "--file", path, timeout=300).out
    assert text.startswith("note: the input has 70.0 MiB; explain read its last 64.0 MiB")
    assert f"(line {error_line}" in text


def test_stdin_has_the_same_bound_and_numbers(big_log):
    path, error_line = big_log
    with path.open("rb") as fh:
        done = subprocess.run(
            [sys.executable, "-m", "fsdp_skill", "explain", "--json", "-"],
            stdin=fh,
            capture_output=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    _check(json.loads(done.stdout), error_line, path.stat().st_size)


def test_small_input_is_read_whole():
    result = fsdp("explain", "--json", "-", input=FILLER * 3 + ERROR)
    data = result.json()
    assert "truncated" not in data
    assert data["matches"][0]["line"] == 4


@pytest.mark.parametrize(
    ("data", "limit", "text", "skipped_lines"),
    [
        (b"aa\nbb\ncc\n", 100, "aa\nbb\ncc\n", 0),
        (b"aa\nbb\ncc\n", 6, "bb\ncc\n", 1),  # the cut falls on a line start
        (b"aa\nbb\ncc\n", 5, "cc\n", 2),  # inside "bb": that line is left out too
        (b"aaaaaaaa", 3, "", 0),  # one line longer than the window: nothing whole is left
        (b"x\n" * 5000, 10, "x\n" * 5, 4995),
    ],
)
def test_the_window_starts_at_a_line_and_counts_what_it_drops(data, limit, text, skipped_lines):
    tail = read_tail(io.BytesIO(data), limit=limit)
    assert tail.text == text
    assert tail.skipped_lines == skipped_lines
    assert tail.total_bytes == len(data)
    assert tail.skipped_bytes == len(data) - len(text.encode())
