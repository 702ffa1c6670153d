"""Write, shrink and run generated projects on CPU (gloo) for the scaffold tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fsdp_skill.scaffold import new_project
from tests.distributed import quiet_env, run_ranks

TINY_MODEL = {
    "model_type": "llama",
    "vocab_size": 128,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
}
# Small and quick; the schedule's length is fixed so that runs of any length share it.
TEST_SETTINGS = {
    "data": {"seq_len": 32, "micro_batch": 4, "num_samples": 2000},
    "optim": {"lr": 1e-2, "warmup_steps": 2, "decay_steps": 100},
    "train": {"log_every": 1},
    "checkpoint": {"every": 5, "keep": 3},
}
TIMEOUT = 240

# Runs a project's train.py as __main__ and, at interpreter exit, prints the names of the
# threads still alive: a Gloo thread there is what aborted runs at exit under torch 2.13.
EXIT_CHECK = """\
import atexit, os, runpy, sys

def threads_at_exit():
    names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
    sys.stderr.write("\\nthreads at exit: " + ",".join(sorted(names)) + "\\n")  # one write per rank
    sys.stderr.flush()

atexit.register(threads_at_exit)
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(script))
runpy.run_path(script, run_name="__main__")
"""


def make_project(
    dest: Path, shape: dict | None = None, settings: dict | None = None, **options
) -> Path:
    """A project written by `new`, shrunk for tests (its fsdp section stays as rendered)."""
    model_config = dest.parent / f"{dest.name}-model.json"
    if "model" not in options:
        model_config.write_text(json.dumps(shape or TINY_MODEL))
        options.setdefault("model_config", str(model_config))
    new_project(dest, **options)
    edit_config(dest, TEST_SETTINGS)
    if settings:
        edit_config(dest, settings)
    return dest


def edit_config(project: Path, settings: dict, name: str = "train_config.json") -> Path:
    """Update sections of the project's config (or write a copy under ``name``)."""
    config = json.loads((project / "train_config.json").read_text())
    for section, values in settings.items():
        if isinstance(values, dict):
            config[section].update(values)
        else:
            config[section] = values
    (project / name).write_text(json.dumps(config, indent=2))
    return project / name


def write_jsonl(path: Path, docs: list[str], field: str = "text") -> Path:
    """One JSON object per document, its text under ``field``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({field: d}) + "\n" for d in docs))
    return path


def records(stdout: str) -> list[dict]:
    """The --log-json lines of a run."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def step_records(recs: list[dict]) -> list[dict]:
    return [r for r in recs if "loss" in r]


def losses(recs: list[dict]) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in step_records(recs)}


def train(
    project: Path, nproc: int, *args: str, env=None, exit_check: bool = False
) -> tuple[list[dict], str]:
    """Run the project's train.py to completion; returns the records and stderr.

    With ``exit_check``, every rank must end with no Gloo thread alive at interpreter exit.
    """
    script, extra = project / "train.py", []
    if exit_check:
        script = project.parent / f"{project.name}-exit-check.py"
        script.write_text(EXIT_CHECK)
        extra = [str(project / "train.py")]
    proc = run_ranks(
        script,
        nproc,
        [*extra, "--device", "cpu", "--log-json", *args],
        timeout=TIMEOUT,
        env=env,
        cwd=project,
        interpreter_exit=True,  # the user's program, exit included, is what is under test
    )
    assert proc.returncode == 0, failure_text(proc.stderr)
    if exit_check:
        lines = [ln for ln in proc.stderr.splitlines() if "threads at exit: " in ln]
        assert len(lines) == nproc, proc.stderr[-3000:]
        assert not [ln for ln in lines if "gloo" in ln], lines
    return records(proc.stdout), proc.stderr


def failure_text(stderr: str) -> str:
    """The first rank's traceback (the cause) and the end of the log (the launcher's view)."""
    ranks = [line for line in stderr.splitlines() if line.startswith("[rank")]
    return "\n".join(ranks[:60]) + "\n...\n" + stderr[-1500:]


def start(
    project: Path, nproc: int, log: Path, *args: str, env=None, launcher: str | None = None
) -> subprocess.Popen:
    """Start train.py under torchrun in its own process group, stdout into ``log``.

    With ``launcher`` (a script of the project's launch/ folder), through that script.
    """
    env = dict(env or {})
    env["PATH"] = f"{env.get('PATH', '')}{os.pathsep}{Path(sys.executable).parent}"
    env["PATH"] += f"{os.pathsep}{os.environ.get('PATH', '')}"
    if launcher:
        command = [str(project / launcher)]
        env["NPROC"] = str(nproc)
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        command += [f"--nproc_per_node={nproc}", str(project / "train.py")]
    command += ["--device", "cpu", "--log-json", *args]
    with open(log, "w") as out:
        return subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=quiet_env(env),
            cwd=project,
            start_new_session=True,
        )


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (Linux /proc). torchrun puts each worker in a session
    of its own, so signalling torchrun's process group does not reach the workers."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            children = (task / "children").read_text().split() if task.exists() else []
            todo.extend(int(c) for c in children)
    return found


def kill_tree(proc: subprocess.Popen, sig: int) -> None:
    for pid in process_tree(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def wait_for(proc: subprocess.Popen, log: Path, predicate, timeout: float = TIMEOUT) -> str:
    """Poll ``log`` until ``predicate(text)`` holds; fail if the run ends or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if predicate(text):
            return text
        if proc.poll() is not None:
            kill_tree(proc, signal.SIGKILL)
            pytest.fail(f"the run ended early ({proc.returncode}):\n{text[-3000:]}")
        time.sleep(0.2)
    kill_tree(proc, signal.SIGKILL)
    pytest.fail(f"timed out waiting:\n{log.read_text(errors='replace')[-3000:]}")


def complete(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if (p / "COMPLETE").is_file())


def copy_checkpoint(project: Path, source: str, step: int, dest: str) -> None:
    """Copy one committed checkpoint of ``project/source`` into a fresh folder ``dest``."""
    import shutil

    name = f"step_{step:08d}"
    shutil.copytree(project / source / name, project / dest / name)
