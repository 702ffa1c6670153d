"""The FSDP facts the guides state, checked against the installed torch.

Each test names the guide or pitfall whose text depends on it: when a torch upgrade breaks
one, that text needs review.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import warnings

import pytest

from fsdp_skill import knowledge, markdown
from tests.knowledge.texts import flat, guide, section, section_text, table_rows
from tests.signatures import signature_hits

torch = pytest.importorskip("torch")
fsdp = pytest.importorskip("torch.distributed.fsdp")


def _defaults(func) -> dict:
    return {
        name: p.default
        for name, p in inspect.signature(func).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def _assert_signatures_match(pitfall_id: str, text: str, every: bool = True) -> None:
    """The pitfall's signatures recognise ``text``: each of them, or at least one."""
    hits = signature_hits(pitfall_id, text)
    assert all(hits) if every else any(hits), f"{pitfall_id}: {hits} on {text!r}"


def test_fully_shard_reshard_after_forward_defaults_to_none():
    """fsdp2: the table row '`None` (default in 2.13)'."""
    assert _defaults(fsdp.fully_shard)["reshard_after_forward"] is None
    assert "`None` (default in 2.13)" in section_text(
        "fsdp2", "reshard_after_forward: True, False, None or an int"
    )


def test_fully_shard_table_describes_every_argument_with_its_default():
    """fsdp2, "fully_shard's arguments": one row per parameter of the installed fully_shard,
    each starting with its default; the quoted signature lists them in order."""
    text = section_text("fsdp2", "fully_shard's arguments")
    params = inspect.signature(fsdp.fully_shard).parameters
    rows = {row[0].strip("`"): row[1] for row in table_rows(text)}
    assert set(rows) == set(params) - {"module"}, "the table and fully_shard's parameters differ"
    for name, cell in rows.items():
        default = re.match(r"`([^`]+)`", cell)
        assert default, f"{name}: the default cell starts with no code span: {cell!r}"
        assert eval(default.group(1), vars(fsdp)) == params[name].default, name
    quoted = re.search(r"`fully_shard\((.*?)\)` in torch 2.13", flat(text))
    assert quoted, "the section quotes no fully_shard signature"
    names = [part.split("=")[0].strip() for part in quoted.group(1).split(",")]
    assert [n for n in names if n != "*"] == list(params)


def test_every_public_name_of_torch_distributed_fsdp_is_in_a_guide():
    """A release that adds a name to torch.distributed.fsdp fails here until a guide explains
    it (DataParallelMeshDims and share_comm_ctx arrived that way)."""
    bodies = " ".join(g.body for g in knowledge.guides())
    missing = sorted(n for n in fsdp.__all__ if not re.search(rf"`[^`]*\b{n}\b[^`]*`", bodies))
    assert not missing, f"torch.distributed.fsdp names no guide explains: {missing}"


def test_share_comm_ctx_and_unshard_handle_do_what_the_fsdp2_page_says():
    text = section("fsdp2", "fully_shard's arguments")
    doc = flat(fsdp.share_comm_ctx.__doc__)
    assert "Share cuda streams for multiple FSDPModules" in doc
    assert (
        "each model chunk is a FSDP root" in doc
        and "all-gather, reduce-scatter, and all-reduce" in doc
    )
    assert "pipeline parallelism each model chunk on a rank is a root of its own" in text
    assert callable(fsdp.UnshardHandle.wait) and "its `wait()` blocks" in text
    assert set(inspect.signature(fsdp.DataParallelMeshDims).parameters) == {"shard", "replicate"}
    assert "`DataParallelMeshDims(shard=..., replicate=...)`" in text


def test_fsdp1_state_dict_config_table_matches_the_classes():
    """checkpointing, "FSDP1: state_dict_type": every StateDictType has its row, and each
    config is written with all its public fields at their installed defaults."""
    rows = table_rows(section_text("checkpointing", "FSDP1: state_dict_type"))
    assert {row[0].strip("`") for row in rows} == set(fsdp.StateDictType.__members__)
    for row in rows:
        for cell in row[1:]:
            expr = cell.strip("`")
            cls = getattr(fsdp, expr.split("(")[0])
            public = {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}
            assert set(re.findall(r"(\w+)=", expr)) == public, expr
            assert eval(expr, vars(fsdp)) == cls(), f"{expr}: not the installed defaults"
    text = section("checkpointing", "FSDP1: state_dict_type")
    settings = {f.name for f in dataclasses.fields(fsdp.StateDictSettings)}
    assert settings == {"state_dict_type", "state_dict_config", "optim_state_dict_config"}
    assert (
        "`StateDictSettings` (`state_dict_type`, `state_dict_config`, `optim_state_dict_config`)"
        in text
    )
    assert (
        "settings it replaced" in text
        and "Returns: A StateDictSettings that include the previous"
        in flat(fsdp.FullyShardedDataParallel.set_state_dict_type.__doc__)
    )
    assert set(fsdp.OptimStateKeyType.__members__) == {"PARAM_ID", "PARAM_NAME"}


