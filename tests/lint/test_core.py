"""The file model the rules share: import resolution, simple assignments, scopes, sharding."""

from __future__ import annotations

import ast
import textwrap

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import key_of, root_of


def _model(code: str) -> FileModel:
    return FileModel(ast.parse(textwrap.dedent(code)))


def test_imports_resolve_to_dotted_names():
    m = _model(
        """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard as shard
        import torch
        shard_fn = shard
        dist.barrier()
        shard_fn(model)
        torch.distributed.all_reduce(t)
        """
    )
    names = [m.call_name(c) for c in m.calls]
    assert names == [
        "torch.distributed.barrier",
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed.all_reduce",
    ]


def test_local_definitions_shadow_nothing_they_do_not_import():
    m = _model("def fully_shard(x):\n    return x\n\nfully_shard(model)\n")
    assert m.call_name(m.calls[0]) is None
    assert m.local_callee(m.calls[0]).name == "fully_shard"


def test_keys_and_roots():
    expr = ast.parse("self.model.layers[0].attn", mode="eval").body
    assert key_of(expr) == "self.model.layers.[].attn"
    assert root_of("self.model.layers[]") == "self.model"
    assert root_of("model.layers") == "model"


def test_sharding_follows_assignments_helpers_and_self_attributes():
    m = _model(
        """
        from torch.distributed.fsdp import fully_shard, FullyShardedDataParallel as FSDP

        def apply(m):
            fully_shard(m)
            return m

        class Trainer:
            def __init__(self, net):
                self.model = FSDP(net)

            def step(self):
                return self.model

        def main():
            net = make()
            alias = net
            out = apply(alias)
            return out
        """
    )
    main = m.functions["main"]
    assert m.shard_kinds("alias", main) == {"fsdp2"}
    assert m.shard_kinds("out", main) == {"fsdp2"}
    assert m.shard_kinds("net", main) == set()  # only its alias was passed
    step = m.classes["Trainer"].methods["step"]
    assert m.shard_kinds("self.model", step) == {"fsdp1"}
    assert m.shards_param(m.functions["apply"], "m")


def test_rank_conditions():
    m = _model(
        """
        import os
        import torch.distributed as dist
        rank = int(os.environ["RANK"])
        is_main = rank == 0
        world_size = dist.get_world_size()
        """
    )
    test = lambda src: m.is_rank_test(ast.parse(src, mode="eval").body, m.module)  # noqa: E731
    assert test("rank == 0") and test("is_main") and test("dist.get_rank() != 0")
    assert test("args.local_rank in (0, -1)") and test("accelerator.is_main_process")
    assert test("not is_main and step > 3")
    assert not test("world_size > 1") and not test("num_ranks == 2") and not test("ranks")


def test_loop_items_come_from_their_iterable():
    m = _model("for i, block in enumerate(model.blocks):\n    pass\n")
    assert "model.blocks[]" in m.origins("block", m.module)


def test_other_kinds_of_rank_are_not_process_ranks():
    m = _model("lora_rank = 8\n")
    test = lambda src: m.is_rank_test(ast.parse(src, mode="eval").body, m.module)  # noqa: E731
    assert not test("lora_rank > 4") and not test("max_rank == 2")
    assert test("global_rank == 0") and test("node_rank != 0")
