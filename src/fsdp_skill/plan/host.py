"""This machine's host memory and GPU count, read from the kernel (no torch), so that a plan
for this machine can check CPU offload against the memory it really has."""

from __future__ import annotations

import re
from pathlib import Path

MEMINFO = Path("/proc/meminfo")
# One directory per GPU the NVIDIA driver has bound (its PCI address), and the device nodes.
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")
DEV = Path("/dev")


def memory_total(meminfo: Path = MEMINFO) -> int | None:
    """Bytes of RAM (``MemTotal``), or None where /proc/meminfo cannot be read."""
    try:
        text = meminfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def gpu_count(driver_dir: Path = NVIDIA_GPUS, dev: Path = DEV) -> int:
    """NVIDIA GPUs on this machine (0 when there is no driver or none can be seen)."""
    try:
        bound = sum(1 for p in driver_dir.iterdir() if p.is_dir())
    except OSError:
        bound = 0
    try:
        nodes = sum(1 for p in dev.iterdir() if re.fullmatch(r"nvidia\d+", p.name))
    except OSError:
        nodes = 0
    return max(bound, nodes)


def local_memory_for(gpus: int, nodes: int) -> int | None:
    """This machine's RAM when the plan is for it (one node, no more GPUs than it has)."""
    if nodes != 1 or gpus > gpu_count():
        return None
    return memory_total()
