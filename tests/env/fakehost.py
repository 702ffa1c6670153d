"""Simulated machines for the doctor: a fake ``/sys`` tree, ``nvidia-smi`` output, a fake
torch installation and an environment, bundled into a :class:`Host`."""

from __future__ import annotations

from pathlib import Path

from fsdp_skill.doctor.host import Host, fake_runner

QUERY = "nvidia-smi --query-gpu=index,name,memory.total,driver_version,pci.bus_id"
QUERY += " --format=csv,noheader,nounits"
TOPO = "nvidia-smi topo -m"


def gpu_query(count: int, name: str = "NVIDIA H100 80GB HBM3", mib: int = 81559) -> str:
    return "".join(
        f"{i}, {name}, {mib}, 550.54.15, 00000000:{0x18 + i:02X}:00.0\n" for i in range(count)
    )


def topo_matrix(count: int, link: str, nics: int = 0, far: tuple[int, ...] = ()) -> str:
    """``nvidia-smi topo -m`` as the tool prints it: tab-separated, then the legends.

    GPU i sits under the same PCIe switch (PXB) as NIC ``i * nics // count``; the GPUs in
    ``far`` reach every NIC only across the CPU sockets (SYS).
    """
    names = [f"GPU{i}" for i in range(count)] + [f"NIC{i}" for i in range(nics)]

    def cell(a: str, b: str) -> str:
        if a == b:
            return " X "
        if a.startswith("GPU") and b.startswith("GPU"):
            return link
        if a.startswith("NIC") and b.startswith("NIC"):
            return "SYS"
        gpu, nic = (int(a[3:]), int(b[3:])) if a.startswith("GPU") else (int(b[3:]), int(a[3:]))
        return "PXB" if gpu not in far and nic == gpu * nics // count else "SYS"

    lines = ["\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for row in names:
        tail = "\t0-55,112-167\t0\t\tN/A" if row.startswith("GPU") else ""
        lines.append(row + "\t" + "\t".join(cell(row, col) for col in names) + tail)
    lines += ["", "Legend:", "", "  X    = Self", "  SYS  = Connection traversing PCIe", ""]
    if nics:
        lines += ["NIC Legend:", ""] + [f"  NIC{i}: mlx5_{i}" for i in range(nics)]
    return "\n".join(lines) + "\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def add_interface(root: Path, name: str, state: str = "up", if_type: int = 1, physical=True):
    base = root / "sys" / "class" / "net" / name
    write(base / "operstate", state)
    write(base / "type", str(if_type))
    write(base / "mtu", {1: "1500", 32: "2044"}.get(if_type, "65536"))
    if physical:
        (base / "device").mkdir(parents=True, exist_ok=True)


def add_rdma(root: Path, device: str, state="4: ACTIVE", link_layer="InfiniBand") -> None:
    port = root / "sys" / "class" / "infiniband" / device / "ports" / "1"
    write(port / "state", state)
    write(port / "phys_state", "5: LinkUp")
    write(port / "rate", "400 Gb/sec (4X NDR)")
    write(port / "link_layer", link_layer)


def default_route(root: Path, iface: str) -> None:
    write(
        root / "proc" / "net" / "route",
        "Iface\tDestination\tGateway\tFlags\n"
        f"{iface}\t00000000\t0100000A\t0003\n"
        f"{iface}\t0000000A\t00000000\t0001",
    )


def fake_torch(root: Path, cuda: str | None, backends: tuple[str, ...]) -> Path:
    """A torch package folder with only the files the static probe reads."""
    torch_dir = root / "site-packages" / "torch"
    version = "2.13.0+" + (f"cu{cuda.replace('.', '')}" if cuda else "cpu")
    write(
        torch_dir / "version.py",
        f"__version__ = '{version}'\ncuda = {cuda!r}\nhip = None\nxpu = None",
    )
    cpu_defs = ["USE_DISTRIBUTED"] + [f"USE_C10D_{b.upper()}" for b in backends if b != "nccl"]
    text = f'set_target_properties(torch_cpu PROPERTIES\n  INTERFACE_COMPILE_DEFINITIONS "{";".join(cpu_defs)}"\n)\n'
    if "nccl" in backends:
        text += 'set_target_properties(torch_cuda PROPERTIES\n  INTERFACE_COMPILE_DEFINITIONS "USE_C10D_NCCL"\n)\n'
    write(torch_dir / "share" / "cmake" / "Caffe2" / "Caffe2Targets.cmake", text)
    return torch_dir


def gpu_host(
    root: Path,
    gpus: int = 8,
    link: str = "NV18",
    rdma: str | None = "InfiniBand",
    interfaces: tuple[str, ...] = ("eth0",),
    env: dict[str, str] | None = None,
    cuda: str | None = "12.8",
    far: tuple[int, ...] = (),
) -> Host:
    """A GPU server: NVIDIA GPUs, optional RDMA ports, Ethernet interfaces, a torch build."""
    for name in interfaces:
        add_interface(root, name)
    add_interface(root, "lo", state="unknown", if_type=772, physical=False)
    add_interface(root, "docker0", physical=False)
    default_route(root, interfaces[0])
    nics = 0
    if rdma:
        nics = 2
        for i in range(nics):
            add_rdma(root, f"mlx5_{i}", link_layer=rdma)
    outputs = {QUERY: gpu_query(gpus), TOPO: topo_matrix(gpus, link, nics, far)}
    torch_dir = fake_torch(root, cuda, ("gloo", "nccl") if cuda else ("gloo",))
    return Host(root=root, env=env or {}, run=fake_runner(outputs), torch_dir=torch_dir)


def cpu_host(
    root: Path,
    interfaces: tuple[str, ...] = ("eth0",),
    env: dict[str, str] | None = None,
    backends: tuple[str, ...] = ("gloo",),
) -> Host:
    """A CPU server: no nvidia-smi, Ethernet interfaces, a CPU-only torch build."""
    for name in interfaces:
        add_interface(root, name)
    add_interface(root, "lo", state="unknown", if_type=772, physical=False)
    default_route(root, interfaces[0])
    torch_dir = fake_torch(root, None, backends)
    return Host(root=root, env=env or {}, run=fake_runner({}), torch_dir=torch_dir)
