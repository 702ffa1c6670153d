"""The planner's per-rank model-state bytes against real FSDP2 shards (CPU, gloo).

FSDP2 chunks every parameter on dim 0 (``torch.chunk``), so rank r holds rows
[r*ceil(d/W), (r+1)*ceil(d/W)) of a tensor with d rows: the first ranks get ceil(d/W) rows
and the last ones fewer (or none). Parameters are stored in a buffer padded to ceil(d/W)
rows on every rank; gradients and optimizer states have the unpadded local size. The planner
reports the fullest rank, so: stored parameters match exactly on every rank, gradients and
optimizer states match exactly on the fullest rank and are never larger elsewhere.

The collectives are counted too (the script wraps all_gather_single, reduce_scatter_single and
all_reduce): the planner's per-rank all-gather, reduce-scatter and (HSDP) all-reduce volumes
of one forward and backward must match what FSDP2 actually sent. Collectives move the padded
shards, which is why the planner counts world x the fullest rank's elements.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.distributed import run_ranks

SCRIPT = Path(__file__).parent / "scripts" / "shard_sizes.py"
pytestmark = [pytest.mark.slow, pytest.mark.torch]


def _results(world: int) -> list[dict]:
    proc = run_ranks(SCRIPT, world, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # every rank prints its own RESULT lines: pick out each flat JSON object
    rows = [json.loads(m) for m in re.findall(r"RESULT (\{[^{}]*\})", proc.stdout)]
    runs = 4 + (1 if world == 4 else 0)  # at world size 4 also HSDP on a 2 x 2 mesh
    assert len(rows) == runs * world, proc.stdout[-2000:]
    return rows


@pytest.mark.parametrize("world", [1, 2, 4])
def test_model_state_bytes_match_real_shards(world):
    rows = _results(world)
    for model in {r["model"] for r in rows}:
        ranks = [r for r in rows if r["model"] == model]
        assert ranks[0]["params_spec"] == ranks[0]["params_total"], model
        for r in ranks:
            assert r["params_storage"] == r["params_planned"], r
            for kind in ("params", "grads", "optimizer"):
                assert r[f"{kind}_local"] <= r[f"{kind}_planned"], (kind, r)
        for kind in ("params", "grads", "optimizer"):
            fullest = max(r[f"{kind}_local"] for r in ranks)
            planned = ranks[0][f"{kind}_planned"]
            assert abs(fullest - planned) <= 0.01 * planned, (model, kind, fullest, planned)
            # all ranks together hold the model exactly once (4 bytes per element, fp32)
            per_element = 8 if kind == "optimizer" else 4
            total = sum(r[f"{kind}_local"] for r in ranks)
            replicas = 2 if model.endswith("-hsdp") else 1
            assert total == replicas * per_element * ranks[0]["params_total"], (model, kind)
        # one forward + backward: bytes each rank sends, counted at the collectives
        for r in ranks:
            for kind in ("all_gather", "reduce_scatter", "all_reduce"):
                sent, planned = r[f"{kind}_sent"], r[f"{kind}_planned"]
                assert abs(sent - planned) <= 0.01 * max(planned, 1), (model, kind, sent, planned)
