"""FSDP016: a device-mesh shape that depends on the rank."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg

CODE = "FSDP016"
PITFALL = "rank-dependent-mesh-shape"
SEVERITY = "error"
SUMMARY = "device-mesh shape depends on the rank"


def fix(version: tuple[int, int]) -> str:
    return (
        "compute mesh_shape from values equal on every rank (WORLD_SIZE, LOCAL_WORLD_SIZE, "
        "config), never from RANK / LOCAL_RANK"
    )


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    for call in m.calls_to("init_device_mesh", "DeviceMesh", module="torch.distributed"):
        shape = call_arg(
            call.node, 1, "mesh_shape" if "init" in (m.call_name(call) or "") else "mesh"
        )
        if shape is None:
            continue
        if m.mentions_rank(shape, call.func):
            yield (
                call.node,
                (
                    f"mesh shape `{ast.unparse(shape)[:50]}` depends on the rank: every rank must "
                    "pass the same shape, or mesh creation hangs or builds mismatched groups"
                ),
            )
