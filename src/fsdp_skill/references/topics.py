"""What the references cover: the torch API topics to introspect and the docs pages to crawl.

Each API topic becomes one page ``references/api-<id>.md``. Names missing from the installed
torch are skipped (and show up as ``removed``/``added`` when torch changes), so one list
serves every torch version.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ApiTopic:
    id: str
    title: str
    module: str
    """The public module the names are documented under."""
    names: tuple[str, ...]
    """Names in ``module``; ``()`` means the module's ``__all__``."""
    docs_page: str
    """The docs page (relative to the versioned docs root) that documents these names."""
    methods: tuple[str, ...] = ()
    """Classes among ``names`` whose own public methods get a section each."""
    module_doc: bool = False
    """Document the module itself (its docstring is the reference, as for torchrun)."""


API_TOPICS: tuple[ApiTopic, ...] = (
    ApiTopic(
        "process-groups",
        "Process groups: initialisation, ranks, subgroups, stores",
        "torch.distributed",
        (
            "init_process_group",
            "destroy_process_group",
            "is_initialized",
            "is_available",
            "get_rank",
            "get_world_size",
            "get_node_local_rank",
            "get_backend",
            "get_default_backend_for_device",
            "is_nccl_available",
            "is_gloo_available",
            "is_mpi_available",
            "is_xccl_available",
            "is_torchelastic_launched",
            "new_group",
            "new_subgroups",
            "new_subgroups_by_enumeration",
            "split_group",
            "get_process_group_ranks",
            "get_group_rank",
            "get_global_rank",
            "Backend",
            "GroupMember",
            "Store",
            "TCPStore",
            "FileStore",
            "HashStore",
            "PrefixStore",
            "DistError",
            "DistBackendError",
            "DistNetworkError",
            "DistStoreError",
        ),
        "distributed.html",
    ),
    ApiTopic(
        "collectives",
        "Collective and point-to-point communication",
        "torch.distributed",
        (
            "ReduceOp",
            "all_reduce",
            "all_gather",
            "all_gather_into_tensor",
            "all_gather_object",
            "reduce_scatter",
            "reduce_scatter_tensor",
            "all_to_all",
            "all_to_all_single",
            "broadcast",
            "broadcast_object_list",
            "reduce",
            "gather",
            "gather_object",
            "scatter",
            "scatter_object_list",
            "barrier",
            "monitored_barrier",
            "send",
            "recv",
            "isend",
            "irecv",
            "batch_isend_irecv",
            "P2POp",
            "Work",
        ),
        "distributed.html",
    ),
    ApiTopic(
        "device-mesh",
        "DeviceMesh and init_device_mesh",
        "torch.distributed.device_mesh",
        (),
        "distributed.html",
        methods=("DeviceMesh",),
    ),
    ApiTopic(
        "fsdp2",
        "FSDP2: fully_shard, FSDPModule and its policies",
        "torch.distributed.fsdp",
        (
            "fully_shard",
            "FSDPModule",
            "UnshardHandle",
            "MixedPrecisionPolicy",
            "OffloadPolicy",
            "CPUOffloadPolicy",
            "register_fsdp_forward_method",
            "DataParallelMeshDims",
            "share_comm_ctx",
        ),
        "distributed.fsdp.fully_shard.html",
        methods=("FSDPModule",),
    ),
    ApiTopic(
        "fsdp1",
        "FSDP1: FullyShardedDataParallel, sharding strategies, state-dict configs",
        "torch.distributed.fsdp",
        (
            "FullyShardedDataParallel",
            "ShardingStrategy",
            "BackwardPrefetch",
            "MixedPrecision",
            "CPUOffload",
            "StateDictType",
            "StateDictConfig",
            "FullStateDictConfig",
            "ShardedStateDictConfig",
            "LocalStateDictConfig",
            "OptimStateDictConfig",
            "FullOptimStateDictConfig",
            "ShardedOptimStateDictConfig",
            "LocalOptimStateDictConfig",
            "StateDictSettings",
            "OptimStateKeyType",
        ),
        "fsdp.html",
        methods=("FullyShardedDataParallel",),
    ),
    ApiTopic(
        "fsdp1-wrap",
        "FSDP1 auto-wrap policies",
        "torch.distributed.fsdp.wrap",
        (),
        "fsdp.html",
    ),
    ApiTopic(
        "checkpoint",
        "Distributed checkpoint (DCP): save, load, async_save, storage",
        "torch.distributed.checkpoint",
        (
            "save",
            "load",
            "async_save",
            "FileSystemWriter",
            "FileSystemReader",
            "DefaultSavePlanner",
            "DefaultLoadPlanner",
            "CheckpointException",
        ),
        "distributed.checkpoint.html",
    ),
    ApiTopic(
        "state-dict",
        "Model and optimizer state dicts for sharded models",
        "torch.distributed.checkpoint.state_dict",
        (
            "get_state_dict",
            "set_state_dict",
            "get_model_state_dict",
            "set_model_state_dict",
            "get_optimizer_state_dict",
            "set_optimizer_state_dict",
            "StateDictOptions",
        ),
        "distributed.checkpoint.html",
    ),
    ApiTopic(
        "join",
        "Uneven inputs: Join, Joinable, JoinHook",
        "torch.distributed.algorithms.join",
        (),
        "distributed.algorithms.join.html",
        methods=("Join", "Joinable", "JoinHook"),
    ),
    ApiTopic(
        "ddp",
        "DistributedDataParallel",
        "torch.nn.parallel",
        ("DistributedDataParallel",),
        "generated/torch.nn.parallel.DistributedDataParallel.html",
        methods=("DistributedDataParallel",),
    ),
    ApiTopic(
        "dtensor",
        "DTensor basics: placements and distribution",
        "torch.distributed.tensor",
        (
            "DTensor",
            "distribute_tensor",
            "distribute_module",
            "Placement",
            "Shard",
            "Replicate",
            "Partial",
        ),
        "distributed.tensor.html",
    ),
    ApiTopic(
        "activation-checkpointing",
        "Activation checkpointing wrappers",
        "torch.distributed.algorithms._checkpoint.checkpoint_wrapper",
        ("checkpoint_wrapper", "apply_activation_checkpointing", "CheckpointImpl"),
        "checkpoint.html",
    ),
    ApiTopic(
        "launch",
        "Launching: torchrun, elastic launch and error recording",
        "torch.distributed.run",
        (),
        "elastic/run.html",
        module_doc=True,
    ),
    ApiTopic(
        "launch-errors",
        "Recording errors of elastic workers",
        "torch.distributed.elastic.multiprocessing.errors",
        ("record", "ChildFailedError"),
        "elastic/errors.html",
    ),
)