def test_fsdp_module_methods_in_the_table_exist():
    """fsdp2: every method the FSDPModule table lists exists on FSDPModule."""
    rows = table_rows(section_text("fsdp2", "FSDPModule methods"))
    names = {name for row in rows for name in re.findall(r"`(\w+)\(", row[0])}
    assert len(names) >= 10, names
    missing = sorted(n for n in names if not callable(getattr(fsdp.FSDPModule, n, None)))
    assert not missing, f"FSDPModule lacks {missing}"
    own = {n for n, v in vars(fsdp.FSDPModule).items() if not n.startswith("_") and callable(v)}
    older_name = "set_reduce_scatter_divide_factor"  # named below the table, not in it
    assert "Use :py:meth:`set_gradient_divide_factor` instead" in flat(
        getattr(fsdp.FSDPModule, older_name).__doc__
    )
    undescribed = sorted(own - names - {older_name})
    assert not undescribed, f"FSDPModule methods the fsdp2 table does not describe: {undescribed}"


def test_mixed_precision_policy_fields_and_defaults():
    """mixed-precision: the four fields, None defaults, cast_forward_inputs=True."""
    defaults = _defaults(fsdp.MixedPrecisionPolicy)
    assert defaults == {
        "param_dtype": None,
        "reduce_dtype": None,
        "output_dtype": None,
        "cast_forward_inputs": True,
    }


def test_fsdp1_mixed_precision_cast_defaults():
    """mixed-precision: FSDP1 casts inputs at the root only by default."""
    defaults = _defaults(fsdp.MixedPrecision)
    assert defaults["cast_forward_inputs"] is False
    assert defaults["cast_root_forward_inputs"] is True
    assert defaults["keep_low_precision_grads"] is False


def test_cpu_offload_policy_pins_by_default():
    """cpu-offload and cpu-offload-pinned-host-memory: pin_memory defaults to True."""
    assert _defaults(fsdp.CPUOffloadPolicy) == {"pin_memory": True}


def test_fsdp1_constructor_defaults():
    """fsdp1: the defaults the guide quotes."""
    defaults = _defaults(fsdp.FullyShardedDataParallel.__init__)
    assert defaults["use_orig_params"] is False
    assert defaults["limit_all_gathers"] is True
    assert defaults["sync_module_states"] is False
    assert defaults["forward_prefetch"] is False
    assert defaults["backward_prefetch"] is fsdp.BackwardPrefetch.BACKWARD_PRE


def test_ddp_buffer_sync_is_forward_sync_buffers_in_2_13():
    """buffers-batchnorm: DDP syncs buffers by default; broadcast_buffers is deprecated in 2.13."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    defaults = _defaults(DDP.__init__)
    assert defaults["forward_sync_buffers"] is None and defaults["broadcast_buffers"] is None
    doc = flat(DDP.__doc__)
    assert "When ``None``, defaults to ``True``" in doc  # forward_sync_buffers
    assert ".. deprecated:: 2.13 Use ``forward_sync_buffers`` instead." in doc
    text = flat(guide("buffers-batchnorm").body)
    assert "(`forward_sync_buffers`, on unless set to `False`; torch 2.13" in text
    assert "by default (`broadcast_buffers=True`)" not in text


def test_all_reduce_sums_by_default_and_dataparallel_gathers_scalar_losses_into_a_vector():
    """migrate-ddp-to-fsdp (the loss is not the single-GPU loss): a default all_reduce sums,
    and nn.DataParallel turns the replicas' scalar losses into a vector, with a warning."""
    import torch.distributed as dist
    from torch.nn.parallel import _functions

    assert _defaults(dist.all_reduce)["op"] == dist.ReduceOp.SUM
    gather = flat(inspect.getsource(_functions.Gather.forward)).replace('" "', "")  # joined
    assert "all input tensors were scalars; will instead unsqueeze and return a vector" in gather
    text = flat(
        section_text(
            "migrate-ddp-to-fsdp",
            "The loss is not the single-GPU loss (n times larger, or off with padding)",
        )
    )
    assert "its `op` defaults to `ReduceOp.SUM`" in text
    assert '"will instead unsqueeze and return a vector"' in text


def test_ddp_sends_bf16_gradients_with_the_compress_hook_the_guide_names():
    """performance (more GPUs, slower than one): the hook that halves DDP's bytes exists."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    assert list(inspect.signature(default_hooks.bf16_compress_hook).parameters) == [
        "process_group",
        "bucket",
    ]
    assert "register_comm_hook(None, default_hooks.bf16_compress_hook)" in section_text(
        "performance", "More GPUs, slower than one: what each step adds"
    )


def test_fully_shard_ignored_params_arrived_in_2_7():
    """migrate-fsdp1-to-fsdp2: ignored_params is FSDP2's ignored_modules, from torch 2.7."""
    assert "ignored_params" in inspect.signature(fsdp.fully_shard).parameters
    migration = guide("migrate-fsdp1-to-fsdp2")
    assert "`ignored_params={...}` (torch 2.7 and later)" in migration.body
    assert any(
        v["api"].startswith("fully_shard(ignored_params") and v["since"] == "2.7"
        for v in migration.versions
    )
    accelerate = pytest.importorskip("accelerate")
    from pathlib import Path

    source = (Path(accelerate.__file__).parent / "utils" / "fsdp_utils.py").read_text("utf-8")
    assert "`ignored_params` is only supported in torch >= 2.7.0" in source


