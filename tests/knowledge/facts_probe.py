"""Observe, on four Gloo ranks on CPU, the torch 2.13 behaviours the guides state.

Run under ``torchrun --nproc_per_node 4``: each case returns what torch did (a value, or
the exception it raised), and rank 0 prints one line ``FACTS {json}``. The guides' text is
compared with these observations in ``test_fact_check.py``; a torch release that changes a
behaviour fails there and names the guide to review.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing,
)
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import (
    DataParallelMeshDims,
    MixedPrecisionPolicy,
    StateDictType,
    fully_shard,
)
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

INIT_TIMEOUT = timedelta(seconds=77)


def _error(call: Callable[[], object]) -> str | None:
    """``None`` if ``call`` returns, else ``"ExceptionType: message"``."""
    try:
        call()
    except Exception as exc:  # the point is to record what torch raises
        return f"{type(exc).__name__}: {exc}"
    return None


def _timeout(group: dist.ProcessGroup) -> str:
    return str(group._get_backend(torch.device("cpu")).options._timeout)


def gloo_all_to_all() -> dict:
    """backends: Gloo runs all_to_all_single, all_to_all and send/recv on CPU tensors."""
    rank, world = dist.get_rank(), dist.get_world_size()
    send = torch.arange(world, dtype=torch.float32) + rank * world
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send)
    outputs = [torch.empty(1) for _ in range(world)]
    dist.all_to_all(outputs, list(send.split(1)))
    expected = [float(r * world + rank) for r in range(world)]
    token = torch.tensor([float(rank)])
    if rank % 2 == 0:
        dist.send(token, dst=rank + 1)
    else:
        dist.recv(token, src=rank - 1)
    return {
        "single": received.tolist() == expected,
        "list": [t.item() for t in outputs] == expected,
        "send_recv": token.item() == float(rank - rank % 2),
    }


def mesh_slicing() -> dict:
    """device-mesh: a sub-mesh's names must follow the mesh's own order."""
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    return {
        "reordered": _error(lambda: mesh["tp", "dp"]),
        "in_order": _error(lambda: mesh["dp", "tp"]),
    }


def group_timeouts() -> dict:
    """process-groups: sub-groups take the backend default, not init_process_group's timeout."""
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    return {
        "init": str(INIT_TIMEOUT),
        "default_group": _timeout(dist.distributed_c10d._get_default_group()),
        "new_group": _timeout(dist.new_group()),
        "new_group_with_timeout": _timeout(dist.new_group(timeout=INIT_TIMEOUT)),
        "mesh_dim": _timeout(mesh.get_group("dp")),
    }


