"""Probes: each reads one part of the machine through a :class:`Host` and returns plain data.

A probe never raises for a missing tool or file: it returns what it found and, in
``unknown``, what it could not learn and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from fsdp_skill.doctor.host import Host, read_text

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MATRIX_NAME = re.compile(r"^(GPU|NIC)\d+$")
_NVLINK = re.compile(r"^NV\d+$")

LINK_MEANING = {
    "X": "the device itself",
    "NV": "NVLink (NV<n>: a bonded set of n links)",
    "PIX": "at most one PCIe bridge",
    "PXB": "several PCIe bridges, no host bridge",
    "PHB": "a PCIe host bridge (through the CPU)",
    "NODE": "PCIe host bridges within one NUMA node",
    "SYS": "PCIe plus the link between NUMA nodes (QPI/UPI)",
}
"""What each ``nvidia-smi topo -m`` cell means, fastest first after NVLink."""
LINK_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
"""PCIe paths from the shortest to the longest."""

TORCHRUN_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_NAME",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
)
DISTRIBUTED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "TORCHELASTIC_")
LAUNCHER_VARS = {
    "torchrun": ("TORCHELASTIC_RUN_ID",),
    "slurm": ("SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODELIST"),
    "open-mpi": ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    "mpich / intel-mpi": ("PMI_RANK", "PMI_SIZE"),
}
INTERNAL_INTERFACE_PREFIXES = (
    "docker",
    "veth",
    "br-",
    "virbr",
    "cni",
    "flannel",
    "cali",
    "vxlan",
    "kube",
    "lxc",
    "ifb",
    "tunl",
    "weave",
    "dummy",
)
"""Interfaces that carry container or bridge traffic, never the link between hosts."""


@dataclass
class Probe:
    """What one probe found, and what it could not find out."""

    data: object
    unknown: list[str] = field(default_factory=list)


def nvidia_gpus(host: Host) -> Probe:
    """NVIDIA GPUs and driver version from ``nvidia-smi --query-gpu``."""
    fields = "index,name,memory.total,driver_version,pci.bus_id"
    result = host.run(
        ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
        host.command_timeout,
    )
    if not result.ok:
        return Probe([], [f"NVIDIA GPUs: {result.error}"])
    gpus = []
    for line in (result.stdout or "").splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 5 or not cells[0].isdigit():
            continue
        index, name, memory, driver, bus = cells[0], ",".join(cells[1:-3]), *cells[-3:]
        gpus.append(
            {
                "index": int(index),
                "name": name,
                "memory_bytes": int(float(memory)) * 2**20 if _is_number(memory) else None,
                "driver": driver,
                "pci_bus_id": bus,
                "kind": "cuda",
                "source": "nvidia-smi",
            }
        )
    return Probe(gpus)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _cells(line: str) -> list[str]:
    """The non-empty cells of a ``topo -m`` line (tab-separated, or spaces when pasted)."""
    parts = line.split("\t") if "\t" in line else line.split()
    return [c.strip() for c in parts if c.strip()]


def parse_topology(text: str) -> dict:
    """Parse ``nvidia-smi topo -m``: the link between every pair of GPUs and NICs."""
    columns: list[str] = []
    matrix: dict[str, dict[str, str]] = {}
    nics: dict[str, str] = {}
    for raw in text.splitlines():
        line = _ANSI.sub("", raw).rstrip()
        legend = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", line)
        if legend:
            nics[legend.group(1)] = legend.group(2)
            continue
        cells = _cells(line)
        if not cells:
            continue
        is_row_gpu0 = len(cells) > 1 and cells[1] == "X" and not line[:1].isspace()
        if not columns and cells[0] == "GPU0" and not is_row_gpu0:
            # The header row lists GPU0.. then NIC0.. then the affinity columns; the GPU0 row
            # starts with GPU0 too, but its first cell is X (the device itself).
            for cell in cells:
                if not _MATRIX_NAME.match(cell):
                    break
                columns.append(cell)
            continue
        if columns and _MATRIX_NAME.match(cells[0]):
            matrix[cells[0]] = {
                column: value
                for column, value in zip(columns, cells[1:], strict=False)
                if column != cells[0]
            }
    gpus = sorted((n for n in matrix if n.startswith("GPU")), key=lambda n: int(n[3:]))
    pairs = {}
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            link = matrix.get(a, {}).get(b)
            if link:
                pairs[f"{a}-{b}"] = link
    nic_names = sorted((n for n in matrix if n.startswith("NIC")), key=lambda n: int(n[3:]))
    nearest = {}
    for gpu in gpus:
        links = [(matrix.get(gpu, {}).get(nic), nic) for nic in nic_names]
        ranked = [(LINK_ORDER.index(link), nic, link) for link, nic in links if link in LINK_ORDER]
        if ranked:
            _, nic, link = min(ranked)
            nearest[gpu] = {"nic": nic, "device": nics.get(nic), "link": link}
    kinds: dict[str, int] = {}
    for link in pairs.values():
        kind = "NV" if _NVLINK.match(link) else link
        kinds[kind] = kinds.get(kind, 0) + 1
    return {
        "gpus": len(gpus),
        "nvlink": any(_NVLINK.match(link) for link in pairs.values()),
        "gpu_pairs": pairs,
        "link_counts": kinds,
        "meaning": {k: LINK_MEANING[k] for k in kinds if k in LINK_MEANING},
        "nics": nics,
        "nearest_nic": nearest,
        "matrix": matrix,
    }


def gpu_topology(host: Host) -> Probe:
    """How the GPUs (and NICs) are connected, from ``nvidia-smi topo -m``."""
    result = host.run(["nvidia-smi", "topo", "-m"], host.command_timeout)
    if not result.ok:
        return Probe(None, [f"GPU interconnect: {result.error}"])
    topology = parse_topology(result.stdout or "")
    topology["source"] = "nvidia-smi topo -m"
    if not topology["matrix"]:
        return Probe(None, ["GPU interconnect: nvidia-smi topo -m printed no matrix"])
    return Probe(topology)


def _strip_code(value: str | None) -> str | None:
    """``"4: ACTIVE"`` -> ``"ACTIVE"`` (the kernel prefixes port states with a number)."""
    if value is None:
        return None
    return value.split(":", 1)[1].strip() if ":" in value else value


def infiniband(host: Host) -> Probe:
    """RDMA devices and their ports from ``/sys/class/infiniband``."""
    base = host.sys_path("class", "infiniband")
    if not base.is_dir():
        return Probe([])
    ports = []
    for device in sorted(base.iterdir()):
        port_dir = device / "ports"
        if not port_dir.is_dir():
            continue
        for port in sorted(port_dir.iterdir(), key=lambda p: p.name):
            ports.append(
                {
                    "device": device.name,
                    "port": int(port.name) if port.name.isdigit() else port.name,
                    "state": _strip_code(read_text(port / "state")),
                    "physical_state": _strip_code(read_text(port / "phys_state")),
                    "rate": read_text(port / "rate"),
                    "link_layer": read_text(port / "link_layer"),
                }
            )
    return Probe(ports)


def _interface_kind(path: Path, name: str, if_type: str | None) -> str:
    if if_type == "772" or name == "lo":
        return "loopback"
    if if_type == "32":
        return "ipoib"
    resolved = str(path.resolve())
    if "/devices/virtual/" in resolved or not (path / "device").exists():
        return "virtual"
    return "physical"


def interfaces(host: Host) -> Probe:
    """Network interfaces from ``/sys/class/net``: state, kind, MTU, speed."""
    base = host.sys_path("class", "net")
    if not base.is_dir():
        return Probe([], ["network interfaces: /sys/class/net is not readable"])
    found = []
    for path in sorted(base.iterdir(), key=lambda p: p.name):
        name = path.name
        if_type = read_text(path / "type")
        speed = read_text(path / "speed")
        mtu = read_text(path / "mtu")
        kind = _interface_kind(path, name, if_type)
        state = read_text(path / "operstate") or "unknown"
        found.append(
            {
                "name": name,
                "state": state,
                "kind": kind,
                "mtu": int(mtu) if mtu and mtu.isdigit() else None,
                "speed_mbps": int(speed) if speed and speed.isdigit() else None,
                "candidate": kind != "loopback"
                and state in ("up", "unknown")
                and not name.startswith(INTERNAL_INTERFACE_PREFIXES),
            }
        )
    return Probe(found)


def environment(host: Host) -> Probe:
    """The distributed environment variables set now, and the launcher they point to."""
    env = host.env
    chosen = {
        name: value
        for name, value in env.items()
        if name in TORCHRUN_VARS or name.startswith(DISTRIBUTED_PREFIXES)
    }
    launcher = None
    for name, markers in LAUNCHER_VARS.items():
        present = [m for m in markers if m in env]
        if present:
            launcher = launcher or name
            chosen.update({m: env[m] for m in present})
    if launcher is None and "RANK" in env and "WORLD_SIZE" in env:
        launcher = "unknown launcher (RANK and WORLD_SIZE are set)"
    return Probe({"set": dict(sorted(chosen.items())), "launcher": launcher})
