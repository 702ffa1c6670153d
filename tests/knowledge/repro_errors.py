"""Provoke, in one process, the error messages some pitfalls' signatures must match.

Run as a script: prints one JSON object ``{case: message}``: the exception a case raised, or
for a case that only warns, what torch wrote to stderr (C++ warnings bypass Python's
``warnings``). Each case runs at world size 1 (or on the in-memory ``fake`` backend), so no
launcher and no second rank are needed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn as nn


def _init_gloo() -> None:
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)


def fsdp_in_join() -> None:
    from torch.distributed.algorithms.join import Join
    from torch.distributed.fsdp import fully_shard

    model = nn.Linear(2, 2)
    fully_shard(model)
    with Join([model]):
        pass


def join_two_groups() -> None:
    from torch.distributed.algorithms.join import Join
    from torch.nn.parallel import DistributedDataParallel as DDP

    other = dist.new_group([0])
    with Join([DDP(nn.Linear(2, 2)), DDP(nn.Linear(2, 2), process_group=other)]):
        pass


def static_graph_changes() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor, use_b: bool) -> torch.Tensor:
            x = self.a(x)
            return self.b(x) if use_b else x

    model = DDP(Net(), static_graph=True)
    for step in range(3):
        model(torch.randn(2, 4), use_b=step == 0).sum().backward()


def device_id_cpu() -> None:
    dist.destroy_process_group()
    try:
        dist.init_process_group(
            "gloo", store=dist.HashStore(), rank=0, world_size=1, device_id=torch.device("cpu")
        )
    finally:
        if not dist.is_initialized():
            _init_gloo()


def monitored_barrier_not_gloo() -> None:
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.destroy_process_group()
    try:
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
        dist.monitored_barrier()
    finally:
        dist.destroy_process_group()
        _init_gloo()


def cpu_tensor_on_gpu_only_group() -> None:
    # A group with a backend for CUDA tensors only, as an NCCL default group is; Gloo stands
    # in for NCCL so that this runs on CPU-only builds.
    dist.destroy_process_group()
    try:
        dist.init_process_group("cuda:gloo", store=dist.HashStore(), rank=0, world_size=1)
        dist.all_reduce(torch.ones(1))
    finally:
        dist.destroy_process_group()
        _init_gloo()


def mesh_with_device_index() -> None:
    from torch.distributed.device_mesh import init_device_mesh

    init_device_mesh("cpu:0", (1,))


def find_unused_without_unused() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(nn.Linear(2, 2), find_unused_parameters=True)
    for _ in range(2):
        model(torch.randn(1, 2)).sum().backward()


def ddp_attribute() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    _ = DDP(nn.Linear(2, 2)).in_features  # the attribute is on .module


def nccl_not_built() -> None:
    # The CPU wheel has no NCCL, as the Windows and macOS wheels have none.
    dist.new_group([0], backend="nccl")


def init_twice() -> None:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def env_rank_missing() -> None:
    saved = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE") if k in os.environ}
    try:
        next(dist.rendezvous("env://"))
    finally:
        os.environ.update(saved)


def scalar_parameter() -> None:
    from torch.distributed.fsdp import fully_shard

    model = nn.Linear(2, 2)
    model.scale = nn.Parameter(torch.tensor(1.0))
    fully_shard(model)


def dcp_load_missing_key() -> None:
    import torch.distributed.checkpoint as dcp

    with tempfile.TemporaryDirectory() as folder:
        dcp.save({"weight": torch.ones(2)}, checkpoint_id=folder)
        try:
            dcp.load(
                {"weight": torch.zeros(2), "optim.state.0.step": torch.zeros(())},
                checkpoint_id=folder,
            )
        except dcp.api.CheckpointException as exc:  # a BaseException: report it as an error
            raise RuntimeError(str(exc)) from None


def hybrid_shard_1d_mesh() -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy

    mesh = init_device_mesh("cpu", (1,))
    FSDP(
        nn.Linear(2, 2),
        device_mesh=mesh,
        sharding_strategy=ShardingStrategy.HYBRID_SHARD,
        device_id=torch.device("cpu"),
    )


def fsdp1_process_group_and_mesh() -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    mesh = init_device_mesh("cpu", (1,))
    FSDP(nn.Linear(2, 2), process_group=dist.group.WORLD, device_mesh=mesh, device_id="cpu")


def fsdp1_auto_wrap_over_compiled_fsdp() -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    compiled = torch.compile(FSDP(nn.Linear(2, 2), device_id="cpu"))  # hides the FSDP unit
    FSDP(compiled, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), device_id="cpu")


def static_graph_first_step_no_sync() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(nn.Linear(4, 2), static_graph=True)
    with model.no_sync():  # the very first backward, before DDP recorded the graph
        model(torch.randn(3, 4)).sum().backward()


def compile_fsdp1_flat_params() -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    model = FSDP(nn.Linear(4, 4), device_id=torch.device("cpu"))  # use_orig_params=False
    torch.compile(model, backend="eager", fullgraph=True)(torch.randn(2, 4))


def fsdp1_given_fsdp2_policy() -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import MixedPrecisionPolicy

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16)  # fully_shard's class
    FSDP(nn.Linear(4, 4), device_id=torch.device("cpu"), mixed_precision=policy)(torch.randn(2, 4))


def mesh_slice_unknown_name() -> None:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
    mesh["tp"]["dp"]  # a sub-mesh knows only its own dimension


def mesh_group_unknown_name() -> None:
    from torch.distributed.device_mesh import init_device_mesh

    init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp")).get_group("dp_shard")


def sharding_strategy_string() -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.testing._internal.distributed.fake_pg import FakeStore

    # two ranks: on one, FSDP1 switches to NO_SHARD before it looks the strategy up
    dist.destroy_process_group()
    try:
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
        FSDP(nn.Linear(2, 2), device_id=torch.device("cpu"), sharding_strategy="FULL_SHARD")
    finally:
        dist.destroy_process_group()
        _init_gloo()


def dtensor_op_without_rule() -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    @torch.library.custom_op("repro::triple", mutates_args=())
    def triple(x: torch.Tensor) -> torch.Tensor:
        return x * 3

    triple.register_fake(torch.empty_like)  # DTensor's propagation runs the op on fakes
    mesh = init_device_mesh("cpu", (1,))
    triple(distribute_tensor(torch.ones(2, 2), mesh, [Shard(0)]))


def no_shard_offload_to_cpu() -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy

    model = FSDP(nn.Linear(2, 2), device_id=torch.device("cpu"))
    assert model.sharding_strategy is ShardingStrategy.NO_SHARD  # one rank: nothing to shard
    with FSDP.summon_full_params(model, offload_to_cpu=True):
        pass


def unfrozen_after_first_forward() -> None:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    fully_shard(model[0], mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    model.requires_grad_(False)
    model(torch.randn(2, 2))  # lazy init with no trainable parameter
    model.requires_grad_(True)
    model(torch.randn(2, 2)).sum().backward()


def all_gather_uneven_on_gloo() -> None:
    gathered = [torch.empty(3)]  # sized for another rank's tensor, not this one's (2)
    dist.all_gather(gathered, torch.ones(2))


def ddp_several_device_ids() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    DDP(nn.Linear(2, 2), device_ids=[0, 1])  # DataParallel's list, given to DDP


def ddp_device_ids_for_a_cpu_module() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    DDP(nn.Linear(2, 2), device_ids=[0])  # the module was never moved to the rank's GPU


def dtensor_in_collective() -> None:
    from torch.distributed.fsdp import fully_shard

    model = nn.Linear(2, 2)
    fully_shard(model)  # its weight is a DTensor now, even on one rank
    dist.all_reduce(model.weight.detach())


def ddp_without_trainable_parameters() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    teacher = nn.Linear(2, 2).requires_grad_(False)  # a frozen model: nothing to all-reduce
    DDP(teacher)


def torchrun_nproc_per_node_list() -> None:
    from torch.distributed.run import determine_local_world_size

    determine_local_world_size("0,1")  # GPU ids, where torchrun wants a count


def torchrun_nproc_per_node_unset() -> None:
    from torch.distributed.run import determine_local_world_size

    determine_local_world_size("")  # "--nproc_per_node=$GPU_NUM" with GPU_NUM unset


def _child_exits(index: int) -> None:
    sys.exit(1)  # what argparse and many entry points do on a bad argument


def _child_raises(index: int) -> None:
    raise ValueError("the child's own error")


def _child_killed(index: int) -> None:
    import signal

    os.kill(os.getpid(), signal.SIGKILL)  # what the kernel's out-of-memory killer does


def _spawn_one(child: Callable[[int], None]) -> None:
    import torch.multiprocessing as mp

    mp.spawn(child, nprocs=1)


def _debug_on_rank_0_only(index: int, port: int) -> None:
    from datetime import timedelta

    if index == 0:  # as if the variable were exported on one machine only
        dist.set_debug_level(dist.DebugLevel.DETAIL)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=index,
        world_size=2,
        timeout=timedelta(seconds=4),
    )
    if index == 1:
        import time

        time.sleep(6)  # stays in the job, without a collective, until rank 0 has failed


def debug_detail_on_one_rank() -> None:
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(_debug_on_rank_0_only, args=(port,), nprocs=2)


def fsdp1_sync_module_states_on_cpu() -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    # rank 0's copy is sent from the GPU only
    FSDP(nn.Linear(2, 2), sync_module_states=True, device_id=torch.device("cpu"))


def dcp_empty_param_group() -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.fsdp import fully_shard

    def build() -> tuple[nn.Module, torch.optim.Optimizer]:
        model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
        model[0].requires_grad_(False)
        fully_shard(model)
        frozen = [p for p in model[0].parameters() if p.requires_grad]  # empty
        groups = [{"params": frozen, "lr": 1e-5}, {"params": list(model[1].parameters())}]
        return model, torch.optim.AdamW(groups)

    model, optim = build()
    model(torch.ones(1, 2)).sum().backward()
    optim.step()
    with tempfile.TemporaryDirectory() as folder:
        model_sd, optim_sd = get_state_dict(model, optim)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=folder)
        model, optim = build()
        model_sd, optim_sd = get_state_dict(model, optim)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=folder)
    set_state_dict(model, optim, model_state_dict=state["model"], optim_state_dict=state["optim"])
    model(torch.ones(1, 2)).sum().backward()
    optim.step()  # the empty group lost its betas


def buffer_broadcast_after_forward() -> None:
    layer = nn.Linear(4, 4)
    buffer = torch.ones(4)  # a 1-D buffer (BatchNorm's running_mean), saved for backward
    out = layer(torch.ones(2, 4)) * buffer
    # what DDP's pre-forward buffer sync runs; from torch 2.12 DDP keeps the version counter
    dist._broadcast_coalesced(dist.group.WORLD, [buffer], 1 << 20, 0)
    out.sum().backward()


CASES: dict[str, Callable[[], None]] = {
    "fsdp_in_join": fsdp_in_join,
    "join_two_groups": join_two_groups,
    "static_graph_changes": static_graph_changes,
    "static_graph_first_step_no_sync": static_graph_first_step_no_sync,
    "compile_fsdp1_flat_params": compile_fsdp1_flat_params,
    "fsdp1_given_fsdp2_policy": fsdp1_given_fsdp2_policy,
    "device_id_cpu": device_id_cpu,
    "monitored_barrier_not_gloo": monitored_barrier_not_gloo,
    "cpu_tensor_on_gpu_only_group": cpu_tensor_on_gpu_only_group,
    "mesh_with_device_index": mesh_with_device_index,
    "find_unused_without_unused": find_unused_without_unused,
    "ddp_attribute": ddp_attribute,
    "nccl_not_built": nccl_not_built,
    "init_twice": init_twice,
    "env_rank_missing": env_rank_missing,
    "scalar_parameter": scalar_parameter,
    "dcp_load_missing_key": dcp_load_missing_key,
    "hybrid_shard_1d_mesh": hybrid_shard_1d_mesh,
    "fsdp1_process_group_and_mesh": fsdp1_process_group_and_mesh,
    "fsdp1_auto_wrap_over_compiled_fsdp": fsdp1_auto_wrap_over_compiled_fsdp,
    "mesh_slice_unknown_name": mesh_slice_unknown_name,
    "mesh_group_unknown_name": mesh_group_unknown_name,
    "sharding_strategy_string": sharding_strategy_string,
    "dtensor_op_without_rule": dtensor_op_without_rule,
    "no_shard_offload_to_cpu": no_shard_offload_to_cpu,
    "unfrozen_after_first_forward": unfrozen_after_first_forward,
    "all_gather_uneven_on_gloo": all_gather_uneven_on_gloo,
    "ddp_several_device_ids": ddp_several_device_ids,
    "ddp_device_ids_for_a_cpu_module": ddp_device_ids_for_a_cpu_module,
    "ddp_without_trainable_parameters": ddp_without_trainable_parameters,
    "torchrun_nproc_per_node_list": torchrun_nproc_per_node_list,
    "torchrun_nproc_per_node_unset": torchrun_nproc_per_node_unset,
    "spawn_child_exits": lambda: _spawn_one(_child_exits),
    "spawn_child_raises": lambda: _spawn_one(_child_raises),
    "spawn_child_killed": lambda: _spawn_one(_child_killed),
    "fsdp1_sync_module_states_on_cpu": fsdp1_sync_module_states_on_cpu,
    "dcp_empty_param_group": dcp_empty_param_group,
    "dtensor_in_collective": dtensor_in_collective,
    "buffer_broadcast_after_forward": buffer_broadcast_after_forward,
    "debug_detail_on_one_rank": debug_detail_on_one_rank,
}


def _run(case: Callable[[], None]) -> str:
    """The exception ``case`` raises, else whatever it wrote to file descriptor 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            case()
        except Exception as exc:  # the point is to record whatever torch raises
            return f"{type(exc).__name__}: {exc}"
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        return sink.read().decode("utf-8", "replace")


def main() -> int:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    _init_gloo()
    messages: dict[str, str] = {}
    for name, case in CASES.items():
        messages[name] = _run(case)
    dist.destroy_process_group()
    json.dump(messages, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
