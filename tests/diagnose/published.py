"""Error lines as users published them, and near misses that must not be taken for them.

``PUBLISHED[pitfall_id]`` holds real error lines for the signatures that torch 2.13 on CPU cannot
reproduce (NCCL, CUDA, launchers, old wordings), each from the thread named in the comment: every
signature of a pitfall must match one of its reproduced outputs or one of these lines.
``NEAR_MISSES[pitfall_id]`` holds texts that look alike but are not that error: explain must not
name the pitfall for them. The texts are data, kept as posted.
"""

from __future__ import annotations

PUBLISHED: dict[str, list[str]] = {
    "fsdp1-auto-wrap-over-fsdp": [
        # https://github.com/huggingface/accelerate/issues/1889 (the title: torch 2.0.1's wording)
        "ValueError: Expected _orig_mod to NOT be FullyShardedDataParallel if using an "
        "`auto_wrap_policy`",
    ],
    "barrier-device-ids-on-gloo": [
        # https://github.com/huawei-noah/Efficient-Computing/issues/90 (Windows, torchrun)
        "RuntimeError: Function argument device_ids not supported for the selected backend gloo",
    ],
    "accelerate-fsdp2-prepare-model-alone": [
        # https://github.com/huggingface/transformers/issues/39961 (the title)
        "Calling trainer.evaluate() before trainer.trainer raises `ValueError: When using FSDP2, a "
        "model and optimizer must be passed together to `Accelerator.prepare()...`",
    ],
    "hf-accelerate-version-skew": [
        # https://github.com/azshue/AutoPoison/issues/5
        "AttributeError: 'FullyShardedDataParallelPlugin' object has no attribute 'save_model'",
        # https://github.com/axolotl-ai-cloud/axolotl/issues/542
        "'FullyShardedDataParallelPlugin' object has no attribute 'activation_checkpointing'",
    ],
    "ddp-buffer-broadcast-inplace": [
        # https://github.com/pytorch/pytorch/issues/175024 (BatchNorm's running statistics, CUDA)
        "RuntimeError: one of the variables needed for gradient computation has been modified "
        "by an inplace operation: [torch.cuda.FloatTensor [768]] is at version 3; expected "
        "version 2 instead.",
    ],
    "rank-killed-by-signal": [
        # https://github.com/lyu-yx/ACUMEN/issues/4 (mp.spawn's wording of a killed child)
        "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal "
        "SIGKILL",
    ],
    # pitfall id: error lines as published in the issue its signature_source names (or the
    # thread in the comment, for a signature added to a reproduced pitfall)
    "fsdp1-module-on-several-devices": [
        # https://github.com/Lightning-AI/lightning-thunder/pull/1453 (a layer left on meta)
        "RuntimeError: FSDP only supports single device modules but got params on "
        "{device(type='cuda', index=2), device(type='meta')}",
        # torch 2.13's other message of the same check (_check_single_device_module), for a
        # module on the CPU and one GPU without device_id
        "RuntimeError: To support a module with both CPU and GPU params, please pass in "
        "device_id argument.",
    ],
    "store-connect-timeout": [
        # https://github.com/open-mmlab/mmcv/issues/700 (torch 1.x: MASTER_ADDR did not resolve)
        "ValueError: host not found: Temporary failure in name resolution",
    ],
    "nccl-watchdog-timeout": [
        "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 "
        "milliseconds before timing out.",
        "[rank4]:[E318 07:39:53.792790830 ProcessGroupNCCL.cpp:630] [Rank 4] Some NCCL "
        "operations have failed or timed out.",
    ],
    "nccl-duplicate-gpu": [
        "Duplicate GPU detected : rank 3 and rank 0 both on CUDA device f000",
    ],
    "nccl-unhandled-system-error": [
        "NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275,"
        " unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1",
        "ncclSystemError: System call (socket, malloc, munmap, etc) failed",
    ],
    "nccl-nvml-library-missing": [
        "[2025-06-12 16:57:52] gpu0301:842624:842643 [0] misc/nvmlwrap.cc:74 NCCL WARN Failed to "
        "open libnvidia-ml.so.1",
    ],
    "nccl-internal-error": [
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1333, internal error - please report this issue to the NCCL "
        "developers, NCCL version 2.18.1",
        "ncclInternalError: Internal check failed.",
    ],
    "nccl-invalid-usage": [
        "torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/"
        "distributed/c10d/ProcessGroupNCCL.cpp:1727, invalid usage (run with NCCL_DEBUG=WARN for "
        "details), NCCL version 2.19.3",
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
        # https://github.com/vllm-project/vllm/issues/427 (older torch)
        "NCCL Error 5: invalid usage",
    ],
    "nccl-unhandled-cuda-error": [
        "[rank7]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/"
        "c10d/NCCLUtils.hpp:275, unhandled cuda error (run with NCCL_DEBUG=INFO for details), "
        "NCCL version 2.20.5",
        "[rank7]: ncclUnhandledCudaError: Call to CUDA function failed.",
    ],
    "cuda-oom-under-fsdp": [
        "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 5 "
        "has a total capacity of 23.43 GiB of which 210.06 MiB is free.",
    ],
    "nccl-without-gpu": [
        "`RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!`",
    ],
    "ddp-model-differs-across-ranks": [
        "RuntimeError: DDP expects same model across all ranks, but Rank 3 has 2247 params, "
        "while rank 0 has inconsistent 0 params.",
    ],
    "nccl-heartbeat-monitor-timeout": [
        "[rank1]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 1] Heartbeat monitor timed out! Process "
        "will be terminated after dumping debug info. workMetaList_.size()=103",
        "[rank1]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 1] [PG 0 Rank 1] ProcessGroupNCCL's "
        "watchdog got stuck for 600 seconds without making progress in monitoring enqueued "
        "collectives.",
        # https://github.com/sgl-project/sglang/issues/1691
        "[rank7]:[E1019 01:04:03.357615073 ProcessGroupNCCL.cpp:1375] [PG 3 Rank 7] First PG on "
        "this rank that detected no heartbeat of its watchdog.",
    ],
    "store-based-barrier-timeout": [
        "RuntimeError: Timed out initializing process group in store based barrier on rank: 7, "
        "for key: store_based_barrier_key:32 (world_size=8, worker_count=4, timeout=0:00:30)",
    ],
    "container-shm-too-small": [
        "g148:14937:69361 [0] misc/shmutils.cc:129 NCCL WARN Error while attaching to shared "
        "memory segment /dev/shm/nccl-glnlGK (size 14156128), error: No such file or directory (2)",
    ],
    "spawn-without-main-guard": [
        "RuntimeError: \n        An attempt has been made to start a new process before the\n"
        "        current process has finished its bootstrapping phase.\n",
    ],
    "cuda-in-forked-subprocess": [
        "但是，依旧报错Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
        "multiprocessing, you must use the 'spawn' start method，本地CPU是可以正常运行的",
    ],
    "nccl-library-mismatch": [
        "Importing Torch is giving me an error undefined symbol: ncclCommRegister",
    ],
    "nccl-ib-completion-error": [
        "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from "
        "peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
    ],
    "socket-interface-not-found": [
        "RuntimeError: [enforce fail at /root/pytorch/third_party/gloo/gloo/transport/tcp/"
        "device.cc:83] ifa != nullptr. Unable to find address for: bond1",
        # https://github.com/Alibaba-NLP/DeepResearch/issues/107
        "- no socket interface found",
    ],
    "grad-scaler-fp16-params": [
        'raise ValueError("Attempting to unscale FP16 gradients.")',
        "ValueError: Attempting to unscale FP16 gradients.",
    ],
    "fsdp1-device-id-mismatch": [
        "Multinode training ValueError: Inconsistent compute device and `device_id` on rank 0: "
        "cuda:1 vs cuda:0",
    ],
    "tensors-on-different-devices": [
        "and there's error like \"Expected all tensors to be on the same device, but found at "
        'least two devices, cpu and cuda:1"',
    ],
    "meta-device-model-not-materialized": [
        "Issue of using fully_shard (FSDP2) for Huggingface model: Cannot copy out of meta "
        "tensor; no data!",
    ],
    # Signatures added to reproduced pitfalls for wordings torch 2.13 no longer prints:
    "fsdp1-mixed-requires-grad": [
        # https://github.com/huggingface/transformers/issues/27744 (torch 2.0)
        "ValueError: `FlatParameter` requires uniform `requires_grad`",
    ],
    "mixed-precision-dtype-mismatch": [
        # https://github.com/mosaicml/llm-foundry/issues/333
        "RuntimeError: expected scalar type BFloat16 but found Float",
    ],
    "nonfinite-loss": [
        # https://github.com/state-spaces/mamba/issues/400
        "    backbone._fsdp_wrapped_module.cls_token - Grad Norm: nan",
    ],
    "cpu-tensor-on-nccl-group": [
        # https://github.com/pytorch/examples/issues/1030
        "RuntimeError: Tensors must be CUDA and dense",
    ],
    "state-dict-load-mismatch": [
        # https://github.com/RLinf/RLinf/issues/119
        "AssertionError: FSDP assumes _fsdp_wrapped_module.base_model.model.blocks.23.mlp.fc2."
        "lora_B.default.weight is in the state_dict but the state_dict only has odict_keys(",
    ],
    "nccl-not-available": [
        # https://github.com/pytorch/pytorch/issues/159742
        "UserWarning: Attempted to get default timeout for nccl backend, but NCCL support is not "
        "compiled",
    ],
    "global-rank-as-device-index": [
        "torch._C._cuda_setDevice(device)",
        "RuntimeError: CUDA error: invalid device ordinal",
    ],
    "launcher-env-not-set": [
        # https://github.com/chenbinghui1/DSL/issues/28 (the title)
        "KeyError: 'RANK'",
        # https://github.com/hzwer/ECCV2022-RIFE/issues/52 (the traceback's last source line)
        '    raise _env_error("MASTER_ADDR")',
    ],
    "deprecated-distributed-launch": [
        # https://github.com/ziplab/SN-Net/issues/2 (torch 2.0's launcher passes --local-rank)
        "train.py: error: unrecognized arguments: --local-rank=5",
        # https://github.com/facebookresearch/detr/issues/578 (the title)
        "FutureWarning: The module torch.distributed.launch is deprecated",
    ],
    "optimizer-before-sharding": [
        # https://github.com/Lightning-Universe/lightning-GPT/pull/17
        "ValueError: The optimizer does not seem to reference any FSDP parameters. HINT: Make sure "
        "to create the optimizer after setting up the model by referencing "
        "`self.trainer.model.parameters()` in the `configure_optimizers()` hook.",
    ],
    "device-mesh-device-index": [
        # https://github.com/pytorch/pytorch/issues/124327 (FSDP2 before the explicit check)
        '#   File "/data/users/whc/pytorch/torch/distributed/_composable/fsdp/_fsdp_init.py",\n'
        "#   line 69, in _get_device_from_mesh\n"
        "#              return torch.device(mesh.device_type, device_handle.current_device())\n"
        "#   AttributeError: 'NoneType' object has no attribute 'current_device'",
    ],
    "fsdp1-mixed-dtype-flat-param": [
        # https://github.com/h2oai/h2o-llmstudio/issues/98 (the older wording)
        "ValueError: FlatParameter requires uniform dtype but got torch.float16 and torch.float32",
    ],
    "generate-on-sharded-params": [
        # https://github.com/huggingface/trl/issues/2796 (generate on FSDP1-sharded parameters)
        "RuntimeError: The tensor has a non-zero number of elements, but its data is not allocated"
        " yet. Caffe2 uses a lazy allocation, so you will need to call mutable_data() or "
        "raw_mutable_data() to actually allocate memory.",
    ],
    "fsdp1-fsdp2-policy-swap": [
        # https://github.com/huggingface/trl/issues/3581 (FSDP1 wrapping with FSDP2's policy)
        "'MixedPrecisionPolicy' object has no attribute '_module_classes_to_ignore'",
    ],
    "fsdp2-import-on-older-torch": [
        # https://github.com/EleutherAI/bergson/issues/257 (torch 2.3)
        "ImportError: cannot import name 'fully_shard' from 'torch.distributed.fsdp'",
        # https://github.com/huggingface/transformers/issues/38973 (the title)
        "ImportError: cannot import name 'DTensor' from 'torch.distributed.tensor'",
    ],
    "gloo-hostname-address": [
        # https://github.com/msr-fiddle/pipedream/issues/32 (a container whose name does not resolve)
        "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:127] "
        "rp != nullptr. Unable to find address for: dgx-1.ai",
        # torch 2.13's wording: ProcessGroupGloo.create_device (tests/knowledge/test_launch_facts.py)
        "RuntimeError: Cannot resolve no-such-host.invalid to a (local) address",
        # https://github.com/pytorch/pytorch/issues/15592 (/etc/hosts maps the name to 127.0.1.1)
        "terminate called after throwing an instance of 'gloo::IoException'\n  what():  [/opt/conda/"
        "conda-bld/pytorch_1544084119927/work/third_party/gloo/gloo/transport/tcp/pair.cc:724] "
        "connect [127.0.1.1]:3210: Connection refused",
        # https://github.com/aws-samples/aws-do-eks/pull/69 (hostNetwork pods: only 127.0.0.1)
        "RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/"
        "tcp/pair.cc:152]\n  timed out connecting: SO_ERROR: Connection refused, "
        "remote=[127.0.0.1]:<port>\n  (rank=8, size=16, local=[127.0.0.1])",
    ],
    "ddp-static-graph-no-sync-first-step": [
        # https://github.com/pytorch/pytorch/issues/143580 (the title)
        'RuntimeError: expect_autograd_hooks_ INTERNAL ASSERT FAILED at "../torch/csrc/distributed/'
        'c10d/reducer.cpp"',
    ],
    "torchrun-libuv-on-windows": [
        # https://github.com/datastone-spirit/spirit-lora-trainer/issues/7 (the title)
        "torch.distributed.DistStoreError: use_libuv was requested but PyTorch was built without "
        "libuv support, run with USE_LIBUV=0 to disable it.",
        # https://github.com/pytorch/pytorch/issues/139990 (torch 2.5's wording)
        "RuntimeError: use_libuv was requested but PyTorch was build without libuv support",
    ],
    "torchrun-not-on-path": [
        # https://github.com/hiyouga/LlamaFactory/issues/5216 (the title)
        "/bin/sh: 1: torchrun: not found",
        # https://github.com/awslabs/awsome-distributed-ai/pull/245 (a batch job's shell)
        "command torchrun not found",
    ],
}