def test_fsdp1_sharding_strategies_in_the_table_exist():
    """fsdp1: every strategy row names a ShardingStrategy member."""
    table = section_text("fsdp1", "Sharding strategies")
    names = set(re.findall(r"^\| `(\w+)`", table, re.M))
    assert names == {
        "FULL_SHARD",
        "SHARD_GRAD_OP",
        "NO_SHARD",
        "HYBRID_SHARD",
        "_HYBRID_SHARD_ZERO2",
    }
    assert names <= set(fsdp.ShardingStrategy.__members__)


def test_fsdp1_documents_the_limits_the_pitfalls_rest_on():
    """fsdp1-cpu-offload-accumulation and fsdp1-compile-without-use-orig-params."""
    doc = flat(fsdp.FullyShardedDataParallel.__doc__)
    assert (
        "does not support gradient accumulation outside ``no_sync()`` when using CPU offloading"
        in doc
    )
    assert "``True`` is required to use ``torch.compile()``" in doc


def test_state_dict_options_has_the_fields_the_guides_use():
    """checkpointing and meta-device-init."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    fields = set(_defaults(StateDictOptions))
    assert {"full_state_dict", "cpu_offload", "broadcast_from_rank0", "strict"} <= fields


def test_checkpoint_without_use_reentrant_warns_and_drops_gradients():
    """activation-checkpointing and reentrant-checkpoint-no-input-grad: the 2.13 fallback."""
    from torch.utils.checkpoint import checkpoint

    block, head = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = head(checkpoint(block, torch.randn(2, 4)))
    assert any("use_reentrant" in str(w.message) for w in caught)
    out.sum().backward()
    assert block.weight.grad is None and head.weight.grad is not None
    messages = "\n".join(str(w.message) for w in caught)
    _assert_signatures_match("reentrant-checkpoint-no-input-grad", messages)


def test_checkpoint_wrapper_defaults_to_non_reentrant():
    """activation-checkpointing: checkpoint_wrapper uses CheckpointImpl.NO_REENTRANT."""
    from torch.distributed.algorithms._checkpoint import checkpoint_wrapper as cw

    assert _defaults(cw.checkpoint_wrapper)["checkpoint_impl"] is cw.CheckpointImpl.NO_REENTRANT


def test_compile_wrapper_prefixes_state_dict_keys():
    """torch-compile and compile-wrapper-state-dict-prefix."""
    wrapped = torch.compile(torch.nn.Linear(2, 2))
    assert list(wrapped.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    in_place = torch.nn.Linear(2, 2)
    in_place.compile()
    assert list(in_place.state_dict()) == ["weight", "bias"]
    errors = []
    for target, source in ((wrapped, in_place), (in_place, wrapped)):
        with pytest.raises(RuntimeError) as caught:
            target.load_state_dict(source.state_dict())
        errors.append(str(caught.value))
    for error in errors:  # each direction alone is recognised
        _assert_signatures_match("compile-wrapper-state-dict-prefix", error, every=False)


def test_bf16_loses_small_updates():
    """bf16-model-without-fp32-master: 1 - 1e-3 rounds back to 1 in bf16."""
    one = torch.ones(1, dtype=torch.bfloat16)
    assert torch.equal(one - 1e-3, one)
    assert not torch.equal(one.float() - 1e-3, one.float())


def test_pitfalls_named_in_guides_exist():
    """Every 'pitfall `id`' a guide mentions is a real pitfall id."""
    known = {p.id for p in knowledge.pitfalls()}
    for each in knowledge.guides():
        text = markdown.strip_code(each.body)
        for name in re.findall(r"pitfalls?\s+`([a-z0-9-]+)`", text):
            assert name in known, f"{each.id} names unknown pitfall {name}"


def test_fsdp1_entry_points_that_warn():
    """fsdp1 and checkpointing: state_dict_type and NO_SHARD emit a FutureWarning in 2.13."""
    from torch.distributed.fsdp import _init_utils

    state_dict_type = inspect.getsource(fsdp.FullyShardedDataParallel.set_state_dict_type)
    assert "FutureWarning" in state_dict_type and "get_state_dict" in state_dict_type
    init_source = inspect.getsource(_init_utils)
    assert re.search(r"NO_SHARD.{0,40}deprecated", init_source, re.S)
    assert "FutureWarning" in init_source


DESTROY_GROUP = "dist.destroy_process_group()\n"
"""How the two-rank scripts below end (run_ranks leaves without the interpreter's teardown)."""

BRANCH = (
    """
import datetime, sys
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=10))
rank, own_group, on_some_ranks = dist.get_rank(), sys.argv[1] == "own", sys.argv[2] == "some"
reduce_unused = sys.argv[3:] == ["reduce-unused"]


class Branched(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x, use_b):
        x = self.a(x)
        return self.b(x) if use_b else x


model = Branched()
if own_group:
    fully_shard(model.b)
fully_shard(model)
if reduce_unused:
    model.set_reduce_scatter_unused_params(True)  # zeros for what this rank did not use
for step in range(2):
    use_b = on_some_ranks and rank == 0  # otherwise no rank runs b
    model(torch.randn(2, 4), use_b).sum().backward()
    if rank == 0:
        print("B_GRAD", model.b.weight.grad, flush=True)
    model.zero_grad()
"""
    + DESTROY_GROUP
)


@pytest.mark.slow
@pytest.mark.parametrize("group", ["own", "parent"])
def test_a_module_no_rank_runs_gets_no_gradient_and_one_some_ranks_run_fails(group, tmp_path):
    """fsdp-branch-on-some-ranks: skipped everywhere is harmless, skipped on one rank is not."""
    from tests.distributed import run_script

    everywhere = run_script(tmp_path, "branch.py", BRANCH, 2, args=[group, "none"], check=True)
    assert everywhere.stdout.count("B_GRAD None") == 2
    some = run_script(tmp_path, "branch.py", BRANCH, 2, args=[group, "some"])
    assert some.returncode != 0 and "B_GRAD" not in some.stdout, some.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize(("group", "trains"), [("parent", True), ("own", False)])
def test_reduce_scatter_unused_params_saves_a_branch_only_inside_a_group_every_rank_runs(
    group, trains, tmp_path
):
    """fsdp-branch-on-some-ranks: torch 2.13's set_reduce_scatter_unused_params(True) lets one
    rank use a module the other skips when its parameters are in the parent's group; a
    module sharded as its own group still fails (its all-gather runs on one rank only)."""
    from tests.distributed import run_script

    assert "Similar to DDP's ``find_unused_parameters``" in flat(
        fsdp.FSDPModule.set_reduce_scatter_unused_params.__doc__
    )
    run = run_script(tmp_path, "branch.py", BRANCH, 2, args=[group, "some", "reduce-unused"])
    if trains:
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stdout.count("B_GRAD") == 2 and "B_GRAD None" not in run.stdout
    else:
        assert run.returncode != 0 and "B_GRAD" not in run.stdout, run.stdout[-2000:]
    fix = flat(knowledge.pitfall("fsdp-branch-on-some-ranks").fix)
    assert "`model.set_reduce_scatter_unused_params(True)` on the root" in fix
    assert "A branch sharded as its own group still hangs" in fix


def test_fully_shard_offloads_only_for_a_cpu_offload_policy_and_fsdp1s_mp_casts_no_inputs():
    """fsdp1-fsdp2-policy-swap: FSDP1's classes handed to fully_shard are not rejected."""
    from torch.distributed.fsdp import CPUOffload, CPUOffloadPolicy, MixedPrecision

    assert MixedPrecision(param_dtype=torch.bfloat16).cast_forward_inputs is False
    assert fsdp.MixedPrecisionPolicy(param_dtype=torch.bfloat16).cast_forward_inputs is True
    source = inspect.getsource(
        importlib.import_module("torch.distributed.fsdp._fully_shard._fsdp_param")
    )
    assert "self.offload_to_cpu: bool = isinstance(offload_policy, CPUOffloadPolicy)" in source
    assert not issubclass(CPUOffload, CPUOffloadPolicy)


INFERENCE_FIRST = (
    """
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

api, first = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
if api == "fsdp1":
    from torch.distributed.fsdp import FullyShardedDataParallel

    model = FullyShardedDataParallel(model, device_id=torch.device("cpu"))
else:
    from torch.distributed.fsdp import fully_shard

    fully_shard(model[0])
    fully_shard(model)
try:
    if first == "train":
        model(torch.randn(2, 4)).sum().backward()
    with torch.inference_mode() if first != "no_grad" else torch.no_grad():
        model(torch.randn(2, 4))
    for _ in range(2):
        model(torch.randn(2, 4)).sum().backward()
    print("TRAINED", flush=True)
except Exception as exc:
    print("FAILED", type(exc).__name__, exc, flush=True)
"""
    + DESTROY_GROUP
)


@pytest.mark.slow
@pytest.mark.parametrize("api", ["fsdp1", "fsdp2"])
def test_a_first_forward_under_inference_mode_breaks_training(api, tmp_path):
    """first-forward-under-inference-mode: evaluating first under inference_mode fails the
    training that follows (with the pitfall's signature); no_grad, or inference_mode after a
    training step, does not."""
    from tests.distributed import run_script

    for first, trains in (("inference_mode", False), ("no_grad", True), ("train", True)):
        run = run_script(tmp_path, "first.py", INFERENCE_FIRST, 2, args=[api, first], check=True)
        assert ("TRAINED" in run.stdout) is trains, (first, run.stdout[-2000:])
        if not trains:
            _assert_signatures_match("first-forward-under-inference-mode", run.stdout, every=False)


UNFROZEN_LATER = (
    """

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

dist.init_process_group("gloo")
for case in ("all_frozen", "one_module_frozen", "no_grad", "no_policy"):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 1))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    kwargs = {} if case == "no_policy" else {"mp_policy": mp}
    fully_shard(model[0], **kwargs)
    fully_shard(model[1], **kwargs)
    fully_shard(model, **kwargs)
    frozen = {"all_frozen": model, "one_module_frozen": model[0]}.get(case)
    if frozen is not None:
        frozen.requires_grad_(False)
    with torch.no_grad() if case == "no_grad" else torch.enable_grad():
        model(torch.randn(2, 4))  # the first forward: FSDP2 initialises itself
    model.requires_grad_(True)
    try:
        model(torch.randn(2, 4)).float().sum().backward()
        outcome = f"TRAINED {model[0].weight.grad.dtype}"
    except Exception as exc:
        outcome = f"FAILED {type(exc).__name__} {exc}"
    if dist.get_rank() == 0:  # both ranks take the same path; one prints
        print(case, outcome, flush=True)
"""
    + DESTROY_GROUP
)


@pytest.mark.slow
def test_parameters_unfrozen_after_fsdp2s_first_forward_fail_under_mixed_precision(tmp_path):
    """fsdp2-first-forward-all-frozen: with a MixedPrecisionPolicy, a first forward with every
    parameter of a fully_shard module frozen fails the backward after unfreezing (with the
    pitfall's signature), also for one module of several; a no_grad first forward, or no
    policy, trains with float32 gradients."""
    from tests.distributed import run_script

    run = run_script(tmp_path, "unfrozen_later.py", UNFROZEN_LATER, 2, check=True)
    lines = {line.split()[0]: line for line in run.stdout.splitlines() if " " in line}
    for case in ("all_frozen", "one_module_frozen"):
        assert "FAILED RuntimeError" in lines[case], run.stdout[-2000:]
        _assert_signatures_match("fsdp2-first-forward-all-frozen", lines[case], every=False)
    for case in ("no_grad", "no_policy"):
        assert "TRAINED torch.float32" in lines[case], run.stdout[-2000:]


def test_fsdp1_state_dict_type_on_an_unwrapped_model_fails_when_the_block_ends():
    """fsdp1-state-dict-type-before-wrap: the body runs, switching nothing; the exit finds no
    flavour to restore and raises KeyError: None (the traceback the signature quotes)."""
    import traceback

    from torch.distributed.fsdp import FullyShardedDataParallel, StateDictType

    model = torch.nn.Linear(2, 2)
    ran = False
    with pytest.raises(KeyError) as raised:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            with FullyShardedDataParallel.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
                ran = True
                assert "weight" in model.state_dict()  # a plain state dict: nothing switched
    assert ran and raised.value.args == (None,)
    text = "".join(traceback.format_exception(raised.value))
    _assert_signatures_match("fsdp1-state-dict-type-before-wrap", text, every=False)


def test_the_trainer_loads_an_fsdp_checkpoint_after_preparing_the_model():
    """fsdp1-state-dict-type-before-wrap: the installed Trainer skips the early resume for FSDP
    and loads FSDP checkpoints into the wrapped model after accelerator.prepare."""
    trainer = pytest.importorskip("transformers.trainer")
    train = inspect.getsource(trainer.Trainer.train)
    early = train.index("self._load_from_checkpoint(resume_from_checkpoint)")
    assert "not self.is_fsdp_enabled" in train[:early]
    prepare = inspect.getsource(trainer.Trainer._prepare_for_training)
    late = prepare.index("self._load_from_checkpoint(resume_from_checkpoint, self.model_wrapped)")
    assert "self.accelerator.prepare(" in prepare[:late]


def test_fsdp1_refuses_modules_on_several_devices_with_the_pitfalls_messages(monkeypatch):
    """fsdp1-module-on-several-devices: torch's own check, run on parameters that report the
    devices of the published error (a GPU and meta) and of a CPU + GPU mix without device_id,
    raises the messages the signatures quote."""
    from types import SimpleNamespace

    utils = importlib.import_module("torch.distributed.fsdp._init_utils")
    for devices in (("cuda:2", "meta"), ("cpu", "cuda:0")):
        params = [SimpleNamespace(device=torch.device(d)) for d in devices]
        monkeypatch.setattr(utils, "_get_orig_params", lambda module, ignored, p=params: p)
        with pytest.raises(RuntimeError) as raised:
            utils._check_single_device_module(None, set(), None)
        _assert_signatures_match("fsdp1-module-on-several-devices", str(raised.value), every=False)
    params = [SimpleNamespace(device=torch.device(d)) for d in ("cpu", "cuda:0")]
    monkeypatch.setattr(utils, "_get_orig_params", lambda module, ignored: params)
    utils._check_single_device_module(None, set(), torch.device("cuda:0"))  # device_id: allowed


PER_RANK_SAVE = (
    """
import warnings
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType, fully_shard

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Linear(8, 3)
if rank == 0:
    torch.save(model.state_dict(), "full.pt")
fully_shard(model)
torch.save(model.state_dict(), f"fsdp2_rank_{rank}.pt")
torch.manual_seed(0)
legacy = FSDP(nn.Linear(8, 3), device_id=torch.device("cpu"), use_orig_params=True)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    with FSDP.state_dict_type(legacy, StateDictType.SHARDED_STATE_DICT):
        torch.save(legacy.state_dict(), f"fsdp1_rank_{rank}.pt")
flat = [None, None]
dist.all_gather_object(flat, legacy._flat_param.numel())  # of 27 elements
if rank == 0:  # one writer: the ranks' lines would interleave
    print("FLAT", flat, flush=True)
"""
    + DESTROY_GROUP
)

PER_RANK_LOAD = (
    """
import torch

def attempt(label, load):
    try:
        load()
        print(label, "LOADED")
    except Exception as error:
        print(label, "FAILED", " ".join(str(error).split()))

attempt("dtensor_plain", lambda: torch.load("fsdp2_rank_0.pt", weights_only=True))
attempt("sharded_no_group", lambda: torch.load("fsdp1_rank_0.pt", weights_only=False))
import torch.distributed as dist
import torch.distributed.tensor
shards = [torch.load(f"fsdp2_rank_{r}.pt", weights_only=True) for r in range(2)]
full = torch.load("full.pt")
merged = {k: torch.cat([s[k].to_local() for s in shards], dim=0) for k in full}
print("merged_equal", all(torch.equal(merged[k], full[k]) for k in full))
print("pieces", [tuple(s["weight"].to_local().shape) for s in shards])
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
attempt("sharded_other_size", lambda: torch.load("fsdp1_rank_0.pt", weights_only=False))
"""
    + DESTROY_GROUP
)


@pytest.mark.slow
def test_per_rank_dtensor_files_merge_without_a_group_and_sharded_tensor_files_need_one(
    tmp_path,
):
    """checkpointing, 'One .pt file per rank': the messages the section quotes, and that
    concatenating DTensor pieces in rank order along dim 0 rebuilds the tensors (3 rows on 2
    ranks: uneven) in a process with no group; FSDP1's flat shards are padded to equal size."""
    import subprocess
    import sys

    from tests.distributed import RANK_MAIN, quiet_env, run_script

    saved = run_script(tmp_path, "save.py", PER_RANK_SAVE, 2, check=True)
    (tmp_path / "load.py").write_text(PER_RANK_LOAD, encoding="utf-8")
    loaded = subprocess.run(
        [sys.executable, str(RANK_MAIN), "load.py"],  # one Gloo rank: no teardown either
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=quiet_env(),
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    lines = {line.split()[0]: line for line in loaded.stdout.splitlines() if " " in line}
    section = flat(
        section_text("checkpointing", "One .pt file per rank: merging them into one state dict")
    )
    assert (
        "``torch.distributed.tensor`` must be imported to load DTensors" in lines["dtensor_plain"]
    )
    assert "must be imported to load DTensors" in section
    quoted = 'Need to initialize default process group using "init_process_group" before loading ShardedTensor'
    assert quoted in lines["sharded_no_group"] and quoted in section
    assert (
        "Local world size at save time was 2, but at load time was 1" in lines["sharded_other_size"]
    )
    assert "Local world size at save time was 8, but at load time was 1" in section
    assert lines["merged_equal"] == "merged_equal True"
    assert lines["pieces"] == "pieces [(2, 8), (1, 8)]"
    # oom-debugging, 'GPUs of different memory sizes': FSDP1 pads to equal shards (27 -> 14, 14)
    assert "FLAT [14, 14]" in saved.stdout, saved.stdout


def test_the_autograd_gather_the_guide_names_is_what_torch_points_to():
    """process-groups, 'A gather that gradients flow through': the public autograd gather is
    deprecated in favour of the function the section's example uses."""
    functional = importlib.import_module("torch.distributed.nn.functional")
    funcol = importlib.import_module("torch.distributed._functional_collectives")
    source = flat(inspect.getsource(functional.all_gather))
    assert (
        '_deprecated( "all_gather", "torch.distributed._functional_collectives.all_gather_single" )'
        in source
    )
    autograd_variant = inspect.getsource(funcol.all_gather_single_autograd)
    assert "The base all_gather_single now has autograd support" in autograd_variant
    section = flat(
        section_text("process-groups", "A gather that gradients flow through (contrastive losses)")
    )
    assert "torch.distributed._functional_collectives.all_gather_single(x, 0, group)" in section


SCALER_AFTER_JOIN = (
    """
import warnings
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.join import Join

warnings.simplefilter("ignore")
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)


def step():
    scaler.scale(model(torch.ones(2, 4)).sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()


with Join([model]):
    for _ in range(3 if rank == 0 else 5):
        step()
scales = [None, None]
dist.all_gather_object(scales, scaler.get_scale())
step()
weights = [torch.empty_like(model.module.weight) for _ in range(2)]
dist.all_gather(weights, model.module.weight.detach())
if rank == 0:  # one writer: the ranks' lines would interleave
    print("SCALES", scales, "SAME", torch.equal(weights[0], weights[1]), flush=True)
"""
    + DESTROY_GROUP
)


@pytest.mark.slow
def test_grad_scalers_drift_apart_after_uneven_inputs_and_so_do_the_weights(tmp_path):
    """grad-scaler-scale-differs-across-ranks: the scales and the weights its cause quotes;
    the fix's example (agreeing on one scale) runs in the bundle tests."""
    from tests.distributed import run_script

    run = run_script(tmp_path, "scaler.py", SCALER_AFTER_JOIN, 2, check=True)
    assert "SCALES [8192.0, 32768.0] SAME False" in run.stdout, run.stdout
    assert (
        "Passing ``new_scale`` sets the new scale value manually"
        in torch.amp.GradScaler.update.__doc__
    )
    cause = flat(knowledge.pitfall("grad-scaler-scale-differs-across-ranks").cause)
    assert "scales of 8192 and 32768" in cause


def test_ddp_refuses_device_ids_for_a_module_on_several_devices_or_the_cpu():
    """ddp-device-ids-for-a-module-not-on-one-gpu: the same check covers both cases its
    symptom names (the CPU case is reproduced in repro_errors.py)."""
    from torch.nn.parallel import distributed

    source = flat(inspect.getsource(distributed.DistributedDataParallel.__init__))
    assert (
        'or self.device_type == "cpu" or self.is_multi_device_module ): if device_ids or output_device:'
        in source
    )
    assert "only work with single-device/multiple-device GPU modules or CPU modules" in source


SEEDS = "Seeds and initialisation: DDP copies rank 0's weights, FSDP2 keeps each rank's own"


def test_ddp_copies_rank_0s_weights_unless_init_sync_is_off():
    """migrate-ddp-to-fsdp, the seed section: the constructor flag and what it does."""
    from torch.nn.parallel import DistributedDataParallel

    assert inspect.signature(DistributedDataParallel.__init__).parameters["init_sync"].default
    source = inspect.getsource(DistributedDataParallel.__init__)
    assert "if init_sync:" in source and "_sync_module_states(" in source
    assert "(`init_sync=True`, the default in torch 2.13)" in flat(
        section_text("migrate-ddp-to-fsdp", SEEDS)
    )


def test_the_seed_section_names_what_peft_and_the_trainer_seed():
    """migrate-ddp-to-fsdp, the seed section: LoRA's random A matrices, the Trainer's one seed
    for every rank, and Accelerate's per-process offset."""
    import dataclasses

    from accelerate.utils import set_seed
    from peft import LoraConfig
    from peft.tuners.lora.layer import LoraLayer
    from transformers import Trainer, TrainingArguments

    assert inspect.signature(LoraConfig).parameters["init_lora_weights"].default is True
    reset = inspect.getsource(LoraLayer.reset_lora_parameters)
    assert "nn.init.kaiming_uniform_(self.lora_A[adapter_name].weight" in reset
    assert "set_seed(self.args.seed)" in inspect.getsource(Trainer.__init__)
    seed = next(f for f in dataclasses.fields(TrainingArguments) if f.name == "seed")
    assert seed.default == 42
    assert inspect.signature(set_seed).parameters["device_specific"].default is False
    assert "seed += AcceleratorState().process_index" in inspect.getsource(set_seed)
    text = flat(section_text("migrate-ddp-to-fsdp", SEEDS))
    assert "(`seed` defaults to 42)" in text and "`set_seed(seed, device_specific=True)`" in text


def test_all_gather_into_tensor_is_deprecated_for_all_gather_single():
    """gloo-all-gather-uneven-sizes recommends the name torch 2.13 does not deprecate."""
    import torch.distributed as dist

    source = inspect.getsource(dist.all_gather_into_tensor)
    assert "Please use `torch.distributed.all_gather_single` instead." in source
    assert "FutureWarning" in source
    fix = flat(knowledge.pitfall("gloo-all-gather-uneven-sizes").fix)
    assert "Give `all_gather_single` (`all_gather_into_tensor` before torch 2.13)" in fix


def test_rowwise_parallel_expects_split_features_unless_told_otherwise():
    """tensor-parallel, 'nn.Embedding': the default layouts the section explains."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    rowwise, colwise = RowwiseParallel(), ColwiseParallel()
    assert rowwise.input_layouts == (Shard(-1),) and rowwise.output_layouts == (Replicate(),)
    assert colwise.input_layouts == (Replicate(),) and colwise.output_layouts == (Shard(-1),)
    text = flat(
        section_text(
            "tensor-parallel",
            "nn.Embedding: RowwiseParallel splits the vocabulary, ColwiseParallel the features",
        )
    )
    assert "Its default input layout, `Shard(-1)`, is made for a Linear layer" in text


RESUME = (
    """
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard

mode, folder = sys.argv[1], sys.argv[2]  # "full" saves after 3 steps; the others resume there
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(10, 8), nn.Dropout(0.5), nn.Linear(8, 10))  # 10 rows
fully_shard(model)
optim = torch.optim.AdamW(model.parameters(), lr=0.05)
sched = torch.optim.lr_scheduler.StepLR(optim, step_size=2, gamma=0.5)
data = torch.randint(0, 10, (6, world, 12), generator=torch.Generator().manual_seed(1))
torch.manual_seed(100 + rank)  # each rank's dropout masks
start = 0
if mode != "full":
    model_sd, optim_sd = get_state_dict(model, optim)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=folder)
    set_state_dict(model, optim, model_state_dict=state["model"], optim_state_dict=state["optim"])
    own = torch.load(f"{folder}/rank{rank}.pt")
    sched.load_state_dict(own["scheduler"])
    if mode == "with-rng":
        torch.set_rng_state(own["rng"])
    start = 3
