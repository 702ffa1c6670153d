"""FSDP023: with tensor parallelism on a 2-D mesh, a DistributedSampler over the whole world."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, last_name

CODE = "FSDP023"
PITFALL = "tp-sampler-over-world"
SEVERITY = "error"
SUMMARY = "DistributedSampler over the world with tensor parallelism"

_WORLD = {"get_world_size", "get_rank"}


def fix(version: tuple[int, int]) -> str:
    return (
        'shard the data over the data-parallel dimension only: dp = mesh["dp"]; '
        "DistributedSampler(dataset, num_replicas=dp.size(), rank=dp.get_local_rank())"
    )


def _two_d_mesh(m: FileModel) -> bool:
    for call in m.calls_to("init_device_mesh", module="torch.distributed"):
        shape = call_arg(call.node, 1, "mesh_shape")
        if isinstance(shape, (ast.Tuple, ast.List)) and len(shape.elts) >= 2:
            return True
        names = call_arg(call.node, -1, "mesh_dim_names")
        if isinstance(names, (ast.Tuple, ast.List)) and len(names.elts) >= 2:
            return True
    return False


def _over_world(call: ast.Call) -> bool:
    """True if the sampler splits over every rank: no num_replicas/rank, or the world's."""
    for name, index in (("num_replicas", 1), ("rank", 2)):
        arg = call_arg(call, index, name)
        if arg is None:
            continue
        if not (isinstance(arg, ast.Call) and last_name(arg.func) in _WORLD and not arg.args):
            return False
    return True


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not m.uses("parallelize_module") or not m.uses("DistributedSampler"):
        return
    if not m.calls_to("parallelize_module", module="torch.distributed") or not _two_d_mesh(m):
        return
    for sampler in m.calls_to("DistributedSampler", module="torch.utils.data"):
        node = sampler.node
        if any(kw.arg is None for kw in node.keywords) or not _over_world(node):
            continue
        yield (
            node,
            (
                "DistributedSampler over the whole world in a tensor-parallel job: the ranks "
                "of one TP group get different batches, but they must all see the same one"
            ),
        )
