"""The fact check of the knowledge: what torch 2.13 does, and what the pages say about it.

Behaviour comes from ``facts_probe.py`` (four Gloo ranks on CPU) or from the installed torch
(headers, sources, ``finfo``); each test also pins the sentence of the guide, pitfall or
SKILL.md that states it, so that a torch upgrade that changes the behaviour names the text to
review, and an edit that reintroduces the old claim fails.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

from fsdp_skill import knowledge
from fsdp_skill.bundle_files import BUNDLE_DIR
from tests.distributed import run_ranks
from tests.knowledge.texts import flat, section
from tests.signatures import recognises

torch = pytest.importorskip("torch")

HERE = Path(__file__).parent
TORCH_DIR = Path(torch.__file__).parent
C10D_HEADERS = TORCH_DIR / "include" / "torch" / "csrc" / "distributed" / "c10d"
GUIDES = {g.id: g for g in knowledge.guides()}


def _guide(guide_id: str) -> str:
    return flat(GUIDES[guide_id].body)


def _skill() -> str:
    return flat((BUNDLE_DIR / "SKILL.md").read_text(encoding="utf-8"))


def _pitfall(pitfall_id: str) -> str:
    p = knowledge.pitfall(pitfall_id)
    assert p is not None, pitfall_id
    return flat("\n".join((p.symptom, p.cause, p.fix, p.good)))


@pytest.fixture(scope="module")
def observed(tmp_path_factory) -> dict:
    """What ``facts_probe.py`` saw torch do on four Gloo ranks."""
    cwd = tmp_path_factory.mktemp("facts")
    result = run_ranks(HERE / "facts_probe.py", 4, timeout=240, cwd=cwd)
    assert result.returncode == 0, result.stderr[-4000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("FACTS "))
    return json.loads(line.removeprefix("FACTS "))


# --- behaviour on four ranks, and the text that states it ----------------------------------


@pytest.mark.slow
def test_gloo_runs_all_to_all_on_cpu(observed):
    """backends: Gloo runs all_to_all / all_to_all_single (and send/recv) on CPU."""
    assert observed["gloo_all_to_all"] == {"single": True, "list": True, "send_recv": True}
    text = _guide("backends")
    assert "`all_to_all` and `all_to_all_single` included" in text
    assert "everything except `all_to_all`" not in text


@pytest.mark.slow
def test_mesh_slice_names_follow_the_mesh_order(observed):
    """device-mesh: mesh["tp", "dp"] on a ("dp", "tp") mesh raises KeyError."""
    assert observed["mesh_slicing"]["in_order"] is None
    assert observed["mesh_slicing"]["reordered"].startswith("KeyError")
    assert "ascending order" in observed["mesh_slicing"]["reordered"]
    text = _guide("device-mesh")
    assert 'on a `("dp", "tp")` mesh, `mesh["tp", "dp"]` raises `KeyError`' in text
    assert "in the order you name them" not in text


@pytest.mark.slow
def test_sub_groups_do_not_inherit_the_init_timeout(observed):
    """process-groups: new_group and mesh sub-groups take the backend default."""
    timeouts = observed["group_timeouts"]
    assert timeouts["default_group"] == timeouts["init"] == "0:01:17"
    assert timeouts["new_group"] == timeouts["mesh_dim"] == "0:30:00"  # Gloo's default
    assert timeouts["new_group_with_timeout"] == timeouts["init"]
    text = _guide("process-groups")
    assert "`init_device_mesh` do **not** inherit it" in text
    assert "Sub-groups (`new_group`) take the same default" not in text
    assert "device-mesh sub-groups take the backend default" in _skill()


@pytest.mark.slow
def test_clip_grad_norm_fails_on_mixed_tensor_kinds_and_on_several_meshes(observed):
    """grad-clipping-accumulation and tensor-parallel: where one clip_grad_norm_ call fails."""
    assert "mixed torch.Tensor and DTensor" in observed["clip_mixed_dtensor_and_tensor"]
    tp = observed["clip_across_tp_and_dp_meshes"]
    assert tp["meshes"] == [["dp"], ["dp", "tp"]]
    assert "must have the same mesh" in tp["clip"]
    text = _guide("grad-clipping-accumulation")
    assert '"aten._foreach_norm.Scalar got mixed torch.Tensor and DTensor"' in text
    assert '"All operands in aten.stack.default must have the same mesh"' in text
    assert "## Clipping across meshes" in GUIDES["tensor-parallel"].body


@pytest.mark.slow
def test_fully_shard_on_the_whole_tp_mesh_and_dp_mesh_dims(observed):
    """tensor-parallel, "The mesh fully_shard takes": each message and placement it quotes."""
    seen = observed["fully_shard_on_the_whole_mesh"]
    text = section("tensor-parallel", "The mesh fully_shard takes")
    assert seen["tp_then_whole_mesh"].startswith("RuntimeError: Cannot concatenate overlapping")
    assert f"`{seen['tp_then_whole_mesh']}`" in text
    for case in ("tp_submesh_dp_mesh_dims", "tp_then_dp_mesh_dims", "plain_input"):
        message = seen[case].split(": ", 1)[1]
        quoted = message.split(", need to convert")[0]  # the mixed-input one without its advice
        assert quoted in text, f"{case}: {message!r}"
    assert seen["weight"] == seen["grad"] == "(_StridedShard(dim=0, sf=2), Shard(dim=0))"
    assert f"`{seen['weight']}`, and so does its gradient" in text
    assert seen["output"] == "(Shard(dim=0), Partial(sum))"


@pytest.mark.slow
def test_cpu_gradients_need_a_cpu_backend_to_clip(observed):
    """cpu-offload and SKILL.md: clip_grad_norm_ on CPU grads of a GPU-only group fails."""
    message = observed["clip_cpu_grads_without_cpu_backend"]
    assert message == "RuntimeError: No backend type associated with device type cpu"
    pitfall = knowledge.pitfall("cpu-tensor-on-nccl-group")
    assert recognises(pitfall, message)
    for text in (_guide("cpu-offload"), _skill()):
        assert '"cpu:gloo,cuda:nccl"' in text
        assert "No backend type associated with device type cpu" in text
    cause = _pitfall("cpu-tensor-on-nccl-group")
    assert "the norm that `clip_grad_norm_` all-reduces across ranks is a CPU tensor" in cause


def test_fsdp1_clips_on_the_compute_device_and_the_launch_names_the_pitfalls_use():
    """cpu-tensor-on-nccl-group, device-mesh-device-index, global-rank-as-device-index: FSDP1's
    clip_grad_norm_ computes its norms on the compute device, init_device_mesh's first argument
    is named device_type, and torchrun takes both spellings of --nproc-per-node."""
    from torch.distributed import run
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    clip = inspect.getsource(FSDP.clip_grad_norm_)
    assert "self._zero_scalar, self.compute_device" in clip
    assert "dist.all_reduce(total_norm, group=self.process_group)" in clip
    assert "reduces its norm on the compute device" in _pitfall("cpu-tensor-on-nccl-group")
    assert next(iter(inspect.signature(init_device_mesh).parameters)) == "device_type"
    assert "its first argument, `device_type`" in _pitfall("device-mesh-device-index")
    parser = inspect.getsource(run.get_args_parser)
    assert '"--nproc-per-node"' in parser and '"--nproc_per_node"' in parser
    assert "`--nproc_per_node`, the spelling torchrun also takes" in _pitfall(
        "global-rank-as-device-index"
    )


@pytest.mark.slow
def test_async_save_needs_a_cpu_backend(observed):
    """checkpointing: async_save on a group without a CPU backend raises."""
    message = observed["async_save_without_cpu_backend"]
    assert message.startswith("AssertionError: A CPU backend must be enabled for async save")
    text = _guide("checkpointing")
    assert "`AssertionError: A CPU backend must be enabled for async save`" in text
    assert "**It costs host RAM.**" in text


@pytest.mark.slow
def test_hsdp_all_reduces_once_per_group(observed):
    """hsdp: one all-reduce per FSDP parameter group per backward, not one per step."""
    counts = observed["hsdp_all_reduces_per_backward"]
    assert counts["all_reduces"] == counts["groups_with_parameters"] == 3
    text = _guide("hsdp")
    assert "one all-reduce per FSDP parameter group in every backward" in text
    assert "only one all-reduce of the already-sharded gradients runs per step" not in text


@pytest.mark.slow
def test_a_mesh_dimension_of_one_skips_its_collectives(observed):
    """hsdp, 'A mesh dimension of size 1': the table's counts, from four Gloo ranks."""
    calls = observed["collectives_with_a_dimension_of_one"]

    def row(counts: dict) -> tuple[int, int, int]:
        return counts["all_gather_single"], counts["reduce_scatter_single"], counts["all_reduce"]

    assert row(calls["shard_only"]) == (4, 2, 2)
    assert row(calls["replicate_only"]) == (0, 0, 2)
    assert row(calls["one_rank"]) == (0, 0, 0)
    table = section("hsdp", "A mesh dimension of size 1")
    assert "| `(1, 4)`: plain FSDP over 4 | 4 | 2 | 2 (over a replica group of one rank) |" in table
    assert "| `(4, 1)`: replicas only | 0 | 0 | 2, one per parameter group |" in table
    assert "| one rank (one GPU, or a one-rank slice of a mesh) | 0 | 0 | 0 |" in table


