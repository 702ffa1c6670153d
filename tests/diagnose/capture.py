"""Run the failing gloo programs in ``repro/`` and keep what they print, for the hang tests.

``capture(scenario, nproc, folder, detail=..., flight_recorder=...)`` runs one scenario under
torchrun and writes ``torchrun.log`` (stdout + stderr, as a user would save it) and, with the
flight recorder on, one ``fr_rank<N>`` dump per rank. Absolute paths are replaced so the saved
fixtures do not depend on the machine. Run this file to refresh ``fixtures/``.
"""

from __future__ import annotations

import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from fsdp_skill.diagnose.safepickle import loads_plain  # noqa: E402
from tests.distributed import free_port, quiet_env, run_ranks  # noqa: E402

REPRO = HERE / "repro" / "errors.py"
FIXTURES = HERE / "fixtures"


def sanitize(text: str) -> str:
    """Replace machine-specific paths: site-packages and this checkout."""
    text = re.sub(r"/[^\s\"']*?/site-packages/", "/site-packages/", text)
    text = text.replace(str(REPRO.parent), "repro")
    return re.sub(r"/[^\s\"']*?/bin/python[\d.]*", "python", text)


def capture(
    scenario: str,
    nproc: int,
    folder: Path,
    detail: bool = False,
    flight_recorder: bool = False,
    timeout: float = 90,
) -> str:
    """Run ``scenario``; return the combined output (also written to ``folder/torchrun.log``)."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {"REPRO_TIMEOUT": "4"}
    if detail:
        env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    if flight_recorder:
        env["TORCH_FR_BUFFER_SIZE"] = "64"
        env["REPRO_FR_DIR"] = str(folder)
    # The real exit: what torch writes while a failed job goes down is part of its logs.
    result = run_ranks(
        REPRO, nproc, args=[scenario], timeout=timeout, env=env, interpreter_exit=True
    )
    text = sanitize(result.stdout + result.stderr)
    (folder / "torchrun.log").write_text(text, encoding="utf-8")
    for dump in folder.glob("fr_rank*"):
        _sanitize_dump(dump)
    return text


def _sanitize_dump(path: Path) -> None:
    """Rewrite the stack frames' file names of a flight-recorder dump like the text logs."""
    data = loads_plain(path.read_bytes())
    for entry in data.get("entries", []):
        for frame in entry.get("frames") or []:
            frame["filename"] = sanitize(frame["filename"])
    path.write_bytes(pickle.dumps(data, protocol=2))


CASES = {
    # fixture folder: (scenario, ranks, DETAIL, flight recorder)
    "skip_collective": ("skip_collective", 3, False, False),
    "skip_collective_detail": ("skip_collective", 3, True, False),
    "mismatch_op_fr": ("mismatch_op", 3, False, True),
    "mismatch_op_detail": ("mismatch_op", 3, True, False),
    "mismatch_size_detail": ("mismatch_size", 3, True, False),
    "mismatch_dtype_detail": ("mismatch_dtype", 4, True, False),
    "rank_raises": ("rank_raises", 3, False, False),
    "rank_stalls_fr": ("rank_stalls", 3, False, True),
    "rank_stalls": ("rank_stalls", 3, False, False),
    "rank_killed": ("rank_killed", 3, False, False),
    "extra_collective_fr": ("extra_collective", 3, False, True),
    "all_wait": ("all_wait", 3, False, False),
}

BATCH_EXPECTED = {
    # scenario run in the batch launch: the pitfall explain must rank first
    "no_default_group": "default-process-group-not-initialized",
    "address_in_use": "address-in-use",
    "store_unreachable": "store-connect-timeout",
    "fsdp1_uniform_requires_grad": "fsdp1-mixed-requires-grad",
    "fsdp1_uniform_dtype": "fsdp1-mixed-dtype-flat-param",
    "dtensor_mixed": "dtensor-mixed-with-tensor",
    "mesh_too_big": "device-mesh-size-mismatch",
    "state_dict_mismatch": "state-dict-load-mismatch",
    "dtype_mismatch": "mixed-precision-dtype-mismatch",
    "dtype_mismatch_conv": "mixed-precision-dtype-mismatch",
    "nonfinite_grad": "nonfinite-loss",
    "nan_anomaly": "nonfinite-loss",
    "ddp_unused_parameters": "ddp-unused-parameters",
    "ddp_ready_twice": "ddp-variable-marked-ready-twice",
}
CASE_EXPECTED = {
    # hang case (see CASES) whose output explain must read: the pitfall it must rank first
    "mismatch_op_detail": "collective-mismatch",
    "mismatch_size_detail": "collective-mismatch",
    "mismatch_dtype_detail": "collective-mismatch",
    "skip_collective": "gloo-collective-timeout",
    "rank_raises": "peer-connection-lost",
    "rank_killed": "rank-killed-by-signal",
}
RENDEZVOUS_EXPECTED = "store-connect-timeout"
ERROR_FIXTURES = FIXTURES / "errors"
_MARKER = re.compile(r"^=== scenario: (\w+)$", re.MULTILINE)


def capture_batch(timeout: float = 180) -> str:
    """Run every BATCH scenario in one launch; return rank 0's sanitized stdout."""
    env = {"REPRO_TIMEOUT": "4", "REPRO_DEAD_PORT": str(free_port())}
    result = run_ranks(REPRO, 2, args=["batch"], timeout=timeout, env=env, interpreter_exit=True)
    return sanitize(result.stdout)


def split_batch(text: str) -> dict[str, str]:
    """``{scenario: its output}`` from a batch run's output."""
    marks = list(_MARKER.finditer(text))
    return {
        m.group(1): text[m.end() : marks[i + 1].start() if i + 1 < len(marks) else len(text)]
        for i, m in enumerate(marks)
    }


def capture_rendezvous_timeout(timeout: float = 90) -> str:
    """torchrun's c10d rendezvous against an endpoint nobody serves."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc_per_node=1",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{free_port()}",
        "--rdzv-conf=join_timeout=5,read_timeout=5",
        str(REPRO),
        "no_default_group",
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, errors="replace", env=quiet_env(), timeout=timeout
    )
    return sanitize(result.stdout + result.stderr)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    if which in ("all", "errors"):
        ERROR_FIXTURES.mkdir(parents=True, exist_ok=True)
        (ERROR_FIXTURES / "batch.log").write_text(capture_batch(), encoding="utf-8")
        (ERROR_FIXTURES / "rendezvous_timeout.log").write_text(
            capture_rendezvous_timeout(), encoding="utf-8"
        )
    for name, (scenario, nproc, detail, fr) in CASES.items() if which in ("all", "hangs") else ():
        target = FIXTURES / name
        shutil.rmtree(target, ignore_errors=True)
        capture(scenario, nproc, target, detail=detail, flight_recorder=fr)
        print(name, sorted(p.name for p in target.iterdir()))
