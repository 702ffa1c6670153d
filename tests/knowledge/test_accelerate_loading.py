"""accelerate-fsdp, "cpu_ram_efficient_loading under FSDP2": how accelerate's FSDP2 loader
sends rank 0's weights, counted on two Gloo ranks with the installed accelerate and torch.

Accelerate's FSDP distributed type needs a GPU, so the test calls the loader itself, with the
only part of the Accelerator it reads (``is_main_process``).
"""

from __future__ import annotations

import inspect
import json

import pytest

from tests.distributed import run_script
from tests.knowledge.texts import flat, section

fsdp_utils = pytest.importorskip("accelerate.utils.fsdp_utils")

LOAD = """
import json
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.tensor._collective_utils as collective_utils
import torch.nn as nn
from accelerate.utils.fsdp_utils import fsdp2_load_full_state_dict
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo", timeout=timedelta(seconds=20))
rank = dist.get_rank()


class Accelerator:  # what the loader reads of accelerate's Accelerator
    is_main_process = rank == 0


torch.manual_seed(0)
weights = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
full = weights.state_dict() if rank == 0 else {}
if sys.argv[1] == "missing" and rank == 0:
    del full["1.bias"]
model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)).to("meta")
fully_shard(model)
calls = {"broadcast": 0, "scatter": 0}
broadcast, scatter = dist.broadcast, collective_utils.scatter


def counted(name, call):
    def run(*args, **kwargs):
        calls[name] += 1
        return call(*args, **kwargs)

    return run


dist.broadcast = counted("broadcast", broadcast)
collective_utils.scatter = counted("scatter", scatter)  # distribute_tensor's scatter
try:
    fsdp2_load_full_state_dict(Accelerator, model, full)
    equal = all(torch.equal(p.full_tensor(), w) for p, w in zip(model.parameters(), weights.parameters()))
    outcome = {"calls": calls, "tensors": len(model.state_dict()), "equal": equal}
except Exception as exc:
    outcome = {"error": f"{type(exc).__name__}: {exc}"}
print(f"RANK{rank} " + json.dumps(outcome), flush=True)
if "error" not in outcome:
    dist.destroy_process_group()
"""


def _outcomes(tmp_path, case: str) -> dict[int, dict]:
    run = run_script(tmp_path, "load.py", LOAD, 2, args=[case])
    found = {}
    for line in run.stdout.splitlines():  # rank_main writes each rank's line whole
        if line.startswith("RANK"):
            rank, text = line.split(" ", 1)
            found[int(rank.removeprefix("RANK"))] = json.loads(text)
    assert 0 in found, run.stdout + run.stderr[-3000:]
    return found


@pytest.mark.slow
def test_each_tensor_is_broadcast_whole_then_scattered(tmp_path):
    outcome = _outcomes(tmp_path, "all")
    assert outcome[0] == {"calls": {"broadcast": 4, "scatter": 4}, "tensors": 4, "equal": True}
    assert outcome[1] == outcome[0]
    source = inspect.getsource(fsdp_utils.fsdp2_load_full_state_dict)
    assert "dist.broadcast(full_param, src=0, group=dist.group.WORLD)" in source
    assert "distribute_tensor(full_param, device_mesh, sharded_param.placements)" in source
    assert "model.load_state_dict(sharded_sd, assign=True)" in source
    text = section("accelerate-fsdp", "cpu_ram_efficient_loading under FSDP2")
    assert "four broadcasts and four scatters, and the loaded shards equal rank 0's weights" in text


@pytest.mark.slow
def test_a_parameter_missing_on_rank_0_leaves_the_others_in_its_broadcast(tmp_path):
    outcome = _outcomes(tmp_path, "missing")
    message = outcome[0]["error"]
    assert message.startswith("KeyError: ")
    text = section("accelerate-fsdp", "cpu_ram_efficient_loading under FSDP2")
    assert flat(message.removeprefix("KeyError: ")) in text
    assert "error" in outcome.get(1, {"error": "killed"})  # rank 1 did not finish loading
