"""Runnable examples pick NCCL on GPUs and Gloo on CPU; none hard-codes Gloo for training.

A block that runs `fully_shard`, `FullyShardedDataParallel` or `DistributedDataParallel` on a
group created with a literal ``"gloo"`` backend would, on a GPU machine, put the model's
collectives through Gloo (FSDP2's default mesh follows the accelerator): slow at best, and
a pattern users copy. The scan covers every runnable block of the guides, the pitfalls'
runnable code and the shipped bundle's Markdown (SKILL.md, assets).
"""

from __future__ import annotations

import ast

import pytest

from fsdp_skill import knowledge, markdown
from fsdp_skill.bundle_files import BUNDLE_DIR

TRAINING_WRAPPERS = {
    "fully_shard",
    "FullyShardedDataParallel",
    "FSDP",
    "DistributedDataParallel",
    "DDP",
}


def _runnable_code() -> list[tuple[str, str]]:
    found = []
    for guide in knowledge.guides():
        for block in markdown.code_blocks(guide.body):
            if block.language == "python" and block.tags and block.tags[0].startswith("ws="):
                found.append((f"guide {guide.id}:{block.line}", block.code))
    for pitfall in knowledge.pitfalls():
        for kind in ("bad", "good"):
            if getattr(pitfall, f"{kind}_mode").startswith("ws="):
                found.append((f"pitfall {pitfall.id} ({kind})", getattr(pitfall, kind)))
    for md in sorted(BUNDLE_DIR.rglob("*.md")):
        if md.parent.name == "references":
            continue  # rendered from the guides and pitfalls above
        for block in markdown.code_blocks(md.read_text(encoding="utf-8")):
            if block.language == "python" and block.tags and block.tags[0].startswith("ws="):
                found.append((f"{md.relative_to(BUNDLE_DIR)}:{block.line}", block.code))
    return found


def _called_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def hard_coded_gloo_inits(code: str) -> list[int]:
    """Lines of ``init_process_group`` calls whose backend is the literal ``"gloo"``."""
    lines = []
    for node in ast.walk(ast.parse(code)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name != "init_process_group":
            continue
        backend = node.args[0] if node.args else None
        for keyword in node.keywords:
            if keyword.arg == "backend":
                backend = keyword.value
        if isinstance(backend, ast.Constant) and backend.value == "gloo":
            lines.append(node.lineno)
    return lines


def gloo_only_inits(code: str) -> list[int]:
    """The hard-coded Gloo inits of a program that never picks NCCL (a ``"gloo"`` init in the
    CPU branch of an ``if torch.cuda.is_available()`` next to an NCCL one is fine)."""
    return [] if "nccl" in code else hard_coded_gloo_inits(code)


CODE = _runnable_code()


def test_the_scan_sees_the_examples():
    assert len(CODE) >= 40
    assert any(where.startswith("SKILL.md") for where, _ in CODE)


@pytest.mark.parametrize("where,code", CODE, ids=[where for where, _ in CODE])
def test_training_examples_do_not_hard_code_gloo(where, code):
    wrappers = _called_names(ast.parse(code)) & TRAINING_WRAPPERS
    if not wrappers:
        return  # a plain-collective demo on CPU tensors: Gloo is right on any machine
    lines = gloo_only_inits(code)
    assert not lines, (
        f"{where}: {sorted(wrappers)} on a hard-coded Gloo group (line {lines}); pick "
        '"nccl" when torch.cuda.is_available() and "gloo" otherwise'
    )


@pytest.mark.parametrize(
    "code,expected",
    [
        ('dist.init_process_group("gloo")', [1]),
        ('dist.init_process_group(backend="gloo", rank=0)', [1]),
        ('dist.init_process_group("nccl" if use_cuda else "gloo")', []),
        ('dist.init_process_group("cpu:gloo,cuda:nccl")', []),
        ("dist.init_process_group(backend)", []),
    ],
)
def test_the_detector(code, expected):
    assert hard_coded_gloo_inits(code) == expected


def test_a_gloo_branch_beside_an_nccl_one_is_fine():
    branches = (
        'if torch.cuda.is_available():\n    dist.init_process_group("nccl")\n'
        'else:\n    dist.init_process_group("gloo")\n'
    )
    assert hard_coded_gloo_inits(branches) == [4]
    assert gloo_only_inits(branches) == []
    assert gloo_only_inits('dist.init_process_group("gloo")\n') == [1]
