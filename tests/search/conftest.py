"""A small bundle rendered with the real renderer, so the tests follow its format."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsdp_skill.knowledge import EnvVar, Guide, Pitfall
from fsdp_skill.skill import render

GUIDE_BODY = """
## Reshard after forward

`fully_shard(module, reshard_after_forward=True)` frees the unsharded parameters after the
forward pass and all-gathers them again in backward.

### With an int

An int reshards to a smaller world.

## Meshes for HSDP

Build a 2-D mesh with `init_device_mesh("cuda", (2, 4), mesh_dim_names=("replicate", "shard"))`.

```python snippet
from torch.distributed.device_mesh import init_device_mesh
```

## Mixed precision

Pass `MixedPrecisionPolicy(param_dtype=torch.bfloat16)` to keep compute in bf16.
"""


def _guide(path: Path) -> Guide:
    return Guide(
        id="fsdp2",
        title="FSDP2 with fully_shard",
        summary="Shard parameters per module with fully_shard.",
        body=GUIDE_BODY,
        path=path,
        body_line=1,
        links=("https://docs.pytorch.org/docs/stable/distributed.fsdp.fully_shard.html",),
        torch=">=2.6",
    )


def _pitfall(
    path: Path, pid: str, title: str, symptom: str, category: str, tags: tuple[str, ...] = ()
) -> Pitfall:
    return Pitfall(
        id=pid,
        title=title,
        severity="error",
        category=category,
        symptom=symptom,
        cause="Ranks call collectives in different orders.",
        fix="Make every rank run the same collectives.",
        bad="x = 1",
        good="x = 2",
        links=("https://docs.pytorch.org/docs/stable/distributed.html",),
        torch=">=2.0",
        path=path,
        tags=tags,
    )


@pytest.fixture
def make_pitfall():
    """The fixture bundle's pitfall maker, for tests that render pitfalls of their own."""
    return _pitfall


@pytest.fixture
def bundle(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("FSDP_SKILL_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "pytorch-fsdp"
    refs = root / "references"
    refs.mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: pytorch-fsdp\n---\n")
    (refs / "fsdp2.md").write_text(render.render_guide(_guide(refs / "fsdp2.md")))
    pitfalls = (
        _pitfall(
            refs,
            "collective-order-mismatch",
            "Ranks hang in a collective",
            "Training hangs forever until the NCCL watchdog timeout fires.",
            "hang",
        ),
        _pitfall(
            refs,
            "full-state-dict-oom",
            "Gathering a full state dict runs out of memory",
            "CUDA out of memory while saving a checkpoint.",
            "oom",
        ),
    )
    (refs / "pitfalls.md").write_text(render.render_pitfalls(pitfalls))
    env = (
        EnvVar(
            "NCCL_SOCKET_IFNAME",
            "nccl",
            "Network interface NCCL uses.",
            "eth0, ^lo",
            "Several NICs.",
            "any",
            "https://docs.nvidia.com/deeplearning/nccl/",
        ),
        EnvVar(
            "TORCH_DISTRIBUTED_DEBUG",
            "all",
            "Extra checks | logs.",
            "OFF, INFO, DETAIL",
            "Debugging hangs.",
            "1.9",
            "https://docs.pytorch.org/docs/stable/",
        ),
    )
    (refs / "env-vars.md").write_text(render.render_env_vars(env))
    (refs / "api-device-mesh.md").write_text(
        "<!-- generated -->\n# API: DeviceMesh\n\nIntro.\n\n"
        "## torch.distributed.device_mesh.init_device_mesh\n\n```text\n"
        "torch.distributed.device_mesh.init_device_mesh(device_type, mesh_shape)\n```\n\n"
        "*function · torch 2.13.0 · [official docs](https://docs.pytorch.org/docs/2.13/"
        "distributed.html#torch.distributed.device_mesh.init_device_mesh)*\n\n"
        "Initializes a `DeviceMesh` based on the given parameters.\n"
    )
    return root


@pytest.fixture
def no_earlier_questions(tmp_path, monkeypatch) -> None:
    """Index without the shipped earlier questions: for tests of what the text alone finds."""
    from fsdp_skill.search import asked

    monkeypatch.setenv("FSDP_SKILL_CACHE", str(tmp_path / "cache-text-only"))
    monkeypatch.setattr(asked, "ASKED_FILE", tmp_path / "no-asked.toml")
