"""Run the real ``fsdp-skill`` command line in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


def fsdp(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> Result:
    """Run ``python -m fsdp_skill ARGS`` and return its exit code, stdout and stderr."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "fsdp_skill", *map(str, args)],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        input=input,
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)