def clip_mixed_dtensor_and_tensor() -> str | None:
    """grad-clipping-accumulation: ignored_params leave plain tensors among DTensor grads."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    fully_shard(model[0])
    fully_shard(model, ignored_params={model[1].weight})
    model(torch.randn(2, 4)).sum().backward()
    return _error(lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))


class _MLP(nn.Module):
    def __init__(self, norm: bool = True) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(8) if norm else nn.Identity()
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(self.norm(x))))


def _tp_mlp(mesh: DeviceMesh, norm: bool = True) -> _MLP:
    """An MLP whose two linears are tensor-parallel on ``mesh["tp"]``, as the TP guide shows
    (its norm, if any, keeps plain parameters)."""
    model = _MLP(norm)
    parallelize_module(model, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
    return model


def clip_across_tp_and_dp_meshes() -> dict:
    """tensor-parallel: with TP + FSDP, gradients live on two meshes; one clip call fails."""
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = _tp_mlp(mesh)
    fully_shard(model, mesh=mesh["dp"])
    model(torch.randn(2, 8)).sum().backward()
    return {
        "meshes": sorted({p.device_mesh.mesh_dim_names for p in model.parameters()}),
        "clip": _error(lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)),
    }


def fully_shard_on_the_whole_mesh() -> dict:
    """tensor-parallel: fully_shard given the whole ("dp", "tp") mesh. After TP on
    ``mesh["tp"]`` it fails, with or without ``dp_mesh_dims``; a model whose parameters are
    DTensors of the whole mesh (Replicate on dp) is sharded over dp by ``dp_mesh_dims`` and
    then takes DTensor inputs only."""
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    dims = DataParallelMeshDims(shard="dp")
    spmd = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
    for linear, weight, bias in (
        (spmd[0], Shard(0), Shard(0)),  # column-parallel
        (spmd[2], Shard(1), Replicate()),  # row-parallel
    ):
        linear.weight = nn.Parameter(
            distribute_tensor(linear.weight.detach(), mesh, [Replicate(), weight])
        )
        linear.bias = nn.Parameter(
            distribute_tensor(linear.bias.detach(), mesh, [Replicate(), bias])
        )
    fully_shard(spmd, mesh=mesh, dp_mesh_dims=dims)
    out = spmd(distribute_tensor(torch.randn(4, 8), mesh, [Shard(0), Replicate()]))
    out.sum().backward()
    return {
        "tp_then_whole_mesh": _error(lambda: fully_shard(_tp_mlp(mesh), mesh=mesh)),
        "tp_submesh_dp_mesh_dims": _error(
            lambda: fully_shard(_tp_mlp(mesh, norm=False), mesh=mesh, dp_mesh_dims=dims)
        ),
        "tp_then_dp_mesh_dims": _error(
            lambda: fully_shard(_tp_mlp(mesh), mesh=mesh, dp_mesh_dims=dims)
        ),
        "weight": str(spmd[0].weight.placements),
        "output": str(out.placements),
        "grad": str(spmd[0].weight.grad.placements),
        "plain_input": _error(lambda: spmd(torch.randn(4, 8))),
    }


def clip_cpu_grads_without_cpu_backend() -> str | None:
    """cpu-offload: CPU gradients (as CPUOffloadPolicy leaves them) on a group with no CPU
    backend, as an NCCL-only group is. A ``cuda:gloo`` group stands in for NCCL on CPU builds."""
    gpu_only = dist.new_group(backend="cuda:gloo")
    mesh = DeviceMesh.from_group(gpu_only, "cpu")
    weight = nn.Parameter(DTensor.from_local(torch.randn(4, 4), mesh, [Shard(0)], run_check=False))
    weight.grad = DTensor.from_local(torch.randn(4, 4), mesh, [Shard(0)], run_check=False)
    return _error(lambda: torch.nn.utils.clip_grad_norm_([weight], 1.0))


def async_save_without_cpu_backend() -> str | None:
    """checkpointing: dcp.async_save refuses a group with no CPU backend."""
    gpu_only = dist.new_group(backend="cuda:gloo")
    folder = tempfile.mkdtemp(prefix="async-save-")
    return _error(
        lambda: dcp.async_save({"w": torch.ones(2)}, checkpoint_id=folder, process_group=gpu_only)
    )


COLLECTIVES = ("all_gather_single", "reduce_scatter_single", "all_reduce")
"""The c10d calls FSDP2 makes: all-gather and reduce-scatter within a shard group, all-reduce
across replicas."""


def _collective_calls(run: Callable[[], object]) -> dict[str, int]:
    """How often ``run`` calls each of ``COLLECTIVES`` (FSDP2 calls them through ``dist``)."""
    calls = dict.fromkeys(COLLECTIVES, 0)
    originals = {name: getattr(dist, name) for name in COLLECTIVES}

    def counting(name: str) -> Callable:
        def call(*args, **kwargs):
            calls[name] += 1
            return originals[name](*args, **kwargs)

        return call

    for name in COLLECTIVES:
        setattr(dist, name, counting(name))
    try:
        run()
    finally:
        for name, original in originals.items():
            setattr(dist, name, original)
    return calls


def _step_on_mesh(mesh: DeviceMesh, blocks: int) -> Callable[[], None]:
    """One forward and backward of ``blocks`` sharded blocks under a root with no parameter."""
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(blocks)])
    for block in model:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)  # owns no parameter of its own: no group, no reduction
    return lambda: model(torch.randn(2, 4)).sum().backward()


def hsdp_all_reduces_per_backward() -> dict:
    """hsdp: one all-reduce across replicas per FSDP parameter group, in every backward."""
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    calls = _collective_calls(_step_on_mesh(mesh, 3))
    return {"groups_with_parameters": 3, "all_reduces": calls["all_reduce"]}


def collectives_with_a_dimension_of_one() -> dict:
    """hsdp, 'A mesh dimension of size 1': what two sharded blocks issue in one forward and
    backward on a (world, 1) mesh, a (1, world) mesh and a one-rank slice of a mesh."""
    world = dist.get_world_size()
    replicas = init_device_mesh("cpu", (world, 1), mesh_dim_names=("replicate", "shard"))
    shards = init_device_mesh("cpu", (1, world), mesh_dim_names=("replicate", "shard"))
    return {
        "replicate_only": _collective_calls(_step_on_mesh(replicas, 2)),
        "shard_only": _collective_calls(_step_on_mesh(shards, 2)),
        "one_rank": _collective_calls(_step_on_mesh(replicas["shard"], 2)),
    }


def grad_scaler_with_fsdp2() -> dict:
    """mixed-precision: plain torch.amp.GradScaler agrees on inf across FSDP2 ranks."""
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    policy = MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float32)
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 1))
    fully_shard(model[0], mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    before = [p.detach().to_local().clone() for p in model.parameters()]
    scaler.scale(model(torch.randn(4, 8)).float().pow(2).mean()).backward()
    if rank == 0:  # an overflow in rank 0's shard only
        model[0].weight.grad.to_local()[0, 0] = float("inf")
    scaler.step(optim)
    scaler.update()
    after = [p.detach().to_local() for p in model.parameters()]
    skipped = all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    every_rank = [None] * world
    dist.all_gather_object(every_rank, skipped)
    return {"skipped_on_every_rank": all(every_rank), "scale_after": scaler.get_scale()}


def sync_batchnorm_on_cpu() -> str | None:
    """buffers-batchnorm: SyncBatchNorm refuses CPU inputs once it has ranks to sync with."""
    layer = nn.SyncBatchNorm(4).train()
    return _error(lambda: layer(torch.randn(8, 4)))


def all_gather_uneven_sizes() -> str | None:
    """gloo-all-gather-uneven-sizes: Gloo refuses an output list of per-rank sizes."""
    world = dist.get_world_size()
    gathered = [torch.empty(i + 1) for i in range(world)]  # rank i contributes i + 1 values
    return _error(lambda: dist.all_gather(gathered, torch.ones(dist.get_rank() + 1)))


def all_gather_into_stacked_output() -> dict:
    """gloo-all-gather-uneven-sizes: Gloo takes a flat output for all_gather_single (and its
    deprecated older name, all_gather_into_tensor) but refuses the stacked (world_size, N)
    form."""
    world = dist.get_world_size()
    stacked, flat = torch.empty(world, 3), torch.empty(world * 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the older name still works, and warns
        older = _error(lambda: dist.all_gather_into_tensor(stacked, torch.ones(3)))
    return {
        "stacked": _error(lambda: dist.all_gather_single(stacked, torch.ones(3))),
        "flat": _error(lambda: dist.all_gather_single(flat, torch.ones(3))),
        "stacked_older_name": older,
    }


def fsdp1_orig_param_shapes() -> list:
    """fsdp2: FSDP1's parameters stay flat shards even with use_orig_params=True."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    model = FSDP(nn.Linear(8, 6, bias=False), use_orig_params=True, device_id=torch.device("cpu"))
    return [list(p.shape) for p in model.parameters()]


