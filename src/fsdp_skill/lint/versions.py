"""The torch version that advice is written for, and the version facts the advice depends on.

Each fact carries its source. The installed torch's version is read from package metadata
(never by importing torch).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

LATEST = (2, 13)

FSDP2_PUBLIC = (2, 6)
"""``fully_shard`` is importable from ``torch.distributed.fsdp`` since 2.6; source:
https://github.com/pytorch/pytorch/pull/141868 (moved out of ``_composable``, targeting 2.6)."""

FSDP2_PROTOTYPE = (2, 4)
"""FSDP2 first shipped as ``torch.distributed._composable.fsdp.fully_shard`` in 2.4; source:
https://docs.nvidia.com/megatron-core/developer-guide/nightly/apidocs/core/core.distributed.torch_fully_sharded_data_parallel.html
("PyTorch version >= 2.4.0 is required" for its FSDP2 wrapper)."""

DCP_SAVE = (2, 2)
"""``torch.distributed.checkpoint.save``/``load`` replace ``save_state_dict``/``load_state_dict``
from 2.2 (source: https://github.com/Lightning-AI/pytorch-lightning/pull/19298, switching for
"PyTorch 2.2+"); the ``checkpoint.state_dict`` helpers are taught for 2.2 and later only."""

DEVICE_ID = (2, 3)
"""``init_process_group(device_id=...)`` is available in every release from 2.3 (added by
https://github.com/pytorch/pytorch/pull/114916, documented by #116222 in December 2023; older
releases get the ``set_device`` advice only)."""

AMP_GRAD_SCALER = (2, 4)
"""``torch.amp.GradScaler("cuda")`` replaces the deprecated ``torch.cuda.amp.GradScaler`` from 2.4;
source: https://github.com/pytorch/pytorch/pull/126527."""


def parse(version: str) -> tuple[int, int]:
    """``"2.5"`` or ``"2.5.1+cu121"`` -> ``(2, 5)``; raises ValueError on anything else."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)?(?:[+.\-]?\w*)*\s*", version)
    if not match:
        raise ValueError(f"not a torch version: {version!r} (expected X.Y, e.g. 2.6)")
    return int(match.group(1)), int(match.group(2))


@cache
def installed() -> tuple[int, int]:
    """The installed torch's version, read from ``torch/version.py`` as text (importing torch
    or ``importlib.metadata`` would cost a large part of the start-up budget), or the latest
    known version when torch is not installed."""
    from importlib.util import find_spec

    try:
        spec = find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return LATEST
    try:
        text = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8")
    except OSError:
        return LATEST
    match = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    try:
        return parse(match.group(1)) if match else LATEST
    except ValueError:
        return LATEST


def fsdp2_module(version: tuple[int, int]) -> str | None:
    """Where ``fully_shard`` is imported from in ``version`` (None: FSDP2 does not exist)."""
    if version >= FSDP2_PUBLIC:
        return "torch.distributed.fsdp"
    if version >= FSDP2_PROTOTYPE:
        return "torch.distributed._composable.fsdp"
    return None


def grad_scaler(version: tuple[int, int]) -> str:
    """The plain gradient scaler's spelling in ``version``."""
    if version >= AMP_GRAD_SCALER:
        return 'torch.amp.GradScaler("cuda")'
    return "torch.cuda.amp.GradScaler()"
