"""FSDP109: CPU offload set through the Trainer's fsdp_config, so the process group has no
CPU backend (accelerate adds Gloo only for an accelerate config's fsdp_offload_params)."""

from __future__ import annotations

from collections.abc import Iterator

from fsdp_skill.lint.hfconfig import data
from fsdp_skill.lint.hfconfig.context import Context, truthy
from fsdp_skill.lint.hfconfig.rules import at

CODE = "FSDP109"
PITFALL = "trainer-cpu-offload-without-cpu-backend"
SEVERITY = "warning"
SUMMARY = "CPU offload from a Trainer fsdp_config with a process group that has no CPU backend"


def fix(version: tuple[int, int]) -> str:
    return (
        'give the group a CPU backend: ddp_backend "cuda:nccl,cpu:gloo" in TrainingArguments, '
        "or launch with an accelerate config that sets fsdp_offload_params: true"
    )


def _offload_entry(ctx: Context):
    entry = ctx.doc.fsdp.get("cpu_offload")
    if entry is not None and truthy(entry.value):
        return entry
    words = ctx.doc.top.get("fsdp")
    if words is not None and "offload" in str(words.value).split():
        return words
    if words is not None and isinstance(words.value, list) and "offload" in words.value:
        return words
    return None


def check(ctx: Context) -> Iterator[tuple[int, int, str]]:
    if ctx.doc.is_accelerate or data.trainer_exports_offload():
        return
    entry = _offload_entry(ctx)
    if entry is None:
        return
    backend = ctx.doc.top.get("ddp_backend")
    if backend is not None and "cpu:" in str(backend.value):
        return
    yield at(
        entry,
        "CPU offload comes from the Trainer's fsdp_config, which accelerate's choice of backend "
        "does not see: unless `accelerate launch` runs it with fsdp_offload_params: true, the "
        "process group is NCCL alone and collectives on the CPU-resident shards (gradient "
        'clipping\'s norm) fail with "No backend type associated with device type cpu"',
    )