for step in range(start, 6):
    tokens = data[step, rank]
    loss = nn.functional.cross_entropy(model(tokens[:-1]), tokens[1:])
    loss.backward()
    optim.step()
    optim.zero_grad()
    sched.step()
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    if rank == 0:
        print("LOSS", step, repr(mean.item() / world), flush=True)
    if mode == "full" and step == 2:
        model_sd, optim_sd = get_state_dict(model, optim)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=folder)
        own = {"scheduler": sched.state_dict(), "rng": torch.get_rng_state()}
        torch.save(own, f"{folder}/rank{rank}.pt")
rows = [None] * world
dist.all_gather_object(rows, model[0].weight.to_local().shape[0])
if rank == 0:
    print("ROWS", rows, flush=True)
"""
    + DESTROY_GROUP
)


@pytest.mark.slow
def test_a_resume_with_uneven_shards_repeats_the_losses_only_with_each_ranks_rng_state(tmp_path):
    """checkpointing, "The loss after a resume differs": on four ranks, shards of 3, 3, 3 and
    1 rows resume to the same losses to the last bit with the RNG states restored, and to
    others without them."""
    from tests.distributed import run_script

    folder = str(tmp_path / "ckpt")
    losses = {}
    for mode in ("full", "with-rng", "without-rng"):
        run = run_script(tmp_path, "resume.py", RESUME, 4, [mode, folder], timeout=180, check=True)
        assert "ROWS [3, 3, 3, 1]" in run.stdout
        found = re.findall(r"^LOSS (\d) (\S+)$", run.stdout, re.MULTILINE)
        losses[mode] = {int(step): value for step, value in found}
    after = {step: losses["full"][step] for step in (3, 4, 5)}
    assert losses["with-rng"] == after
    assert losses["without-rng"][3] != after[3]
    text = section("checkpointing", "The loss after a resume differs")
    assert (
        "sharded as 3, 3, 3 and 1 rows" in text
        and "equal the original run's to the last bit" in text
    )
    assert "Without the RNG states they differ from the first step after the resume" in text


OWN_PARAMETER = (
    """
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import fully_shard
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

