"""FSDP013: torch.distributed.launch or a --local_rank argument (use torchrun and LOCAL_RANK)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import constant
from fsdp_skill.lint.rules._api import spawn_calls

if TYPE_CHECKING:
    from fsdp_skill.lint.edits import Edit, Text

CODE = "FSDP013"
PITFALL = "deprecated-distributed-launch"
SEVERITY = "warning"
SUMMARY = "torch.distributed.launch / --local_rank instead of torchrun"

_MODULE = "torch.distributed.launch"
_LAUNCH_CMD = re.compile(r"(?:^|\s)-m\s+torch\.distributed\.launch\b")
_PYTHON_LAUNCH = re.compile(r"(?:\bpython[0-9.]*\s+)?-m\s+torch\.distributed\.launch\b")
_USE_ENV = re.compile(r"\s--use[-_]env(?:=(?:True|true|1))?(?=\s|$)")
_USE_ENV_FLAGS = {"--use-env", "--use_env", "--use-env=True", "--use_env=True"}


def fix(version: tuple[int, int]) -> str:
    return (
        'launch with torchrun and read int(os.environ["LOCAL_RANK"]) instead of a '
        "--local_rank argument"
    )


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    for node, name in m.imports:
        if name == "torch.distributed.launch" or name.startswith("torch.distributed.launch."):
            yield node, "imports torch.distributed.launch, which is deprecated: use torchrun"
    calls = m.method_calls("add_argument") if "add_argument" in m.identifiers else []
    if calls and spawn_calls(m):
        calls = []  # its workers get their index from spawn: the flag is no launcher's protocol
    for call in calls:
        flags = [constant(a) for a in call.node.args]
        if any(f in ("--local_rank", "--local-rank") for f in flags):
            yield (
                call.node,
                (
                    "a --local_rank argument: torchrun does not pass it; read the LOCAL_RANK "
                    "environment variable"
                ),
            )
    if any("torch.distributed.launch" in node.value for node in m.strings):
        yield from _launch_commands(m)


def _launch_commands(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    """``-m torch.distributed.launch`` in a command string or an argument list."""
    message = "launches with torch.distributed.launch, which is deprecated: use torchrun"
    for node in m.strings:
        if _LAUNCH_CMD.search(node.value):
            yield node, message
    for node in ast.walk(m.tree):
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [constant(e) for e in node.elts]
            for before, item in zip(items, items[1:], strict=False):
                if before == "-m" and item == _MODULE:
                    yield node, message


def edit(m: FileModel, node: ast.AST, text: Text) -> list[Edit] | None:
    """A launch command rewritten to torchrun, only where that changes nothing for the script:
    the command passes ``--use-env`` (the script reads LOCAL_RANK from the environment, as
    under torchrun) and the flag is dropped (torchrun has no such flag). Without it the
    launcher hands the script ``--local-rank=N`` (torch/distributed/launch.py), which torchrun
    never does, so such a line is left to the user."""
    from fsdp_skill.lint.edits import Edit, string_literal

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        value = node.value
        if not _LAUNCH_CMD.search(value) or not _USE_ENV.search(value):
            return None

        def replace(match: re.Match) -> str:
            python = match.group(0).split("-m", 1)[0]
            return "torchrun" if python.strip() else "-m torch.distributed.run"

        new_value = _USE_ENV.sub("", _PYTHON_LAUNCH.sub(replace, value, count=1), count=1)
        literal = string_literal(text, node, new_value)
        if literal is None:
            return None
        start, end = text.span(node)
        return [Edit(start, end, literal, "launch command rewritten to torchrun")]
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [constant(e) for e in node.elts]
        flags = [i for i, item in enumerate(items) if item in _USE_ENV_FLAGS]
        module = [i for i, item in enumerate(items) if item == _MODULE]
        if len(flags) != 1 or len(module) != 1 or module[0] == 0 or items[module[0] - 1] != "-m":
            return None
        target = node.elts[module[0]]
        literal = string_literal(text, target, "torch.distributed.run")
        if literal is None:
            return None
        i = flags[0]
        if i + 1 < len(node.elts):  # drop the flag and the separator after it
            drop = (text.span(node.elts[i])[0], text.span(node.elts[i + 1])[0])
        else:  # the last item: drop the separator before it
            drop = (text.span(node.elts[i - 1])[1], text.span(node.elts[i])[1])
        start, end = text.span(target)
        return [
            Edit(
                start, end, literal, "launch module rewritten to torch.distributed.run (torchrun)"
            ),
            Edit(drop[0], drop[1], "", "--use-env dropped (torchrun always sets LOCAL_RANK)"),
        ]
    return None
