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


def _commands_without_json() -> list[str]:
    from fsdp_skill.cli import cli

    return sorted(
        name
        for name, command in cli.commands.items()
        if not any(p.name == "as_json" for p in command.params)
    )


def test_readme_and_help_say_truly_which_commands_take_json():
    from pathlib import Path

    without = _commands_without_json()
    assert without, "every command takes --json now: say so again"
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "Every command takes `--json`" not in readme
    (claim,) = [p for p in readme.split("\n\n") if "`--json`" in p and "Exit codes" in p]
    assert all(f"`{name}`" in claim for name in without), claim
    helped = " ".join(fsdp("--help").out.split())
    sentence = next(s for s in helped.split(". ") if "--json" in s)
    assert all(f" {name} " in sentence for name in without), sentence


def test_uninstall_help_speaks_of_uninstalling():
    install = fsdp("install", "--help").out
    uninstall = fsdp("uninstall", "--help").out
    assert uninstall != install
    flat = " ".join(uninstall.split())
    for wrong in ("Client to install for", "Install into this project", "Install into DEST"):
        assert wrong not in flat, wrong
    for option in ("--client", "--project", "--dest", "--mcp"):
        line = flat.split(option, 1)[1][:200]
        assert "remove" in line.lower() or "uninstall" in line.lower(), (option, line)


def test_the_docs_say_how_the_cpu_build_of_torch_is_chosen():
    """A fresh machine following requirements-test.txt must not pull the CUDA build."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    requirements = (repo / "requirements-test.txt").read_text()
    assert "torch==2.13.0\n" in requirements
    comments = " ".join(
        line.lstrip("# ") for line in requirements.splitlines() if line.startswith("#")
    )
    for needed in ("CPU build", "CUDA build", "PIP_EXTRA_INDEX_URL", "scripts/test.sh"):
        assert needed in comments, needed
    readme = (repo / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert "PIP_EXTRA_INDEX_URL" in quickstart and "CPU" in quickstart
