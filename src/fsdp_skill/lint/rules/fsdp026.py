"""FSDP026: FSDP1's MixedPrecision / CPUOffload given to fully_shard, or FSDP2's policies given
to FullyShardedDataParallel."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import is_under
from fsdp_skill.lint.rules._api import last

CODE = "FSDP026"
PITFALL = "fsdp1-fsdp2-policy-swap"
SEVERITY = "error"
SUMMARY = "FSDP1 and FSDP2 policy classes swapped"

WRAPPERS = ("fully_shard", "FullyShardedDataParallel")
EXPECTED = {
    # (wrapper, keyword): (the class it takes, the other API's classes, what goes wrong)
    ("fully_shard", "mp_policy"): (
        "MixedPrecisionPolicy",
        {"MixedPrecision"},
        "the parameters are cast but not the inputs (its cast_forward_inputs defaults to False)",
    ),
    ("fully_shard", "offload_policy"): (
        "CPUOffloadPolicy",
        {"CPUOffload"},
        "nothing is offloaded: fully_shard offloads only with a CPUOffloadPolicy",
    ),
    ("FullyShardedDataParallel", "mixed_precision"): (
        "MixedPrecision",
        {"MixedPrecisionPolicy"},
        "FSDP1 fails on attributes the FSDP2 class lacks (AttributeError)",
    ),
    ("FullyShardedDataParallel", "cpu_offload"): (
        "CPUOffload",
        {"CPUOffloadPolicy", "OffloadPolicy"},
        "FSDP1 fails on the missing offload_params attribute (AttributeError)",
    ),
}


def fix(version: tuple[int, int]) -> str:
    return (
        "pair each wrapper with its own classes: fully_shard(m, mp_policy="
        "MixedPrecisionPolicy(...), offload_policy=CPUOffloadPolicy()); "
        "FullyShardedDataParallel(m, mixed_precision=MixedPrecision(...), "
        "cpu_offload=CPUOffload(offload_params=True))"
    )


def _policy_class(m: FileModel, value: ast.expr) -> str | None:
    """The torch.distributed class ``value`` constructs, if it is a call of one."""
    if not isinstance(value, ast.Call):
        return None
    name = m.call_name(value)
    return last(name) if name and is_under(name, "torch.distributed") else None


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not m.uses(*WRAPPERS):
        return
    for wrapper in WRAPPERS:
        for call in m.calls_to(wrapper, module="torch.distributed"):
            for keyword in call.node.keywords:
                expected = EXPECTED.get((wrapper, keyword.arg))
                if expected is None:
                    continue
                wanted, others, effect = expected
                for value in m.resolve(keyword.value, call.func):
                    given = _policy_class(m, value)
                    if given in others:
                        yield (
                            keyword.value,
                            f"{wrapper}(..., {keyword.arg}={given}(...)): {wrapper} takes "
                            f"{wanted}; with {given}, {effect}",
                        )
                        break