DOCS_ROOT = "https://docs.pytorch.org/docs/{version}/"
"""The official docs of one torch version (``2.13``, or ``main`` for development builds)."""


# --- web sources ---------------------------------------------------------------------------

WEB_SEEDS: tuple[str, ...] = (
    "https://docs.pytorch.org/docs/stable/distributed.html",
    "https://docs.pytorch.org/docs/stable/fsdp.html",
    "https://docs.pytorch.org/docs/stable/distributed.fsdp.fully_shard.html",
    "https://docs.pytorch.org/docs/stable/distributed.checkpoint.html",
    "https://docs.pytorch.org/docs/stable/distributed.algorithms.join.html",
    "https://docs.pytorch.org/docs/stable/distributed.tensor.html",
    "https://docs.pytorch.org/docs/stable/elastic/run.html",
    "https://docs.pytorch.org/tutorials/intermediate/FSDP_tutorial.html",
    "https://docs.pytorch.org/tutorials/intermediate/FSDP1_tutorial.html",
    "https://docs.pytorch.org/tutorials/recipes/distributed_device_mesh.html",
    "https://docs.pytorch.org/tutorials/recipes/distributed_checkpoint_recipe.html",
    "https://docs.pytorch.org/tutorials/recipes/distributed_async_checkpoint_recipe.html",
    "https://docs.pytorch.org/tutorials/advanced/generic_join.html",
    "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
)
"""The official pages a web refresh starts from."""

WEB_TOPIC_WORDS: tuple[str, ...] = (
    "distributed",
    "fsdp",
    "fully_shard",
    "device_mesh",
    "checkpoint",
    "join",
    "ddp",
    "nccl",
    "elastic",
    "torchrun",
    "dtensor",
)
"""A linked page is in scope when it lies under a seed's folder and its path names a topic."""