dist.init_process_group("gloo")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = nn.Parameter(torch.zeros(6, 8))  # its own parameter, beside its blocks
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        x = x + self.pos
        for block in self.blocks:
            x = block(x)
        return x.sum()


model = Model()
for block in model.blocks:
    fully_shard(block)
fully_shard(model)
group = model._get_fsdp_state()._fsdp_param_group
own = [n for n, p in model.named_parameters() if any(p is f.sharded_param for f in group.fsdp_params)]
model(torch.randn(6, 8)).backward()
legacy = FSDP(Model(), auto_wrap_policy=ModuleWrapPolicy({Block}), device_id=torch.device("cpu"))
if dist.get_rank() == 0:
    print("FSDP2", own, type(model.pos).__name__, model.pos.placements, type(model.pos.grad).__name__)
    print("FSDP1", list(legacy._flat_param._fqns), flush=True)
"""
    + DESTROY_GROUP
)


@pytest.mark.slow
def test_a_modules_own_parameter_joins_its_group_in_fsdp2_and_fsdp1(tmp_path):
    """fsdp2, "Bottom-up wrapping": a bare nn.Parameter of the root beside sharded blocks."""
    from tests.distributed import run_script

    run = run_script(tmp_path, "own.py", OWN_PARAMETER, 2, check=True)
    assert "FSDP2 ['pos'] DTensor (Shard(dim=0),) DTensor" in run.stdout
    assert "FSDP1 ['pos']" in run.stdout
    text = section("fsdp2", "Bottom-up wrapping")
    assert "became a `Shard(0)` DTensor of the root's group" in text
    assert "the root unit's flat parameter held only that parameter" in text
