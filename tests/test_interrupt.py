"""Ctrl-C anywhere in the command line: one line on stderr, exit status 130, no traceback.

An interrupt during start-up is provoked deterministically: an import hook raises
KeyboardInterrupt when a given module is first imported, exactly as a Ctrl-C landing in that
import would; then the console script runs the way the installed ``fsdp-skill`` runs it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]

HARNESS = """
import sys

class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv = ["fsdp-skill", *{args!r}]
from {entry_module} import {entry_function}
sys.exit({entry_function}())
"""


def _entry_point() -> tuple[str, str]:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["fsdp-skill"].split(":")
    return module, function


def _run_interrupted(module: str, args: list[str]) -> subprocess.CompletedProcess:
    entry_module, entry_function = _entry_point()
    code = HARNESS.format(
        module=module, args=args, entry_module=entry_module, entry_function=entry_function
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("click", ["--help"]),  # while the command line itself loads
        ("fsdp_skill.output", ["search", "x"]),
        ("fsdp_skill.search", ["search", "fully_shard"]),  # while a command's module loads
        ("fsdp_skill.diagnose.matching", ["explain", "some error"]),
        ("fsdp_skill.lint.engine", ["lint", "-"]),
    ],
)
def test_ctrl_c_during_start_up_is_one_line_and_130(module, args):
    done = _run_interrupted(module, args)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "fsdp-skill: interrupted\n"
    assert done.stdout == ""


def test_python_dash_m_uses_the_same_guard():
    code = HARNESS.format(
        module="click", args=["--help"], entry_module="fsdp_skill.__main__", entry_function="main"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert (done.returncode, done.stderr) == (130, "fsdp-skill: interrupted\n")


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("args", [["explain", "-"], ["lint", "-"], ["mcp"]])
def test_a_real_sigint_while_waiting_on_stdin(args):
    proc = subprocess.Popen(
        [sys.executable, "-m", "fsdp_skill", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        # a runner started in the background hands its children SIGINT ignored; Python then
        # keeps it ignored, and the test would measure the runner, not the command
        preexec_fn=_default_sigint,
    )
    time.sleep(3)  # started and blocked reading stdin
    assert proc.poll() is None, proc.communicate()
    os.kill(proc.pid, signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "fsdp-skill: interrupted"