def dtensor_in_collectives() -> dict:
    """dtensor-in-c10d-collective: DDP over FSDP2 parameters, and all_reduce of a sharded
    weight, both refused by DTensor's dispatch."""
    from torch.distributed.fsdp import fully_shard

    model = nn.Linear(4, 4)
    fully_shard(model)
    return {
        "ddp": _error(lambda: nn.parallel.DistributedDataParallel(model)),
        "all_reduce": _error(lambda: dist.all_reduce(model.weight.detach())),
    }


def fsdp1_helpers_on_fsdp2() -> dict:
    """fsdp1-api-on-fsdp2-module: FSDP1's static helpers find no FSDP1 unit in an FSDP2 model."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    fully_shard(model[0])
    fully_shard(model)
    seen: dict[str, bool] = {}

    def full_state_dict() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # state_dict_type is deprecated
            with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
                values = model.state_dict().values()
                seen["dtensor_values"] = all(isinstance(v, DTensor) for v in values)

    exit_error = _error(full_state_dict)
    with FSDP.summon_full_params(model):
        summoned_dtensor = isinstance(model[0].weight, DTensor)
    return {
        "state_dict_type_values_dtensor": seen.get("dtensor_values"),
        "state_dict_type_error": exit_error,
        "summon_full_params_leaves_dtensor": summoned_dtensor,
    }


class _CountingBlock(nn.Module):
    """A residual block that counts its forward calls (recomputation shows as extra calls)."""

    calls = 0

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _CountingBlock.calls += 1
        return x + torch.nn.functional.gelu(self.fc(x))


def _counting_model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(_CountingBlock(), _CountingBlock(), nn.Linear(8, 1))


def _shard(model: nn.Sequential, mesh: DeviceMesh) -> None:
    for block in model[:2]:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)


def wrappers_after_fully_shard() -> dict:
    """torch-compile, activation-checkpointing, tensor-parallel: compile and checkpointing may
    come before or after fully_shard; each order trains like the eager, uncheckpointed model."""
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))

    def trained(order: str) -> tuple[nn.Sequential, int]:
        """The model after one step with wrappers in ``order``; and its block forward calls."""
        model = _counting_model()
        if order == "compile_then_shard":
            for block in model[:2]:
                block.compile(backend="aot_eager")
        _shard(model, mesh)
        if order == "shard_then_compile":
            for block in model[:2]:
                block.compile(backend="aot_eager")
        if order == "shard_then_checkpoint":
            apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, _CountingBlock))
        optim = torch.optim.SGD(model.parameters(), lr=0.1)
        _CountingBlock.calls = 0
        model(x).pow(2).mean().backward()
        calls = _CountingBlock.calls
        optim.step()
        return model, calls

    eager, eager_calls = trained("eager")
    expected = eager(x).detach()
    result: dict[str, object] = {"eager_block_calls": eager_calls}
    for order in ("compile_then_shard", "shard_then_compile", "shard_then_checkpoint"):
        model, calls = trained(order)
        result[order] = torch.allclose(model(x).detach(), expected, atol=1e-6)
        if order == "shard_then_checkpoint":
            result["checkpointed_block_calls"] = calls
    return result


def frozen_model_shards() -> dict:
    """ddp-module-without-trainable-parameters: fully_shard takes a model with no trainable
    parameter (a teacher), and its no-grad forward gives the unsharded model's output."""
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8)).requires_grad_(False)
    reference = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
    reference.load_state_dict(teacher.state_dict())
    for layer in teacher:
        fully_shard(layer)
    fully_shard(teacher)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        same = torch.allclose(teacher(x), reference(x))
    return {"sharded": isinstance(teacher[0].weight, DTensor), "same_output": same}


