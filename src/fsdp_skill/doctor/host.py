"""What the doctor reads from the machine, behind one object that tests can replace.

Every probe goes through a :class:`Host`: the root folder that holds ``sys/`` (so a test can
point it at a fake ``/sys``), the environment mapping, and a command runner with a timeout
(so a test can answer ``nvidia-smi`` with recorded output). Nothing here imports torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

COMMAND_TIMEOUT_S = 5.0
"""Upper bound for one external command (``nvidia-smi`` can stall on a wedged driver)."""


@dataclass(frozen=True)
class CommandResult:
    """The outcome of one external command: its output, or why there is none."""

    stdout: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.stdout is not None


Runner = Callable[[list[str], float], CommandResult]


def run_command(argv: list[str], timeout: float) -> CommandResult:
    """Run ``argv`` with a deadline; never raises, never waits longer than ``timeout``."""
    if shutil.which(argv[0]) is None:
        return CommandResult(None, f"{argv[0]} not found")
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return CommandResult(None, f"{' '.join(argv)} did not answer within {timeout:g} s")
    except OSError as exc:
        return CommandResult(None, f"{argv[0]}: {exc.strerror or exc}")
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        reason = detail[-1] if detail else f"exit status {done.returncode}"
        return CommandResult(None, f"{' '.join(argv)} failed: {reason}")
    return CommandResult(done.stdout)


def fake_runner(outputs: Mapping[str, str | None]) -> Runner:
    """A runner that answers from ``{"command line": stdout}``; other commands are missing.

    A value of None means the command exists but fails.
    """

    def run(argv: list[str], timeout: float) -> CommandResult:
        key = " ".join(argv)
        if key not in outputs:
            return CommandResult(None, f"{argv[0]} not found")
        out = outputs[key]
        return CommandResult(out) if out is not None else CommandResult(None, f"{key} failed")

    return run


@dataclass(frozen=True)
class Host:
    """The machine as the probes see it."""

    root: Path = Path("/")
    """Folder that holds ``sys/class/...``: ``/`` on a real machine, a fake tree in tests."""
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    run: Runner = run_command
    python: str = sys.executable
    """Interpreter used for the optional torch runtime probe."""
    torch_dir: Path | None | bool = True
    """Installed torch package folder; True: find it; None: act as if torch is absent."""
    command_timeout: float = COMMAND_TIMEOUT_S

    def sys_path(self, *parts: str) -> Path:
        return self.root.joinpath("sys", *parts)


def read_text(path: Path) -> str | None:
    """A small /sys attribute file, stripped; None if absent or unreadable."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
