"""Small gloo programs that fail on purpose, one per scenario: ``torchrun ... errors.py NAME``.

Each scenario triggers one error class with the installed torch so that the tests can check
that the pitfalls' signatures match the message torch really prints. Programs that would hang
use a short process-group timeout.
"""

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

TIMEOUT = timedelta(seconds=float(os.environ.get("REPRO_TIMEOUT", "4")))


def init() -> int:
    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=TIMEOUT)
    return dist.get_rank()


def mismatch_op() -> None:
    # Run with TORCH_DISTRIBUTED_DEBUG=DETAIL: the fingerprint check names both collectives.
    rank = init()
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == 1:
        dist.broadcast(t, 0)
    else:
        dist.all_reduce(t)


def mismatch_size() -> None:
    rank = init()
    dist.all_reduce(torch.ones(4))
    dist.all_reduce(torch.ones(8 if rank == 1 else 4))


def mismatch_dtype() -> None:
    rank = init()
    dist.all_reduce(torch.ones(4))
    dist.all_reduce(torch.ones(4, dtype=torch.float64 if rank == 1 else torch.float32))


def skip_collective() -> None:
    # Rank-conditional code: rank 1 skips a collective the others run.
    rank = init()
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank != 1:
        dist.all_reduce(t)
    dist.barrier()


def all_wait() -> None:
    # Every rank blocks in the same all_reduce call, but rank 0 uses another group than the
    # others: from their tracebacks all ranks wait in the same collective at the same line.
    rank = init()
    ranks = list(range(dist.get_world_size()))
    first = dist.new_group(ranks, timeout=TIMEOUT)
    second = dist.new_group(ranks, timeout=TIMEOUT)
    dist.all_reduce(torch.ones(4), group=first if rank == 0 else second)


def extra_collective() -> None:
    # Rank 1 runs one more all_reduce than the others (say, for logging); the others are done
    # and leave, so rank 1 waits for partners that never come.
    rank = init()
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == 1:
        dist.all_reduce(t)


def rank_raises() -> None:
    # An exception on one rank (e.g. in its data loader) before a collective.
    rank = init()
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == 1:
        raise RuntimeError("data loader worker failed on this rank")
    dist.all_reduce(t)


def rank_stalls() -> None:
    # One rank is stuck outside any collective (a slow data loader, a dead file system) for
    # longer than the timeout; it records its flight-recorder buffer before it wakes up.
    import time

    rank = init()
    dist.all_reduce(torch.ones(4))
    if rank == 1:
        dump_flight_recorder()
        time.sleep(3 * TIMEOUT.total_seconds())
    dist.all_reduce(torch.ones(4))


def rank_killed() -> None:
    # One rank dies from a signal (as under the host's out-of-memory killer).
    rank = init()
    dist.all_reduce(torch.ones(4))
    if rank == 1:
        os.kill(os.getpid(), 9)
    dist.all_reduce(torch.ones(4))


def no_default_group() -> None:
    dist.all_reduce(torch.ones(4))


def address_in_use() -> None:
    # The port is already taken by another server: the store cannot listen on it.
    port = int(os.environ["MASTER_PORT"])
    first = dist.TCPStore("127.0.0.1", port + 1, is_master=True, wait_for_workers=False)
    dist.TCPStore("127.0.0.1", port + 1, is_master=True, wait_for_workers=False)
    del first


def store_unreachable() -> None:
    # Nobody listens on the port, so the store client gives up after its timeout.
    port = int(os.environ["REPRO_DEAD_PORT"])
    dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=2))


def fsdp1_uniform_requires_grad() -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    init()
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    model[0].weight.requires_grad_(False)
    FSDP(model, use_orig_params=False, device_id=torch.device("cpu"))


def fsdp1_uniform_dtype() -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    init()
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4).to(torch.bfloat16))
    FSDP(model, device_id=torch.device("cpu"))


def dtensor_mixed() -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    init()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = nn.Linear(4, 4)
    fully_shard(model, mesh=mesh)
    # Using a sharded parameter outside forward mixes DTensor and plain tensors.
    torch.mm(torch.ones(2, 4), model.weight)


def mesh_too_big() -> None:
    from torch.distributed.device_mesh import init_device_mesh

    init()
    init_device_mesh("cpu", (dist.get_world_size() * 2,))


