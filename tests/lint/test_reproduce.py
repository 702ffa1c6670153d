"""Error texts that a pitfall's signatures claim, reproduced with the installed torch (gloo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsdp_skill import knowledge
from tests.distributed import run_script
from tests.signatures import recognises

pytest.importorskip("torch")

ROOT_FIRST = """
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo")
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
fully_shard(model)
for layer in model:
    fully_shard(layer)
"""


@pytest.mark.slow
def test_sharding_a_child_after_its_root_fails_with_the_signature(tmp_path: Path):
    result = run_script(tmp_path, "root_first.py", ROOT_FIRST, 1)
    assert result.returncode != 0
    pitfall = knowledge.pitfall("fully-shard-root-before-children")
    assert recognises(pitfall, result.stderr), result.stderr[-3000:]


FACTS = """
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo")


def report(*words):
    # one line from rank 0 only: two ranks printing to one pipe can interleave their lines
    if dist.get_rank() == 0:
        print(*words, flush=True)


# FSDP001: an optimizer built before fully_shard holds tensors the model no longer uses
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
stale = torch.optim.AdamW(model.parameters(), lr=0.1)
for layer in model:
    fully_shard(layer)
fully_shard(model)
before = [p.detach().full_tensor().clone() for p in model.parameters()]
model(torch.randn(4, 8)).sum().backward()
stale.step()
after = [p.detach().full_tensor() for p in model.parameters()]
report("STEP_CHANGED", any(not torch.equal(a, b) for a, b in zip(before, after)))


# FSDP018: a method that reads a sharded module's weights outside forward
class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.proj(x)

    def encode(self, x):
        return self.proj(x).tanh()


encoder = Encoder()
fully_shard(encoder)
try:
    encoder.encode(torch.randn(2, 8))
    report("ENCODE_OK")
except RuntimeError as exc:
    report("ENCODE_FAILED", "mixed torch.Tensor and DTensor" in str(exc))
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_stale_optimizer_and_unhooked_method_behave_as_the_pitfalls_say(tmp_path: Path):
    result = run_script(tmp_path, "facts.py", FACTS, 2, timeout=180, check=True)
    assert "STEP_CHANGED False" in result.stdout
    assert "ENCODE_FAILED True" in result.stdout
