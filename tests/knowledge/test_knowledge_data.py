"""The knowledge data is complete, well formed, and states torch 2.13's facts as torch does.

Completeness: every topic of the product spec has a guide, there are at least 40 pitfalls,
every lint code has a pitfall, every environment variable the spec or a guide names is
described. Facts: the numbers and rules the guides teach are read back from the installed
torch (constants, signatures, docstrings, class hierarchy) and compared with the text.
"""

from __future__ import annotations

import inspect
import mmap
import re
from datetime import timedelta
from pathlib import Path

import pytest

from fsdp_skill import knowledge, markdown
from tests.knowledge.texts import flat

# Spec topic -> the guide that covers it (ids are stable: SKILL.md and search link to them).
TOPIC_GUIDES = {
    "backend choice": "backends",
    "process-group initialisation": "process-groups",
    "init_device_mesh": "device-mesh",
    "new_group and several NCCL communicators": "subgroups",
    "uneven inputs (Join)": "uneven-inputs",
    "DDP static_graph": "ddp-static-graph",
    "NCCL and c10d debugging": "debugging",
    "performance tuning": "performance",
    "DDP to FSDP migration": "migrate-ddp-to-fsdp",
    "FSDP2 fully_shard": "fsdp2",
    "FSDP1 FullyShardedDataParallel": "fsdp1",
    "HSDP": "hsdp",
    "FSDP1 to FSDP2 migration": "migrate-fsdp1-to-fsdp2",
    "mixed precision": "mixed-precision",
    "CPU offload": "cpu-offload",
    "activation checkpointing": "activation-checkpointing",
    "meta-device init": "meta-device-init",
    "distributed checkpointing": "checkpointing",
    "gradient clipping and accumulation": "grad-clipping-accumulation",
    "torch.compile with FSDP": "torch-compile",
}
# The environment variables the product spec names explicitly.
SPEC_ENV_VARS = (
    "NCCL_DEBUG",
    "NCCL_DEBUG_SUBSYS",
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_NSOCKS_PERTHREAD",
    "TORCH_DISTRIBUTED_DEBUG",
)
_ENV_NAME = re.compile(
    r"\b(?:NCCL|GLOO|TORCH_NCCL|TORCH_FR|TORCH_DISTRIBUTED|TORCH_GLOO|TORCH_CPP|TORCH_SHOW)"
    r"_[A-Z0-9_]*[A-Z0-9]\b"
)
# Names a guide may write that are not variables (an enum, a doc anchor).
_NOT_VARIABLES = {"NCCL_BACKEND_NAME"}

GUIDES = {g.id: g for g in knowledge.guides()}
ENV = {v.name: v for v in knowledge.env_vars()}


def _guide(guide_id: str) -> str:
    return " ".join(GUIDES[guide_id].body.split())  # one line: facts may wrap


# --- completeness --------------------------------------------------------------------------


@pytest.mark.parametrize("topic,guide_id", sorted(TOPIC_GUIDES.items()))
def test_every_spec_topic_has_a_guide(topic, guide_id):
    assert guide_id in GUIDES, f"no guide {guide_id!r} for the topic {topic!r}"
    guide = GUIDES[guide_id]
    assert guide.summary.strip() and guide.links, guide_id
    assert len(list(markdown.headings(guide.body))) >= 3, f"{guide_id}: too few sections"


def test_at_least_40_pitfalls_with_every_field():
    pitfalls = knowledge.pitfalls()
    assert len(pitfalls) >= 40
    for p in pitfalls:
        for key in ("title", "symptom", "cause", "fix", "bad", "good", "torch"):
            assert getattr(p, key).strip(), f"{p.id}: empty {key}"
        assert p.links and all(u.startswith("https://") for u in p.links), p.id
        assert re.fullmatch(r"[<>=!]=?\d+\.\d+(,[<>=!]=?\d+\.\d+)*", p.torch.replace(" ", "")), (
            f"{p.id}: torch range {p.torch!r}"
        )


def test_every_lint_code_has_exactly_one_pitfall():
    from fsdp_skill.lint.engine import ALL_CODES as CODES

    owners: dict[str, list[str]] = {}
    for p in knowledge.pitfalls():
        if p.lint:
            owners.setdefault(p.lint, []).append(p.id)
    missing = sorted(set(CODES) - set(owners))
    assert not missing, f"lint codes without a pitfall: {missing}"
    shared = {code: ids for code, ids in owners.items() if len(ids) > 1}
    assert not shared, f"lint codes claimed by several pitfalls: {shared}"
    unknown = sorted(set(owners) - set(CODES))
    assert not unknown, f"pitfalls name lint codes no rule implements: {unknown}"


def test_spec_env_vars_are_described():
    missing = [name for name in SPEC_ENV_VARS if name not in ENV]
    assert not missing, missing