@pytest.mark.slow
def test_dcp_keeps_one_copy_of_a_plain_tensor_every_rank_saves(observed):
    """dcp-plain-tensor-saved-once: four ranks save their rank number; under one plain key
    all load one value back, under keys of their own or as a DTensor's shards each its own."""
    loaded = observed["dcp_plain_tensor_per_rank"]
    assert len(loaded["plain"]) == 1
    assert loaded["own"] == loaded["sharded"] == [0.0, 1.0, 2.0, 3.0]
    from torch.distributed.checkpoint._dedup_save_plans import dedup_save_plans

    assert "only the smallest SavePlan in terms of planned storage keeps the entry" in flat(
        dedup_save_plans.__doc__
    )
    cause = flat(knowledge.pitfall("dcp-plain-tensor-saved-once").cause)
    assert "each rank saved its rank number under one key, and all four loaded the same" in cause
    assert "the rank with the least planned storage writes it" in cause


@pytest.mark.slow
def test_plain_grad_scaler_agrees_on_inf_under_fsdp2(observed):
    """mixed-precision, SKILL.md, FSDP006: GradScaler for FSDP2, ShardedGradScaler for FSDP1."""
    scaler = observed["grad_scaler_with_fsdp2"]
    assert scaler == {"skipped_on_every_rank": True, "scale_after": 512.0}
    from torch.distributed.tensor import _dispatch

    assert "found_inf_reduce_handler" in Path(_dispatch.__file__).read_text(encoding="utf-8")
    _assert_grad_scaler_advice_is_consistent()


