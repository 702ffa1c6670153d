"""The command line's conventions: help, version, one-line errors with exit 2, no torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fsdp_skill import __version__
from tests.cli import fsdp


def test_help_lists_commands():
    result = fsdp("--help")
    assert result.code == 0
    for command in ("install", "uninstall", "verify"):
        assert command in result.out


def test_version():
    result = fsdp("--version")
    assert result.code == 0
    assert __version__ in result.out


@pytest.mark.parametrize(
    "args",
    [["no-such-command"], ["install", "--no-such-option"], ["verify", "/no/such/bundle"]],
)
def test_usage_errors_are_one_line_exit_2(args):
    result = fsdp(*args)
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fsdp-skill: error:"), result.err
    assert result.out == ""


FAST_PATH = [["--help"], ["install", "--help"]]


@pytest.mark.parametrize("args", FAST_PATH)
def test_fast_path_never_imports_torch(args):
    code = (
        "import sys\n"
        "from fsdp_skill.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "bad = [m for m in ('torch', 'transformers') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
