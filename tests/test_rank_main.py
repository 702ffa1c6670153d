"""tests/rank_main.py keeps a script's outcome: its exit code, its traceback, its arguments."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.distributed import RANK_MAIN, quiet_env

SCRIPTS = {
    "done": "import sys\nprint(sys.argv[1:], __name__)\n",
    "exits": "import sys\nsys.exit(3)\n",
    "says": "import sys\nsys.exit('bad argument')\n",
    "raises": "raise ValueError('the script failed')\n",
}


def _run(tmp_path, name: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / f"{name}.py"
    script.write_text(SCRIPTS[name], encoding="utf-8")
    command = [sys.executable, str(RANK_MAIN), str(script), "--flag", "x"]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path)


def test_a_script_that_finishes_exits_0_with_its_own_arguments(tmp_path):
    done = _run(tmp_path, "done")
    assert (done.returncode, done.stdout) == (0, "['--flag', 'x'] __main__\n")


@pytest.mark.parametrize(
    ("name", "code", "stderr"),
    [("exits", 3, ""), ("says", 1, "bad argument"), ("raises", 1, "ValueError: the script failed")],
)
def test_a_failing_script_keeps_its_code_and_message(tmp_path, name, code, stderr):
    run = _run(tmp_path, name)
    assert run.returncode == code
    assert stderr in run.stderr
    if name == "raises":
        assert "Traceback (most recent call last)" in run.stderr


def test_lines_of_two_unbuffered_ranks_never_run_into_one(tmp_path):
    """Ranks share one pipe with PYTHONUNBUFFERED set; without whole-line writes, thousands of
    this run's lines merge with the other rank's."""
    script = tmp_path / "lines.py"
    script.write_text(
        "import sys\nfor i in range(5000):\n    print(sys.argv[1], 'x' * 60, flush=True)\n",
        encoding="utf-8",
    )
    read_end, write_end = os.pipe()
    ranks = [
        subprocess.Popen(
            [sys.executable, str(RANK_MAIN), str(script), f"RANK{rank}"],
            stdout=write_end,
            env=quiet_env(),
        )
        for rank in range(2)
    ]
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as shared:
        lines = shared.read().splitlines()
    assert [rank.wait(timeout=60) for rank in ranks] == [0, 0]
    assert len(lines) == 10000
    assert set(lines) == {f"RANK{rank} " + "x" * 60 for rank in range(2)}