def state_dict_mismatch() -> None:
    init()
    saved = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2)).state_dict()
    saved["2.weight"] = torch.ones(1)  # a key the new model does not have
    nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 2), nn.ReLU(), nn.Linear(2, 2)).load_state_dict(
        saved
    )


def dtype_mismatch() -> None:
    init()
    layer = nn.Linear(4, 4).to(torch.bfloat16)
    layer(torch.ones(2, 4))


def dtype_mismatch_conv() -> None:
    init()
    conv = nn.Conv1d(2, 2, 3).to(torch.bfloat16)
    conv(torch.ones(1, 2, 8))


def nan_anomaly() -> None:
    init()
    x = torch.tensor([-1.0, 4.0], requires_grad=True)
    with torch.autograd.detect_anomaly():
        torch.sqrt(x).sum().backward()


def nonfinite_grad() -> None:
    init()
    layer = nn.Linear(4, 1)
    loss = layer(torch.full((2, 4), float("inf"))).sum() * 0.0
    sys.stdout.write(f"step 0 loss: {loss.item()}\n")
    loss.backward()
    torch.nn.utils.clip_grad_norm_(layer.parameters(), 1.0, error_if_nonfinite=True)


def ddp_unused_parameters() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    init()

    class TwoHeads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.used = nn.Linear(4, 1)
            self.unused = nn.Linear(4, 1)

        def forward(self, x):
            return self.used(x)

    model = DDP(TwoHeads())
    for _ in range(2):
        model(torch.ones(2, 4)).sum().backward()


def ddp_ready_twice() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.checkpoint import checkpoint

    init()

    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(4, 4)

        def forward(self, x):
            # The same parameters run twice under reentrant checkpointing.
            x = checkpoint(self.layer, x, use_reentrant=True)
            return checkpoint(self.layer, x, use_reentrant=True)

    model = DDP(Shared(), find_unused_parameters=True)
    model(torch.ones(2, 4, requires_grad=True)).sum().backward()


SCENARIOS = {
    name: fn
    for name, fn in list(globals().items())
    if callable(fn) and getattr(fn, "__module__", "") == "__main__" and name != "init"
}


def dump_flight_recorder() -> None:
    """Write this rank's flight-recorder buffer (TORCH_FR_BUFFER_SIZE must be set) to the folder
    named by REPRO_FR_DIR, as ``fr_rank<N>``: the file naming torch's own dumps use."""
    import torch._C._distributed_c10d as c10d

    folder = os.environ.get("REPRO_FR_DIR")
    if folder and dist.is_initialized():
        path = os.path.join(folder, f"fr_rank{dist.get_rank()}")
        with open(path + ".tmp", "wb") as fh:
            fh.write(c10d._dump_fr_trace())
        os.replace(path + ".tmp", path)  # a rank killed mid-write leaves no half dump


BATCH = (
    "no_default_group",
    "address_in_use",
    "store_unreachable",
    "fsdp1_uniform_requires_grad",
    "fsdp1_uniform_dtype",
    "dtensor_mixed",
    "mesh_too_big",
    "state_dict_mismatch",
    "dtype_mismatch",
    "dtype_mismatch_conv",
    "nonfinite_grad",
    "nan_anomaly",
    "ddp_unused_parameters",
    "ddp_ready_twice",
)
"""Scenarios whose error leaves the process group usable: ``errors.py batch`` runs them all in
one launch, printing ``=== scenario: NAME`` and then the error as Python prints it (rank 0)."""


def run_batch() -> None:
    import traceback

    loud = os.environ.get("RANK", "0") == "0"
    for name in BATCH:
        if loud:
            # One write, so another rank's output in the same pipe cannot split the marker line.
            sys.stdout.write(f"=== scenario: {name}\n")
            sys.stdout.flush()
        try:
            SCENARIOS[name]()
        except Exception:
            if loud:
                traceback.print_exc(file=sys.stdout)
                sys.stdout.flush()
        if dist.is_initialized():
            dist.barrier()


if __name__ == "__main__":
    if sys.argv[1] == "batch":
        run_batch()
    else:
        try:
            SCENARIOS[sys.argv[1]]()
        finally:
            dump_flight_recorder()
    if dist.is_initialized():
        dist.destroy_process_group()
