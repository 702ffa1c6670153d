"""oom-debugging, 'Host RAM: each rank loads its own copy': reading Python objects in a forked
process (a DataLoader worker) copies their pages; reading a NumPy buffer does not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fsdp_skill import knowledge

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/smaps_rollup").exists(), reason="needs Linux's per-process memory map"
)

READ_IN_A_FORK = """
import os
import numpy as np

def private_mb():
    with open("/proc/self/smaps_rollup") as f:
        kb = sum(int(l.split()[1]) for l in f if l.startswith(("Private_Dirty", "Private_Clean")))
    return kb // 1024

objects = [str(i) * 8 for i in range(1_000_000)]  # about 70 MB of Python objects
array = np.arange(8_000_000, dtype=np.int64)  # 64 MB in one buffer

def copied_by_reading(read):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # what a DataLoader worker is: a fork that shares the parent's pages
        before = private_mb()
        read()
        os.write(w, str(private_mb() - before).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    return int(os.read(r, 64))

print("LIST", copied_by_reading(lambda: sum(len(s) for s in objects)))
print("ARRAY", copied_by_reading(lambda: int(array.sum())))
"""


def test_reading_python_objects_in_a_fork_copies_them_and_an_array_stays_shared():
    run = subprocess.run(
        [sys.executable, "-c", READ_IN_A_FORK], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    copied = dict(line.split() for line in run.stdout.splitlines())
    assert int(copied["LIST"]) > 50, copied  # reference counts written: pages copied
    assert int(copied["ARRAY"]) < 8, copied  # one buffer, only read
    guide = next(g for g in knowledge.guides() if g.id == "oom-debugging")
    assert "pytorch/pytorch#13246" in guide.body and "reference count" in guide.body


def test_the_prepare_once_helpers_the_section_names():
    """Accelerate's and the Trainer's main-process-first context managers, and the Trainer's
    default of once per machine (`local=True`)."""
    import inspect

    pytest.importorskip("accelerate")
    from accelerate import Accelerator
    from transformers import TrainingArguments

    assert callable(Accelerator.main_process_first)
    params = inspect.signature(TrainingArguments.main_process_first).parameters
    assert params["local"].default is True and "desc" in params