def test_every_env_var_the_knowledge_names_is_described():
    texts = {f"guide {g.id}": g.body for g in GUIDES.values()}
    texts.update(
        (f"pitfall {p.id}", "\n".join((p.symptom, p.cause, p.fix, p.bad, p.good)))
        for p in knowledge.pitfalls()
    )
    named = {
        (where, name)
        for where, text in texts.items()
        for name in _ENV_NAME.findall(text)
        if name not in _NOT_VARIABLES
    }
    # A renamed variable's old spelling counts as described by its new entry.
    renamed = {m for v in ENV.values() for m in re.findall(r"before: ([A-Z][A-Z0-9_]+)", v.since)}
    missing = sorted((gid, name) for gid, name in named if name not in set(ENV) | renamed)
    assert not missing, f"env vars named in the knowledge but absent from env_vars.toml: {missing}"


def test_env_var_entries_are_complete():
    for v in ENV.values():
        for key in ("backend", "what", "values", "when", "since", "source"):
            assert getattr(v, key).strip(), f"{v.name}: empty {key}"
        assert v.backend in ("nccl", "gloo", "any"), f"{v.name}: backend {v.backend!r}"
        assert "https://" in v.source, f"{v.name}: source needs a docs URL"
    assert len(ENV) == len(knowledge.env_vars()), "an env var is described twice"


# --- facts checked against the installed torch ---------------------------------------------


def test_default_timeouts_match_torch():
    import torch.distributed as dist
    from torch.distributed.constants import default_pg_timeout

    assert default_pg_timeout == timedelta(minutes=30)
    doc = flat(dist.init_process_group.__doc__)
    assert "10 minutes for NCCL and 30 minutes for other backends" in doc
    text = _guide("process-groups")
    assert "NCCL: 10 minutes" in text and "the others: 30 minutes" in text


def test_device_id_eager_init_matches_docstring():
    import torch.distributed as dist

    assert "device_id" in inspect.signature(dist.init_process_group).parameters
    doc = flat(dist.init_process_group.__doc__)
    assert "immediately formed" in doc and "only under NCCL" in doc
    text = _guide("process-groups")
    assert "the communicator is created inside `init_process_group`" in text
    assert "must be an accelerator device with an index" in text


def test_thread_safety_rule_is_stated():
    text = _guide("process-groups")
    assert "not thread-safe" in text and "UUIDs" in text and "hang" in text


def test_mesh_shape_rule_matches_docstring():
    from torch.distributed.device_mesh import init_device_mesh

    doc = flat(init_device_mesh.__doc__)
    assert "identical across all ranks" in doc and "hanging" in doc
    text = _guide("device-mesh")
    assert "must pass the same `mesh_shape`" in text and "hangs" in text


def test_join_rules_match_docstrings():
    from torch.distributed.algorithms.join import Join

    doc = flat(Join.__doc__)
    assert "notify_join_context()" in doc and "before its own per- iteration" in doc
    assert "all ``process_group`` attributes in the :class:`JoinHook` objects are the same" in doc
    text = _guide("uneven-inputs")
    assert "`notify_join_context()` comes before each iteration's collectives" in text
    assert "All hooks must share one process group" in text


def test_fsdp_is_not_joinable_but_ddp_and_zero_are():
    from torch.distributed.algorithms.join import Joinable
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    assert not issubclass(FSDP, Joinable) and not issubclass(FSDPModule, Joinable)
    assert issubclass(DDP, Joinable) and issubclass(ZeroRedundancyOptimizer, Joinable)
    text = _guide("uneven-inputs")
    assert "neither `FullyShardedDataParallel` (FSDP1) nor modules sharded with" in text
    assert "An FSDP job needs the same number of training steps on every rank" in text


def test_new_group_rules_match_docstring():
    import torch.distributed as dist

    params = inspect.signature(dist.new_group).parameters
    assert "use_local_synchronization" in params and "device_id" in params
    doc = flat(dist.new_group.__doc__)
    assert "even if they are not going to be members of the group" in doc
    assert "created in the same order in all processes" in doc
    text = _guide("subgroups")
    assert "even ranks that are not in `ranks`" in text and "in the same order" in text


def test_backend_rule_of_thumb_is_stated():
    text = _guide("backends")
    assert "only built-in backend that can use InfiniBand and GPUDirect" in text
    for needle in (
        "| NVIDIA GPUs (CUDA) | `nccl`",
        "| Intel GPUs (XPU) | `xccl`",
        "| CPU only | `gloo`",
    ):
        assert needle in text


def test_interface_and_socket_variables_say_what_the_docs_say():
    gloo = flat(ENV["GLOO_SOCKET_IFNAME"].what)
    assert "round-robin" in gloo and "same number of interfaces" in gloo
    subsys = flat(ENV["NCCL_DEBUG_SUBSYS"].values)
    assert "COLL" in subsys and "GRAPH" in subsys
    for name in ("NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"):
        assert "64" in ENV[name].what, name
    debug = _guide("debugging")
    for needle in ("`COLL`", "`GRAPH`", "`NCCL_DEBUG=INFO`", "round-robin"):
        assert needle in debug, needle