def ddp_two_forwards_one_backward() -> dict:
    """ddp-buffer-broadcast-inplace: DDP over a BatchNorm model, called twice (its buffers
    synced from rank 0 before each forward), then one backward; and the fix, the first
    forward and backward under no_sync, against the averaged gradients of the summed loss."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    def model() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))

    torch.manual_seed(1 + dist.get_rank())  # each rank its own batches
    real, fake = torch.randn(8, 4), torch.randn(8, 4)
    twice = DDP(model())
    first, second = twice(real), twice(fake)
    error = _error(lambda: (first.sum() + second.sum()).backward())

    split = DDP(model())
    with split.no_sync():
        split(real).sum().backward()
    split(fake).sum().backward()
    reference = model()
    (reference(real).sum() + reference(fake).sum()).backward()
    same = True
    for mine, expected in zip(split.parameters(), reference.parameters(), strict=True):
        dist.all_reduce(expected.grad)
        same &= torch.allclose(mine.grad, expected.grad / dist.get_world_size(), atol=1e-6)
    return {"error": error, "no_sync_then_sync_is_the_summed_loss": same}


def dcp_plain_tensor_per_rank() -> dict:
    """dcp-plain-tensor-saved-once: what each rank loads back of its rank number saved as a
    plain tensor under one key, under a key of its own, and as its shard of one DTensor."""
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    mine = torch.full((2,), float(rank))
    holder = [tempfile.mkdtemp() if rank == 0 else None]
    dist.broadcast_object_list(holder, src=0)
    saved = {
        "plain": mine,
        f"own/{rank}": mine,
        "sharded": DTensor.from_local(mine, mesh, [Shard(0)]),
    }
    dcp.save(saved, checkpoint_id=holder[0])
    loaded = {
        "plain": torch.zeros(2),
        f"own/{rank}": torch.zeros(2),
        "sharded": DTensor.from_local(torch.zeros(2), mesh, [Shard(0)]),
    }
    dcp.load(loaded, checkpoint_id=holder[0])
    values = {
        "plain": loaded["plain"][0].item(),
        "own": loaded[f"own/{rank}"][0].item(),
        "sharded": loaded["sharded"].to_local()[0].item(),
    }
    every = [None] * world
    dist.all_gather_object(every, values)  # also: every rank has finished loading
    if rank == 0:
        shutil.rmtree(holder[0])
    return {kind: sorted({v[kind] for v in every}) for kind in values}


def fsdp1_hybrid_mesh_with_auto_wrap() -> dict:
    """fsdp1-process-group-and-device-mesh: HYBRID_SHARD on a 2-D mesh with an auto-wrap
    policy (torch 2.2.0 raised "Cannot pass both process_group and device_mesh" here)."""
    from torch.distributed.fsdp import ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    built: list[FSDP] = []

    def train() -> None:
        model = FSDP(
            nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)),
            device_mesh=mesh,
            sharding_strategy=ShardingStrategy.HYBRID_SHARD,
            auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
            device_id=torch.device("cpu"),
        )
        model(torch.randn(4, 8)).sum().backward()
        built.append(model)

    error = _error(train)
    units = sum(isinstance(m, FSDP) for m in built[0].modules()) if built else 0
    return {"error": error, "fsdp_units": units}


CASES: dict[str, Callable[[], object]] = {
    "gloo_all_to_all": gloo_all_to_all,
    "mesh_slicing": mesh_slicing,
    "group_timeouts": group_timeouts,
    "clip_mixed_dtensor_and_tensor": clip_mixed_dtensor_and_tensor,
    "clip_across_tp_and_dp_meshes": clip_across_tp_and_dp_meshes,
    "fully_shard_on_the_whole_mesh": fully_shard_on_the_whole_mesh,
    "clip_cpu_grads_without_cpu_backend": clip_cpu_grads_without_cpu_backend,
    "async_save_without_cpu_backend": async_save_without_cpu_backend,
    "hsdp_all_reduces_per_backward": hsdp_all_reduces_per_backward,
    "grad_scaler_with_fsdp2": grad_scaler_with_fsdp2,
    "sync_batchnorm_on_cpu": sync_batchnorm_on_cpu,
    "all_gather_uneven_sizes": all_gather_uneven_sizes,
    "all_gather_into_stacked_output": all_gather_into_stacked_output,
    "fsdp1_orig_param_shapes": fsdp1_orig_param_shapes,
    "dtensor_in_collectives": dtensor_in_collectives,
    "fsdp1_helpers_on_fsdp2": fsdp1_helpers_on_fsdp2,
    "wrappers_after_fully_shard": wrappers_after_fully_shard,
    "frozen_model_shards": frozen_model_shards,
    "ddp_two_forwards_one_backward": ddp_two_forwards_one_backward,
    "collectives_with_a_dimension_of_one": collectives_with_a_dimension_of_one,
    "dcp_plain_tensor_per_rank": dcp_plain_tensor_per_rank,
    "fsdp1_hybrid_mesh_with_auto_wrap": fsdp1_hybrid_mesh_with_auto_wrap,
}


def main() -> None:
    dist.init_process_group("gloo", timeout=INIT_TIMEOUT)
    observed = {name: case() for name, case in CASES.items()}
    if dist.get_rank() == 0:
        print("FACTS " + json.dumps(observed), flush=True)
    dist.destroy_process_group()
    os._exit(0)  # before main's objects are freed: see tests/rank_main.py


if __name__ == "__main__":
    main()