NEAR_MISSES: dict[str, list[str]] = {
    "fsdp1-auto-wrap-over-fsdp": [
        # https://github.com/huggingface/peft/pull/2167: PEFT's policy found no class to wrap
        "Exception: Could not find the transformer layer class to wrap in the model.",
    ],
    "fsdp1-process-group-and-device-mesh": [
        # torch 2.13: the mesh alone, but 1-D for HYBRID_SHARD (hybrid-shard-needs-2d-mesh)
        "ValueError: Expected device_mesh to have ndim=2 but got 1",
        # torch 2.13: HYBRID_SHARD wrapped by hand with neither groups nor a mesh
        "ValueError: Manual wrapping with ShardingStrategy.HYBRID_SHARD requires explicit "
        "specification of process group or device_mesh.",
    ],
    "debug-detail-on-some-ranks": [
        # https://github.com/vllm-project/vllm/issues/12526 (the title: a store wait, no wrapper)
        "Getting torch.distributed.DistStoreError: wait timeout after 600000ms on Multi GPU "
        "instance (NC96 - 4xA100s)",
        # torch 2.13, two Gloo ranks: rank 1's first barrier while rank 0 alone had DETAIL
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
        "Timed out waiting 8000ms for recv operation to complete",
    ],
    "barrier-device-ids-on-gloo": [
        # https://github.com/pytorch/pytorch/pull/123866 (NCCL's warning that names device_ids)
        "ProcessGroupNCCL.cpp:3720] [PG 0 Rank 1]  using GPU 1 to perform barrier as devices used "
        "by this process are currently unknown. This can potentially cause a hang if this rank to "
        "GPU mapping is incorrect.Specify device_ids in barrier() to force use of a particular "
        "device.",
        # the other check of torch 2.0.1's barrier (its distributed_c10d.py), on the type
        "RuntimeError: Invalid function argument: device_ids type should be List[int]",
    ],
    "ddp-buffer-broadcast-inplace": [
        # https://github.com/hustvl/LightningDiT/issues/30 (a 2-D rotary table, compiled)
        "RuntimeError: one of the variables needed for gradient computation has been modified "
        "by an inplace operation: [torch.cuda.FloatTensor [256, 72]] is at version 5; expected "
        "version 4 instead.",
        # https://github.com/WOW5678/CompNet/issues/2 (an activation: "output 0 of")
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [torch.FloatTensor [1, 2, 2]], which is output 0 of AsStridedBackward0, is "
        "at version 1; expected versio",
    ],
    "accelerate-fsdp2-prepare-model-alone": [
        # Accelerate's other FSDP2 check: two models in one call
        "ValueError: Only one model is supported when using FSDP2",
    ],
    "hf-accelerate-version-skew": [
        # the wrapper, not Accelerate's plugin: an attribute of the wrapped model
        "AttributeError: 'FullyShardedDataParallel' object has no attribute 'save_model'",
    ],
    "spawn-child-exited": [
        # a killed child is rank-killed-by-signal's, not an exit of the child's own
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal "
        "SIGABRT",
    ],
    # pitfall id: texts that must not be explained as that pitfall
    "fsdp1-module-on-several-devices": [
        # FSDP2's own device check is another message
        "RuntimeError: FSDP needs a non-CPU accelerator device, but no accelerator device is "
        "detected.",
    ],
    "store-connect-timeout": [
        # a model download failing, not the rendezvous
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', "
        "port=443): Max retries exceeded (Caused by NewConnectionError('Failed to establish a "
        "new connection: [Errno -3] Temporary failure in name resolution'))",
    ],
    "device-mesh-slice-unknown-name": [
        # the other KeyError of mesh slicing: known names in another order
        "KeyError: \"Invalid mesh_dim_names ('tp', 'dp') specified. Mesh dim indices should be in "
        'ascending order."',
    ],
    "nccl-not-available": ["torch.distributed.is_nccl_available() is True: using the NCCL backend"],
    "nccl-without-gpu": [
        "[I ProcessGroupNCCL.cpp:672] [Rank 0] ProcessGroupNCCL initialized with following options:"
    ],
    "launcher-env-not-set": [
        "environment variable RANK set to 3 by torchrun",
        "KeyError: 'RANKING_SCORE'",
    ],
    "process-group-initialized-twice": [
        "the default process group is initialized once per process"
    ],
    "fully-shard-scalar-parameter": ["fully_shard supports parameters with at least one dimension"],
    "dcp-missing-key-on-load": ['Missing key(s) in state_dict: "layers.0.weight"'],
    "ddp-model-differs-across-ranks": ["DDP expects the same world size on every node"],
    "nccl-heartbeat-monitor-timeout": [
        # https://github.com/NVIDIA/nccl/issues/1657: a normal shutdown line
        "[rank0]:[I323 21:57:08.461980659 ProcessGroupNCCL.cpp:1538] [PG ID 0 PG GUID "
        "0(default_pg) Rank 0] ProcessGroupNCCL heart beat monitor thread joined.",
    ],
    "store-based-barrier-timeout": [
        # https://github.com/ultralytics/yolov5/issues/4574: still waiting, not timed out
        "Waiting in store based barrier to initialize process group for rank: 0, key: "
        "store_based_barrier_key:1 (world_size=4, worker_count=8, timeout=0:30:00)",
    ],
    "container-shm-too-small": ["NCCL INFO Channel 00/1 : 0[0] -> 7[7] via SHM/direct/direct"],
    "spawn-without-main-guard": ["mp.spawn started 2 processes after the bootstrapping phase"],
    "cuda-in-forked-subprocess": ["CUDA initialised in the spawned subprocess"],
    "nccl-library-mismatch": [
        "ImportError: libtorch_cuda.so: undefined symbol: cudaGetDeviceCount",
        "ncclCommRegister registered 4 buffers",
    ],
    "hybrid-shard-needs-2d-mesh": ["device_mesh with ndim=2 for HYBRID_SHARD"],
    "nccl-ib-completion-error": ["NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>"],
    "socket-interface-not-found": [
        "NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
        "Unable to find address",
    ],
    "grad-scaler-fp16-params": ["GradScaler: unscaling FP32 gradients before clipping"],
    "fsdp1-device-id-mismatch": ["FSDP compute device cuda:0 and device_id 0 agree on rank 0"],
    "tensors-on-different-devices": ["all tensors are on the same device cuda:0"],
    "nonfinite-loss": [
        "step 10 | loss: 0.4213 | grad_norm: 1.25 | lr 3e-4",
        "eval loss: inference done in 3.2 s",
        "grad_norm is finite",
    ],
    "state-dict-load-mismatch": [
        "FSDP assumes the module is wrapped before the optimizer is built"
    ],
    "mixed-precision-dtype-mismatch": ["expected scalar type"],
    "nccl-invalid-usage": ["RuntimeError: NCCL Error 2: unhandled system error"],
    "global-rank-as-device-index": [
        "RuntimeError: CUDA error: invalid device function",
        "torch.cuda.set_device(local_rank): device ordinal 3 of 8 visible GPUs",
    ],
    "nccl-nvml-library-missing": [
        # https://github.com/NVIDIA/nccl-tests/issues/14: an IB library NCCL may do without
        "e66aa18dc444:3171:3171 [0] misc/ibvwrap.cu:61 WARN Failed to open libibverbs.so[.1]",
        "NCCL INFO Loaded NVML from libnvidia-ml.so.1",
    ],
    "rank-killed-by-signal": [
        "  exitcode  : 1 (pid: 3669031)",
        "  exitcode  : -15 (pid: 11101)  (SIGTERM)",
    ],
    "cpu-tensor-on-nccl-group": ["Tensors must be contiguous"],
    "meta-device-model-not-materialized": ["copied the metadata out of the tensor"],
    "torchrun-libuv-on-windows": [
        "init_method=tcp://127.0.0.1:29500?use_libuv=0: the store was built without libuv",
    ],
    "torchrun-not-on-path": [
        "torchrun: error: the following arguments are required: training_script",
        "command torchrun --nproc-per-node 2 train.py finished",
    ],
    "ddp-wrapper-attribute": [
        "AttributeError: 'FullyShardedDataParallel' object has no attribute '_fsdp_wrapped_module'",
    ],
    "deprecated-distributed-launch": [
        "train.py: error: unrecognized arguments: --lr=0.1",
        "torchrun sets LOCAL_RANK; the script reads os.environ['LOCAL_RANK']",
    ],
    "optimizer-before-sharding": [
        "ValueError: optimizer got an empty parameter list",
    ],
    "fsdp2-import-on-older-torch": [
        "ImportError: cannot import name 'FullStateDictConfig' from 'torch.distributed.fsdp'",
        "from torch.distributed.tensor.parallel import parallelize_module",
    ],
    "gloo-hostname-address": [
        "connect [10.0.0.2]:3210: Connection refused",
        "Gloo connectFullMesh failed with timed out connecting, remote=[10.1.2.3]:41000",
        # the same words for an interface GLOO_SOCKET_IFNAME names (socket-interface-not-found)
        "[enforce fail at gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find "
        "address for: bond1",
    ],
    "ddp-static-graph-no-sync-first-step": [
        "RuntimeError: expected_autograd_hooks: not an internal assert",
    ],
}
