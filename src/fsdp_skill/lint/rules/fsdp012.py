"""FSDP012: a full state dict gathered on the GPU (no CPU offload / rank-0 only)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint import versions
from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, constant, has_splat, key_of
from fsdp_skill.lint.records import Call
from fsdp_skill.lint.rules._api import kwarg_is, last

CODE = "FSDP012"
PITFALL = "full-state-dict-on-gpu"
SEVERITY = "warning"
SUMMARY = "full state dict gathered on the GPU"

_GETTERS = {"get_model_state_dict", "get_optimizer_state_dict", "get_state_dict"}


def fix(version: tuple[int, int]) -> str:
    fsdp1 = "FSDP1: FullStateDictConfig(offload_to_cpu=True, rank0_only=True)"
    if version < versions.DCP_SAVE:
        return fsdp1
    return f"{fsdp1}; DCP helpers: StateDictOptions(full_state_dict=True, cpu_offload=True)"


def _full_config_problems(call: ast.Call) -> list[str]:
    missing = []
    for flag in ("offload_to_cpu", "rank0_only"):
        value = call_arg(call, -1, flag)
        if value is None or constant(value) is False:
            missing.append(f"{flag}=True")
        elif constant(value) is ...:
            return []  # computed: cannot tell
    return missing


def _options_used_for_get(m: FileModel, options: Call) -> bool:
    """True if the StateDictOptions object ends up in get_*_state_dict."""
    keys = {a.key for a in m.bound_to(options.node)}
    for call in m.calls_to(*_GETTERS, module="torch.distributed.checkpoint"):
        arg = call_arg(call.node, -1, "options")
        if arg is options.node or (key_of(arg) in keys and key_of(arg) is not None):
            return True
    return False


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    for call in m.calls_to("FullStateDictConfig", module="torch.distributed.fsdp"):
        if has_splat(call.node):
            continue
        missing = _full_config_problems(call.node)
        if missing:
            yield (
                call.node,
                (
                    f"FullStateDictConfig without {' and '.join(missing)}: every rank gathers "
                    "the whole model on its GPU and can run out of memory"
                ),
            )
    for call in m.calls_to("state_dict_type", "set_state_dict_type", module="torch.distributed"):
        node = call.node
        kind = m.qualname(call_arg(node, 1, "state_dict_type")) or ""
        if last(kind) == "FULL_STATE_DICT" and not has_splat(node):
            if call_arg(node, 2, "state_dict_config") is None:
                yield (
                    node,
                    (
                        "FULL_STATE_DICT with the default config gathers the whole model on every "
                        "rank's GPU: pass FullStateDictConfig(offload_to_cpu=True, rank0_only=True)"
                    ),
                )
    for call in m.calls_to("StateDictOptions", module="torch.distributed.checkpoint"):
        node = call.node
        if has_splat(node) or not kwarg_is(node, "full_state_dict", True):
            continue
        if kwarg_is(node, "cpu_offload", True) or kwarg_is(node, "broadcast_from_rank0", True):
            continue
        if call_arg(node, -1, "cpu_offload") is not None and not kwarg_is(
            node, "cpu_offload", False
        ):
            continue  # computed value
        if _options_used_for_get(m, call):
            yield (
                node,
                (
                    "StateDictOptions(full_state_dict=True) without cpu_offload=True: every rank "
                    "gathers the whole model on its GPU and can run out of memory"
                ),
            )
    yield from _fsdp1_default_full(m)


def _fsdp1_default_full(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    """FSDP1 ``model.state_dict()`` when the file never chooses a state-dict type: the default
    is FULL_STATE_DICT with FullStateDictConfig() (no offload, every rank)."""
    if m.uses("state_dict_type", "set_state_dict_type") or "state_dict" not in m.identifiers:
        return
    for call in m.method_calls("state_dict"):
        owner = key_of(call.node.func.value)
        if owner and m.shard_kinds(owner, call.func) == {"fsdp1"}:
            yield (
                call.node,
                (
                    f"`{owner}.state_dict()` on an FSDP1 model uses the default FULL_STATE_DICT "
                    "config: every rank gathers the whole model on its GPU"
                ),
            )
            return