@pytest.mark.slow
def test_sync_batchnorm_refuses_cpu_inputs(observed):
    """buffers-batchnorm: SyncBatchNorm on CPU with several ranks raises ValueError."""
    message = observed["sync_batchnorm_on_cpu"]
    assert message.startswith("ValueError: SyncBatchNorm expected input tensor to be on GPU")
    assert message.removeprefix("ValueError: ") in _guide("buffers-batchnorm")


def test_gloo_refuses_an_all_gather_of_uneven_sizes(observed):
    """gloo-all-gather-uneven-sizes: the message its signature matches, and the claim."""
    message = observed["all_gather_uneven_sizes"]
    assert message.startswith("RuntimeError: ProcessGroupGloo::allgather: invalid tensor size")
    pitfall = knowledge.pitfall("gloo-all-gather-uneven-sizes")
    assert recognises(pitfall, message)
    assert "Gloo requires every output tensor to have the size of the local input" in flat(
        pitfall.cause
    )
    into = observed["all_gather_into_stacked_output"]
    assert into["flat"] is None
    assert recognises(pitfall, into["stacked"])
    assert "expected (3), got (1, 3)" in into["stacked"]
    assert into["stacked_older_name"] == into["stacked"]  # the symptom's name: the same refusal
    assert "Gloo also wants its output flat" in flat(pitfall.cause)


