"""Error texts that a pitfall's signatures claim, reproduced with the installed torch (gloo)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fsdp_skill import knowledge
from tests.distributed import run_ranks

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
    script = tmp_path / "root_first.py"
    script.write_text(ROOT_FIRST, encoding="utf-8")
    result = run_ranks(script, 1, timeout=120, cwd=tmp_path)
    assert result.returncode != 0
    pitfall = knowledge.pitfall("fully-shard-root-before-children")
    assert any(re.search(s, result.stderr, re.MULTILINE) for s in pitfall.signatures), (
        result.stderr[-3000:]
    )