def test_distributed_debug_levels_exist():
    import torch.distributed as dist

    assert {"OFF", "INFO", "DETAIL"} <= set(dist.DebugLevel.__members__)
    assert "OFF (default), INFO, DETAIL" in ENV["TORCH_DISTRIBUTED_DEBUG"].values


def test_tuning_defaults_match_torch():
    from torch.distributed.fsdp import BackwardPrefetch, fully_shard
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.nn.parallel import DistributedDataParallel as DDP

    fsdp1 = inspect.signature(FSDP.__init__).parameters
    assert fsdp1["backward_prefetch"].default is BackwardPrefetch.BACKWARD_PRE
    assert fsdp1["limit_all_gathers"].default is True
    assert fsdp1["forward_prefetch"].default is False
    assert inspect.signature(fully_shard).parameters["reshard_after_forward"].default is None
    assert "a default size of 25 MiB" in flat(DDP.__doc__)
    text = _guide("performance")
    assert "(default 25 MiB)" in text and "`None` (2.13 default)" in text
    assert "backward_prefetch=BackwardPrefetch.BACKWARD_PRE)` (the default)" in text
    assert "`limit_all_gathers=True` (default)" in text


def _torch_strings() -> set[str]:
    """``TORCH_*`` words in the installed torch's C++ headers and main library."""
    import torch

    root = Path(torch.__file__).parent
    found: set[str] = set()
    word = re.compile(rb"TORCH_[A-Z0-9_]+")
    for header in (root / "include" / "torch" / "csrc" / "distributed" / "c10d").glob("*.hpp"):
        found.update(m.decode() for m in word.findall(header.read_bytes()))
    for lib in (root / "lib").glob("libtorch_c*.so"):
        with lib.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            found.update(m.decode() for m in word.findall(data))
    return found


def test_torch_env_var_names_exist_in_installed_torch():
    """Every TORCH_NCCL_/TORCH_FR_/TORCH_GLOO_ variable described is read by torch 2.13."""
    names = [n for n in ENV if n.startswith(("TORCH_NCCL_", "TORCH_FR_", "TORCH_GLOO_"))]
    assert names
    present = _torch_strings()
    if not any(n.startswith("TORCH_NCCL_") for n in present):
        pytest.skip("this torch build ships neither the c10d headers nor the library strings")
    missing = sorted(n for n in names if n not in present)
    assert not missing, f"not found in the installed torch: {missing}"


# --- part A's guides: shape ------------------------------------------------------------------

PART_A = (
    "backends",
    "process-groups",
    "device-mesh",
    "subgroups",
    "uneven-inputs",
    "ddp-static-graph",
    "debugging",
    "performance",
    "migrate-ddp-to-fsdp",
)


@pytest.mark.parametrize("guide_id", PART_A)
def test_part_a_guide_shape(guide_id):
    guide = GUIDES[guide_id]
    blocks = [b for b in markdown.code_blocks(guide.body) if b.language == "python"]
    assert any(b.tags and b.tags[0].startswith("ws=") for b in blocks), (
        f"{guide_id}: no example that runs on CPU"
    )
    titles = [title for _, level, title in markdown.headings(guide.body) if level == 2]
    assert "Older versions" in titles, f"{guide_id}: no notes for older torch versions"
    assert all(u.startswith("https://") for u in guide.links)


# --- the loader rejects malformed env-var files -------------------------------------------------


@pytest.mark.parametrize(
    "body,message",
    [
        ('[[var]]\nname = "X"\nbackend = "any"\n', "missing what"),
        (
            '[[var]]\nname = "X"\nbackend = "any"\nwhat = "w"\nvalues = "1"\nwhen = "w"\n'
            'since = "2.0"\nsource = "https://x"\ncolour = "red"\n',
            "unknown keys colour",
        ),
        (
            2
            * (
                '[[var]]\nname = "X"\nbackend = "any"\nwhat = "w"\nvalues = "1"\nwhen = "w"\n'
                'since = "2.0"\nsource = "https://x"\n'
            ),
            "described twice",
        ),
        ("[[var]\n", "var"),
    ],
)
def test_env_var_loader_rejects_bad_files(tmp_path, body, message):
    path = tmp_path / "env_vars.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(knowledge.KnowledgeError, match=message):
        knowledge.load_env_vars(path)


@pytest.mark.parametrize("pitfall", knowledge.pitfalls(), ids=lambda p: p.id)
def test_every_signature_compiles_as_explain_matches_it(pitfall):
    """Loading a pitfall no longer compiles its signatures (explain compiles one only when its
    literal occurs in the text), so a bad regex must fail here."""
    from fsdp_skill.diagnose.signatures import FLAGS

    for signature in pitfall.signatures:
        re.compile(signature, FLAGS)