def test_fsdp1_keeps_flat_shards_and_distribute_tensor_can_cut_locally(observed):
    """fsdp2 (optimizers that need whole matrices): FSDP1's parameters are 1-D even with
    use_orig_params=True (48 elements over 4 ranks: 12 each), and distribute_tensor with
    src_data_rank=None uses each rank's own data."""
    from torch.distributed.tensor import distribute_tensor

    assert observed["fsdp1_orig_param_shapes"] == [[12]]
    text = _guide("fsdp2")
    assert "(1-D shards even with `use_orig_params=True`)" in text
    assert inspect.signature(distribute_tensor).parameters["src_data_rank"].default == 0
    doc = flat(distribute_tensor.__doc__)
    assert (
        "If passing ``None`` explicitly, :meth:`distribute_tensor` simply uses its local data"
        in doc
    )
    assert "src_data_rank=None)` keeps this rank's piece **without** communication" in text


def test_the_full_fine_tune_table_is_sixteen_bytes_a_parameter():
    """oom-debugging: each row of the table is 16 bytes per parameter (its example measures
    the 16 on two ranks), divided over 8 and 16 GPUs."""
    section = GUIDES["oom-debugging"].body.split("## Before a run:")[1].split("\n## ")[0]
    rows = re.findall(r"^\| (\d+)B \| ([\d,]+) GB \| (\d+) GB \| (\d+) GB \|$", section, re.M)
    assert len(rows) == 3
    for billions, total, on8, on16 in rows:
        state = int(billions) * 16
        assert int(total.replace(",", "")) == state
        assert (int(on8), int(on16)) == (state // 8, state // 16)


def test_ddp_and_raw_collectives_refuse_dtensor_parameters(observed):
    """dtensor-in-c10d-collective: both messages, matched by its signatures and by none of
    dtensor-op-without-sharding-rule's (whose fix, a sharding rule, would be wrong here)."""
    seen = observed["dtensor_in_collectives"]
    assert "c10d.broadcast_.default does not have a sharding strategy" in seen["ddp"]
    assert "c10d.allreduce_.default does not have a sharding strategy" in seen["all_reduce"]
    ours = knowledge.pitfall("dtensor-in-c10d-collective")
    other = knowledge.pitfall("dtensor-op-without-sharding-rule")
    for message in seen.values():
        assert recognises(ours, message) and not recognises(other, message)
    assert "DDP over an FSDP2 model, and `all_reduce` of a sharded weight, on 4 ranks" in flat(
        ours.cause
    )


def test_work_wait_blocks_the_stream_not_the_cpu_unless_given_a_timeout():
    """process-groups (async_op=True): what torch 2.13's Work.wait docstring says it waits for."""
    import torch.distributed as dist

    doc = flat(dist.Work.wait.__doc__)
    assert "Letting the current stream block on the completion of the NCCL work" in doc
    assert "if timeout is set, it will block the CPU thread until the NCCL work is completed" in doc
    text = _guide("process-groups")
    assert "makes the **current CUDA stream** wait for the collective and returns at once" in text


def test_a_sampler_seed_per_rank_cuts_overlapping_slices():
    """distributed-sampler-seed-per-rank: 2 ranks, 16 samples, seeds 0 and 1: 12 distinct;
    the sampler seeds a generator of its own from seed + epoch."""
    from torch.utils.data import DistributedSampler

    def seen(seeds: list[int]) -> set[int]:
        samplers = [DistributedSampler(range(16), 2, rank, seed=s) for rank, s in enumerate(seeds)]
        return {i for sampler in samplers for i in sampler}

    assert len(seen([0, 1])) == 12 and len(seen([0, 0])) == 16
    text = _pitfall("distributed-sampler-seed-per-rank")
    assert "with 2 ranks and 16 samples, 12 distinct ones" in text
    source = inspect.getsource(DistributedSampler.__iter__)
    assert "g = torch.Generator()" in source and "g.manual_seed(self.seed + self.epoch)" in source


@pytest.mark.slow
def test_fsdp1_helpers_find_nothing_to_do_on_an_fsdp2_module(observed):
    """fsdp1-api-on-fsdp2-module: state_dict_type leaves DTensors and fails on exit."""
    helpers = observed["fsdp1_helpers_on_fsdp2"]
    assert helpers == {
        "state_dict_type_values_dtensor": True,
        "state_dict_type_error": "KeyError: None",
        "summon_full_params_leaves_dtensor": True,
    }
    text = _pitfall("fsdp1-api-on-fsdp2-module")
    assert "leaving the block raises `KeyError: None` (torch 2.13)" in text
    assert "find none, and do nothing" not in text


@pytest.mark.slow
def test_compile_and_checkpointing_may_follow_fully_shard(observed):
    """torch-compile, activation-checkpointing, tensor-parallel: either order trains alike."""
    orders = observed["wrappers_after_fully_shard"]
    assert orders["compile_then_shard"] and orders["shard_then_compile"], orders
    assert orders["shard_then_checkpoint"], orders
    assert orders["checkpointed_block_calls"] == 2 * orders["eager_block_calls"]  # recomputed
    assert '"compile then shard" run and give the same results' in _guide("torch-compile")
    assert "the opposite order (shard, then wrap) also runs and recomputes correctly" in (
        _guide("activation-checkpointing")
    )
    text = _guide("tensor-parallel")
    assert "Steps 2 and 3 are the convention this page keeps rather than a rule" in text


def test_a_frozen_model_can_be_sharded_instead_of_wrapped_in_ddp(observed):
    """ddp-module-without-trainable-parameters: the fix offers fully_shard for a big teacher."""
    assert observed["frozen_model_shards"] == {"sharded": True, "same_output": True}
    fix = flat(knowledge.pitfall("ddp-module-without-trainable-parameters").fix)
    assert "`fully_shard` accepts a module with no trainable parameters" in fix


def test_ddp_runs_two_forwards_before_one_backward_and_no_sync_splits_them(observed):
    """ddp-buffer-broadcast-inplace: the installed torch keeps the buffers' version counters
    across DDP's buffer sync (the pitfall's torch range ends before it), and the fix's
    no_sync-then-sync pattern gives the averaged gradients of the summed loss."""
    assert observed["ddp_two_forwards_one_backward"] == {
        "error": None,
        "no_sync_then_sync_is_the_summed_loss": True,
    }
    pitfall = knowledge.pitfall("ddp-buffer-broadcast-inplace")
    assert pitfall.torch == "<2.12"
    assert "the gradients are those of the summed loss" in flat(pitfall.fix)


def test_old_launcher_appends_local_rank_and_torchrun_does_not(monkeypatch):
    """multi-node-launch, deprecated-distributed-launch: what each launcher gives the script."""
    import warnings

    from torch.distributed import launch, run
    from torch.distributed.elastic.agent.server import local_elastic_agent

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # config_from_args would set it otherwise
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.distributed.launch is deprecated
        old = launch.parse_args(["--nproc-per-node", "2", "train.py"])
        use_env = launch.parse_args(["--use-env", "--nproc-per-node", "2", "train.py"])
    new = run.parse_args(["--nproc-per-node", "2", "train.py"])
    assert run.config_from_args(old)[2][-1] == "--local-rank=${local_rank}"
    assert not any("local" in a for a in run.config_from_args(use_env)[2])
    assert not any("local" in a for a in run.config_from_args(new)[2])
    # Both run their workers through the same agent, which sets LOCAL_RANK for each.
    agent_source = Path(local_elastic_agent.__file__).read_text(encoding="utf-8")
    assert 'worker_env["LOCAL_RANK"] = str(local_rank)' in agent_source
    assert "also appends `--local-rank=<rank>` to the script's arguments" in (
        _guide("multi-node-launch")
    )
    assert "passes `--local_rank` instead of setting" not in _guide("multi-node-launch")
    pitfall = _pitfall("deprecated-distributed-launch")
    assert "the old launcher also appends `--local-rank=<rank>`" in pitfall


def _runnable_block(guide_id: str) -> str:
    from fsdp_skill import markdown

    blocks = [b for b in markdown.code_blocks(GUIDES[guide_id].body) if b.tags[:1] == ("ws=2",)]
    assert blocks, guide_id
    return blocks[0].code


def test_torchrun_accepts_both_option_spellings():
    """multi-node-launch: --nproc-per-node and --nproc_per_node, and the rendezvous options."""
    import subprocess
    import sys

    help_text = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    for option in (
        "--nproc-per-node",
        "--nproc_per_node",
        "--rdzv-endpoint",
        "--rdzv-backend",
        "--rdzv-id",
        "--max-restarts",
        "--node-rank",
        "--master-addr",
    ):
        assert option in help_text, option


def test_allocator_config_names():
    """oom-debugging: PYTORCH_ALLOC_CONF is the generic name, the CUDA one read first."""
    core = TORCH_DIR / "include" / "c10" / "core" / "AllocatorConfig.h"
    cuda = TORCH_DIR / "include" / "c10" / "cuda" / "CUDAAllocatorConfig.h"
    if not (core.exists() and cuda.exists()):
        pytest.skip("this torch build ships no c10 headers")
    assert "The primary environment variable for configuration is `PYTORCH_ALLOC_CONF`" in (
        core.read_text(encoding="utf-8")
    )
    source = cuda.read_text(encoding="utf-8")
    assert source.index('"PYTORCH_CUDA_ALLOC_CONF"') < source.index('"PYTORCH_ALLOC_CONF"')
    text = _guide("oom-debugging")
    assert "export PYTORCH_ALLOC_CONF=expandable_segments:True" in (GUIDES["oom-debugging"].body)
    assert "the CUDA allocator takes `PYTORCH_CUDA_ALLOC_CONF`" in text


# --- facts read from the installed torch -------------------------------------------------------


def test_bf16_and_fp16_mantissa_bits():
    """mixed-precision: bf16 stores 7 mantissa bits, fp16 10."""
    assert torch.finfo(torch.bfloat16).eps == 2**-7
    assert torch.finfo(torch.float16).eps == 2**-10
    text = _guide("mixed-precision")
    assert "It stores 7 mantissa bits (8 bits of precision" in text
    assert "8-bit mantissa" not in text


def test_root_first_fails_at_the_childs_fully_shard_call():
    """fsdp2 agrees with its pitfall: the child's fully_shard call raises, before forward.

    The behaviour is reproduced by tests/lint/test_reproduce.py."""
    text = _guide("fsdp2")
    assert "the later `fully_shard(block)` call itself raises" in text
    assert "the first forward then fails" not in text
    assert "Calling `fully_shard` on a block after its parent fails" in _pitfall(
        "fully-shard-root-before-children"
    )


def test_methods_that_bypass_forward_agree_between_guide_and_pitfall():
    """fsdp2 and fsdp2-method-bypasses-forward-hooks: generate() works, forward() fails."""
    text = _guide("fsdp2")
    assert "Hugging Face `generate()` is such a method" in text
    assert "**Fails:** `model.forward(x)` called directly" in text
    assert "another method such as `generate()` directly sees sharded DTensors" not in text
    assert "Hugging Face `generate()` calls the model through `__call__`, so it works" in (
        _pitfall("fsdp2-method-bypasses-forward-hooks")
    )
    # No page sends generate() (which the transformers-fsdp2 example runs sharded) through
    # register_fsdp_forward_method.
    needs = re.compile(r"generate\W{0,6}needs `register_fsdp_forward_method`")
    for where, page in _knowledge_texts().items():
        assert not needs.search(page), f"{where}: {needs.search(page).group(0)!r}"
    assert "(Hugging Face `generate()` does), runs FSDP's hooks" in _guide("migrate-fsdp1-to-fsdp2")
    assert "HF `generate()` does); a method that reads the parameters without calling it" in (
        _skill()
    )


def test_nccl_watchdog_default_tears_down_without_abort():
    """process-groups, debugging, env_vars: TORCH_NCCL_ASYNC_ERROR_HANDLING defaults to 3."""
    header = C10D_HEADERS / "ProcessGroupNCCL.hpp"
    if not header.exists():
        pytest.skip("this torch build ships no c10d headers")
    source = header.read_text(encoding="utf-8")
    assert "the default value (3 - SkipCleanUp)" in source
    assert re.search(r"SkipCleanUp = 3", source)
    assert "tears the process down *without* aborting the communicator" in _guide("process-groups")
    env = {v.name: v for v in knowledge.env_vars()}
    assert "3 tear the process down without aborting the communicator (default" in flat(
        env["TORCH_NCCL_ASYNC_ERROR_HANDLING"].what
    )


def test_flight_recorder_reads_the_fr_name_first():
    """debugging and env_vars: TORCH_FR_BUFFER_SIZE is the name, the NCCL one a fallback."""
    header = C10D_HEADERS / "FlightRecorder.hpp"
    if not header.exists():
        pytest.skip("this torch build ships no c10d headers")
    source = flat(header.read_text(encoding="utf-8"))
    assert '{"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}, 2000' in source
    assert '{"TORCH_FR_CPP_STACK", "TORCH_NCCL_TRACE_CPP_STACK"}, false' in source
    text = _guide("debugging")
    assert "`TORCH_FR_BUFFER_SIZE=2000`" in text and "is deprecated" in text
    assert "newer alias `TORCH_FR_BUFFER_SIZE`" not in text
    env = {v.name: v for v in knowledge.env_vars()}
    assert env["TORCH_NCCL_TRACE_BUFFER_SIZE"].what.startswith("Deprecated older name")
    for name in ("TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_ENABLE_MONITORING"):
        assert "On by default" in env[name].what, name
        assert "ProcessGroupNCCL.cpp" in env[name].source, name


def test_reinitialising_the_default_group_is_not_taught():
    """process-groups: no example destroys and re-creates the default group."""
    text = _guide("process-groups")
    assert "the distributed docs call it unsupported and untested" in text
    assert "https://docs.pytorch.org/docs/stable/distributed.html#reinitialization" in (
        GUIDES["process-groups"].links
    )
    from fsdp_skill import markdown

    for block in markdown.code_blocks(GUIDES["process-groups"].body):
        assert block.code.count("init_process_group(") <= 1, block.line


def test_hsdp_is_not_an_oom_lever():
    """SKILL.md and hsdp: HSDP raises per-GPU memory; it is a communication optimisation."""
    skill = _skill()
    assert "HSDP is not a memory lever" in skill
    assert "activation checkpointing per block (about a third more compute), HSDP" not in skill
    assert "It is a speed optimisation for slow inter-node links" in _guide("hsdp")


def test_nccl_cpu_tensor_fallback_is_a_cpu_backend_not_gloo_everywhere():
    """SKILL.md and backends: the fix for CPU tensors on NCCL is cpu:gloo,cuda:nccl."""
    skill = _skill()
    assert "fall back to Gloo." not in skill
    assert 'A CPU tensor on an NCCL group ("No backend type associated with device type cpu")' in (
        skill
    )
    assert "not the fix for a CPU tensor on an NCCL group" in _guide("backends")


def test_root_reshard_advice_for_older_releases():
    """performance and fsdp2: before the None default, the root ignored the flag."""
    text = _guide("performance")
    assert "set the root to `False` yourself" not in text
    assert "the root stayed gathered after forward whatever you passed" in text
    assert "kept the root gathered after forward whatever you passed" in _guide("fsdp2")


# --- statements that several pages make must agree ---------------------------------------------


def _knowledge_texts() -> dict[str, str]:
    """Every page the bundle ships, by name: guides, pitfalls, env vars and SKILL.md."""
    texts = {f"guide {g.id}": flat(g.body) for g in knowledge.guides()}
    for p in knowledge.pitfalls():
        texts[f"pitfall {p.id}"] = flat("\n".join((p.symptom, p.cause, p.fix, p.good)))
    texts["env_vars"] = flat(
        " ".join(f"{v.what} {v.values} {v.when}" for v in knowledge.env_vars())
    )
    texts["SKILL.md"] = _skill()
    return texts


def _assert_grad_scaler_advice_is_consistent() -> None:
    from fsdp_skill.lint.rules import fsdp006

    for where, text in _knowledge_texts().items():
        # advice that sends FSDP2 users to ShardedGradScaler, or everyone to it
        for bad in (
            "Under FSDP use `ShardedGradScaler`",
            "gradient scaler (`ShardedGradScaler`)",
            "use a sharded grad scaler",
        ):
            assert bad not in text, f"{where}: {bad}"
    fix = fsdp006.fix((2, 13))
    assert 'torch.amp.GradScaler("cuda") with FSDP2' in fix and "ShardedGradScaler" in fix
    assert fix.index("FSDP2") < fix.index("FSDP1")
    for where, text in (
        ("mixed-precision", _guide("mixed-precision")),
        ("SKILL.md", _skill()),
        ("fp16-without-grad-scaler", _pitfall("fp16-without-grad-scaler")),
    ):
        assert "GradScaler" in text and "ShardedGradScaler" in text, where
        assert re.search(r"FSDP2.{0,200}torch\.amp\.GradScaler", text), where
        assert re.search(r"FSDP1.{0,200}ShardedGradScaler", text), where


def test_pages_agree_on_the_default_timeouts():
    """Whoever states a default timeout states torch's: 10 min NCCL, 30 min the others."""
    assert re.search(
        r"\bNCCL\b(?:'s)?(?: default)?(?: timeout)?(?: is| of|:| defaults to) (?:20|30|5) minutes",
        "the NCCL timeout is 30 minutes",
    )  # the pattern below catches a wrong claim
    wrong = re.compile(
        r"\bNCCL\b(?:'s)?(?: default)?(?: timeout)?(?: is| of|:| defaults to) (?:20|30|5) minutes"
        r"|(?:10|30) minutes for (?:all|every) backends?"
    )
    for where, text in _knowledge_texts().items():
        assert not wrong.search(text), f"{where}: {wrong.search(text).group(0)!r}"
    for where in ("guide process-groups", "SKILL.md"):
        text = _knowledge_texts()[where]
        assert re.search(r"10 minutes", text) and re.search(r"30 minutes", text), where


def test_pages_agree_on_reshard_after_forward_defaults():
    """The root's default is False (None -> True inside, False at the root), everywhere."""
    texts = _knowledge_texts()
    stating = {
        where: text
        for where, text in texts.items()
        if "reshard_after_forward" in text and re.search(r"\bdefault", text)
    }
    assert {"guide fsdp2", "guide performance", "SKILL.md"} <= set(stating)
    for where, text in stating.items():
        assert "reshard_after_forward=True` (default" not in text, where
        assert "defaults to `True`" not in text.replace("defaulted to `True`", ""), where
    for where in ("guide fsdp2", "guide performance"):
        assert "`True` for inner modules, `False` for the root" in texts[where], where
    assert "`None`, means `True` for inner modules and `False` for the root" in texts["SKILL.md"]


def test_pages_agree_on_the_grad_scaler():
    """GradScaler with FSDP2, ShardedGradScaler with FSDP1: no page says otherwise."""
    _assert_grad_scaler_advice_is_consistent()


@pytest.mark.slow
def test_hsdp_with_a_mesh_and_an_auto_wrap_policy_trains(observed):
    """fsdp1-process-group-and-device-mesh: since torch 2.2.1 the root hands its own groups to
    the units it wraps only when no mesh was given, so a mesh with HYBRID_SHARD and a policy
    trains (torch 2.2.0 raised "Cannot pass both process_group and device_mesh")."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    assert observed["fsdp1_hybrid_mesh_with_auto_wrap"] == {"error": None, "fsdp_units": 3}
    source = inspect.getsource(FSDP.__init__)
    assert "if sharding_strategy in HYBRID_SHARDING_STRATEGIES and device_mesh is None:" in source
    text = _pitfall("fsdp1-process-group-and-device-mesh")
    assert "torch 2.2.1 forwards the groups only when no mesh was given" in text
    assert (
        "The installed torch trains that configuration on four Gloo ranks with a 2x2 mesh" in text
    )
    assert "groups over which to shard and replicate, respectively" in flat(FSDP.__doc__)
    assert 'process_group=(mesh["shard"].get_group(), mesh["replicate"].get_group())' in text


def test_auto_wrap_refuses_a_unit_inside_and_accelerate_looks_inside_a_compiled_model():
    """fsdp1-auto-wrap-over-fsdp: the check torch runs before auto-wrapping, and accelerate's
    test for an FSDP model behind torch.compile's wrapper (accelerate 0.23.0 and later)."""
    from torch.distributed.fsdp import _wrap_utils

    source = inspect.getsource(_wrap_utils._check_nested_wrapping)
    assert "if _get_module_fsdp_state(module) is not None:" in source
    accelerator = pytest.importorskip("accelerate.accelerator")
    prepare = inspect.getsource(accelerator.Accelerator.prepare_model)
    assert "is_compiled_module(model) and isinstance(model._orig_mod, FSDP)" in prepare
    text = _pitfall("fsdp1-auto-wrap-over-fsdp")
    assert "0.23.0 also looks inside a compiled module" in text
    assert "holds the FSDP model as `_orig_mod`" in text
