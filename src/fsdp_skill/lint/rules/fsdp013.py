"""FSDP013: torch.distributed.launch or a --local_rank argument (use torchrun and LOCAL_RANK)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel, constant

CODE = "FSDP013"
PITFALL = "deprecated-distributed-launch"
SEVERITY = "warning"
SUMMARY = "torch.distributed.launch / --local_rank instead of torchrun"

_LAUNCH_CMD = re.compile(r"(?:^|\s)-m\s+torch\.distributed\.launch\b")


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
    for node in m.strings:
        text = node.value
        if "torch.distributed.launch" not in text:
            continue
        if text == "torch.distributed.launch" or _LAUNCH_CMD.search(text):
            yield node, "launches with torch.distributed.launch, which is deprecated: use torchrun"
