"""Launch small multi-rank programs on CPU (gloo) for the tests.

``run_ranks`` starts a script under ``torchrun --standalone`` (which picks a free port for
its rendezvous), bounded by a timeout that kills the whole process group, so a program that
hangs on purpose cannot outlive its test. Each rank runs the script through ``rank_main.py``,
which leaves without the interpreter's teardown (where torch 2.13's Gloo can abort), unless
the test is about that exit path.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

RANK_MAIN = Path(__file__).with_name("rank_main.py")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def quiet_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a rank: one thread per rank on a small machine, unbuffered output."""
    env = dict(os.environ)
    env.update(
        {
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONWARNINGS": "ignore",
            "MASTER_ADDR": "127.0.0.1",
        }
    )
    env.update(extra or {})
    return env


def run_ranks(
    script: str | Path,
    nproc: int,
    args: Sequence[str] = (),
    timeout: float = 120,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    torchrun_args: Sequence[str] = (),
    interpreter_exit: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` on ``nproc`` ranks under torchrun; stdout and stderr are captured.

    With ``interpreter_exit``, each rank ends through the interpreter's own teardown (atexit
    handlers, Gloo's threads); otherwise it leaves once the script is done (``rank_main.py``).

    On timeout the process group is killed and the CompletedProcess has ``returncode`` -9
    and whatever output had been produced.
    """
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        *torchrun_args,
        *(() if interpreter_exit else (str(RANK_MAIN),)),
        str(script),
        *args,
    ]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env=quiet_env(env),
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        code = -9
    return subprocess.CompletedProcess(command, code, out, err)


def run_script(
    folder: Path,
    name: str,
    text: str,
    nproc: int,
    args: Sequence[str] = (),
    timeout: float = 120,
    env: Mapping[str, str] | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Write ``text`` to ``folder/name`` and run it in ``folder`` on ``nproc`` ranks.

    With ``check``, a run that does not exit 0 fails the test with the end of its stderr.
    """
    script = folder / name
    script.write_text(text, encoding="utf-8")
    run = run_ranks(script, nproc, args=args, timeout=timeout, env=env, cwd=folder)
    if check:
        assert run.returncode == 0, run.stderr[-3000:]
    return run


def _children(pid: int) -> list[int]:
    """Every process whose parent is ``pid`` (from /proc; empty where there is none)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and all its descendants: torchrun starts each worker in a new session,
    so killing its process group alone would leave the workers running."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(_children(current))
    for target in tree:
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass
