"""What the probed facts imply: the backend to use, the variables to set, the warnings.

The backend choice follows the rule of thumb of the torch.distributed documentation
("Which backend to use?"): NCCL for GPU training (the only backend with InfiniBand and
GPUDirect support, and the fastest over Ethernet too), XCCL for Intel GPUs, Gloo for CPU
training, and for CPU hosts on InfiniBand: Gloo if IP over InfiniBand is configured,
otherwise MPI.
"""

from __future__ import annotations

from collections.abc import Mapping

from fsdp_skill.knowledge import in_range

BACKEND_DOCS = "https://docs.pytorch.org/docs/stable/distributed.html#which-backend-to-use"
NCCL_ENV_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
GPUDIRECT_DOCS = (
    "https://docs.nvidia.com/networking/display/GPUDirectRDMAv18/"
    "System+Requirements+and+Recommendations"
)
_TRUE = ("1", "true", "yes", "on")


def _names(items: list[dict], key: str = "name") -> str:
    return ", ".join(str(i[key]) for i in items)


def active_rdma_ports(ib_ports: list[dict]) -> list[dict]:
    return [p for p in ib_ports if (p.get("state") or "").upper() == "ACTIVE"]


def recommend_backend(facts: Mapping) -> dict:
    """The backend to pass to ``init_process_group`` on this host, and why."""
    devices = facts["devices"]
    torch = facts["torch"]
    cuda = [d for d in devices if d.get("kind") == "cuda"]
    xpu = [d for d in devices if d.get("kind") == "xpu"]
    ports = active_rdma_ports(facts["infiniband"])
    native_ib = [p for p in ports if (p.get("link_layer") or "InfiniBand") == "InfiniBand"]
    roce = [p for p in ports if p.get("link_layer") == "Ethernet"]
    ipoib = [i for i in facts["interfaces"] if i["kind"] == "ipoib" and i["candidate"]]
    rdma = ", ".join(sorted({p["device"] for p in ports}))

    if cuda:
        gpus = f"{len(cuda)} NVIDIA GPU(s) ({cuda[0]['name']})"
        if native_ib:
            link = (
                f"InfiniBand ports are active ({rdma}): NCCL is the only backend that uses "
                "InfiniBand and GPUDirect RDMA."
            )
        elif roce:
            link = (
                f"RDMA over Converged Ethernet (RoCE) ports are active ({rdma}): NCCL drives "
                "them through its InfiniBand verbs transport."
            )
        else:
            link = (
                "No active InfiniBand/RDMA port: between hosts NCCL falls back to TCP sockets "
                "over Ethernet, and it is still the fastest backend for GPU tensors there."
            )
        why = f"{gpus} found. NCCL is the backend for CUDA tensors. {link}"
        if torch.get("hip_build"):
            why += " On ROCm builds the name 'nccl' selects RCCL."
        return {
            "backend": "nccl",
            "why": why,
            "fallback": "gloo (much slower on GPU tensors; use it only if NCCL itself fails)",
            "init": 'dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))',
            "source": BACKEND_DOCS,
        }
    if xpu:
        return {
            "backend": "xccl",
            "why": f"{len(xpu)} Intel GPU(s) found: XCCL is the backend for XPU tensors.",
            "fallback": "gloo",
            "init": 'dist.init_process_group("xccl")',
            "source": BACKEND_DOCS,
        }
    seen = "no GPU found" if facts["gpu_probe_worked"] else "no GPU detected"
    if ports and not ipoib:
        mpi = torch.get("backends", {}).get("mpi", {}).get("available")
        why = (
            f"CPU training ({seen}) on InfiniBand ({rdma}) without IP over InfiniBand: the rule "
            "of thumb is MPI, which reaches InfiniBand directly."
        )
        if mpi:
            return {
                "backend": "mpi",
                "why": why,
                "fallback": "gloo over Ethernet",
                "init": 'dist.init_process_group("mpi")',
                "source": BACKEND_DOCS,
            }
        return {
            "backend": "gloo",
            "why": why + " This torch was not built with MPI, so use Gloo over Ethernet, or "
            "configure IP over InfiniBand and point GLOO_SOCKET_IFNAME at it.",
            "fallback": None,
            "init": 'dist.init_process_group("gloo")',
            "source": BACKEND_DOCS,
        }
    why = f"CPU training ({seen}): Gloo is the backend for CPU tensors."
    if ipoib:
        why += f" IP over InfiniBand is up ({_names(ipoib)}): let Gloo use it."
    return {
        "backend": "gloo",
        "why": why,
        "fallback": "mpi (only if torch was built with it)",
        "init": 'dist.init_process_group("gloo")',
        "source": BACKEND_DOCS,
    }


def _socket_var(backend: str) -> str:
    return "NCCL_SOCKET_IFNAME" if backend == "nccl" else "GLOO_SOCKET_IFNAME"


def ifname_matches(value: str, names: list[str], nccl: bool) -> list[str]:
    """Interfaces an ``*_SOCKET_IFNAME`` value selects.

    NCCL reads a comma-separated list of name prefixes, ``^`` excludes and ``=`` asks for
    exact names; Gloo takes exact names, comma-separated.
    """
    if not nccl:
        wanted = {v.strip() for v in value.split(",") if v.strip()}
        return [n for n in names if n in wanted]
    exclude = value.startswith("^")
    body = value[1:] if exclude else value
    exact = body.startswith("=")
    body = body[1:] if exact else body
    patterns = [p.strip() for p in body.split(",") if p.strip()]

    def hit(name: str) -> bool:
        return any(name == p if exact else name.startswith(p) for p in patterns)

    return [n for n in names if hit(n) != exclude]


def interface_exports(facts: Mapping, backend: str) -> list[dict]:
    """Interface variables worth setting on this host (none if already set)."""
    env = facts["env"]["set"]
    candidates = [i for i in facts["interfaces"] if i["candidate"]]
    if not candidates:
        return []
    ipoib = [i for i in candidates if i["kind"] == "ipoib"]
    route = facts.get("default_route")
    exports = []
    wanted = [_socket_var(backend)]
    if backend == "nccl":
        wanted.append("GLOO_SOCKET_IFNAME")
    for var in wanted:
        if var in env:
            continue
        if backend == "gloo" and ipoib:
            choice, why = ipoib[0]["name"], "IP over InfiniBand is faster than Ethernet for Gloo"
        elif len(candidates) == 1:
            choice = candidates[0]["name"]
            why = "the only interface up besides loopback and container bridges"
        elif route and any(i["name"] == route for i in candidates):
            choice = route
            why = (
                f"the interface of the default route, one of {len(candidates)} candidates "
                f"({_names(candidates)}): pick the one on the network your hosts share"
            )
        else:
            choice = candidates[0]["name"]
            why = f"one of {_names(candidates)}: pick the one on the network your hosts share"
        used_by = (
            "NCCL bootstrap and socket traffic"
            if var.startswith("NCCL")
            else "Gloo (and torch's CPU-side collectives)"
        )
        exports.append({"name": var, "value": choice, "why": f"{used_by}: {why}"})
    return exports


def gpus_far_from_nics(topology: Mapping) -> list[str]:
    """GPUs whose nearest NIC in ``nvidia-smi topo -m`` is a cross-socket (SYS) hop away."""
    nearest = topology.get("nearest_nic", {})
    return [gpu for gpu, nic in nearest.items() if nic["link"] == "SYS"]


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in _TRUE


def warnings(
    facts: Mapping, backend: str, renamed: Mapping[str, tuple[str, str]] | None = None
) -> list[dict]:
    """Problems in the current setup that would slow, break or hang a distributed job.

    ``renamed`` maps old variable names to ``(new name, torch version of the rename)``.
    """
    renamed = renamed or {}
    env: Mapping[str, str] = facts["env"]["set"]
    launcher = facts["env"]["launcher"]
    names = [i["name"] for i in facts["interfaces"]]
    candidates = [i for i in facts["interfaces"] if i["candidate"]]
    cuda = [d for d in facts["devices"] if d.get("kind") == "cuda"]
    topology = facts.get("topology") or {}
    ports = facts["infiniband"]
    torch = facts["torch"]
    found: list[dict] = []

    def warn(wid: str, message: str) -> None:
        found.append({"id": wid, "message": message})

    var = _socket_var(backend)
    if len(candidates) > 1 and var not in env:
        warn(
            "several-interfaces",
            f"{len(candidates)} network interfaces are up ({_names(candidates)}) and {var} "
            "is not set: the backend may pick one the other hosts cannot reach, and the job "
            f"hangs at init. Set {var} to the interface of the network the hosts share.",
        )
    for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        value = env.get(name)
        if value and names and not ifname_matches(value, names, name.startswith("NCCL")):
            warn(
                "ifname-matches-nothing",
                f"{name}={value} matches no interface on this host ({', '.join(names)}): "
                "init will fail or hang here.",
            )
    if topology.get("nvlink") and _truthy(env.get("NCCL_P2P_DISABLE")):
        warn(
            "p2p-disabled-on-nvlink",
            "NCCL_P2P_DISABLE is set on a machine whose GPUs are linked by NVLink: NCCL stops "
            "using NVLink and copies through host memory, much slower. Unset it unless "
            "it works around a known driver problem.",
        )
    active = active_rdma_ports(ports)
    if cuda and active and _truthy(env.get("NCCL_IB_DISABLE")):
        warn(
            "ib-disabled",
            f"NCCL_IB_DISABLE is set although RDMA ports are active ({_names(active, 'device')}):"
            " NCCL uses TCP sockets between hosts instead of InfiniBand/RoCE.",
        )
    if ports and not active:
        warn(
            "rdma-ports-down",
            f"RDMA devices exist ({_names(ports, 'device')}) but no port is ACTIVE: NCCL will "
            "fall back to sockets. Check the cable/subnet manager (ibstat).",
        )
    direct = launcher and launcher != "torchrun"
    if direct and "MASTER_ADDR" not in env:
        warn(
            "master-addr-unset",
            f"Launched by {launcher}, not torchrun, and MASTER_ADDR is unset: the env:// "
            "rendezvous of init_process_group cannot find rank 0. Export MASTER_ADDR (rank 0's "
            "host) and MASTER_PORT, or start the script through torchrun, which sets them.",
        )
    elif direct and "MASTER_PORT" not in env:
        warn(
            "master-port-unset",
            f"Launched by {launcher} but MASTER_PORT is unset: export a free port on rank 0's "
            "host for the env:// rendezvous.",
        )
    if direct and launcher in ("slurm", "open-mpi", "mpich / intel-mpi") and "RANK" not in env:
        source = {
            "slurm": "SLURM_PROCID / SLURM_NTASKS",
            "open-mpi": "OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE",
        }.get(launcher, "PMI_RANK / PMI_SIZE")
        warn(
            "rank-unset",
            f"Launched by {launcher} but RANK and WORLD_SIZE are unset: env:// needs them. "
            f"Export them from {source}, or start the script through torchrun.",
        )
    rank_vars = [v for v in ("RANK", "WORLD_SIZE") if v in env]
    if len(rank_vars) == 1:
        missing = "WORLD_SIZE" if rank_vars[0] == "RANK" else "RANK"
        warn(
            "rank-vars-incomplete",
            f"{rank_vars[0]} is set but {missing} is not: the env:// rendezvous needs both.",
        )
    if (
        cuda
        and torch.get("installed")
        and not torch.get("cuda_build")
        and not torch.get("hip_build")
    ):
        warn(
            "cpu-only-torch",
            f"This host has NVIDIA GPUs but torch {torch.get('version')} is a CPU-only build: "
            "it can use neither the GPUs nor NCCL. Install a CUDA build of torch.",
        )
    elif cuda and torch.get("backends", {}).get("nccl", {}).get("available") is False:
        warn("nccl-missing", "This torch build has no NCCL backend although GPUs are present.")
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if cuda and visible is not None and visible.strip() in ("", "-1"):
        warn(
            "no-visible-gpus",
            f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU from this process.",
        )
    local = env.get("LOCAL_WORLD_SIZE", "")
    if cuda and local.isdigit():
        mask = env.get("CUDA_VISIBLE_DEVICES")
        visible = len(cuda)
        if mask:
            visible = min(visible, len([d for d in mask.split(",") if d.strip()]))
        if int(local) > visible > 0:
            shown = f" (CUDA_VISIBLE_DEVICES={mask})" if mask else ""
            warn(
                "more-ranks-than-gpus",
                f"LOCAL_WORLD_SIZE={local} but only {visible} GPU(s) are visible here{shown}: "
                "ranks would share a GPU, which NCCL refuses (duplicate GPU). Start one process "
                "per GPU (torchrun --nproc-per-node).",
            )
    far = gpus_far_from_nics(topology) if active else []
    if far:
        warn(
            "gpus-far-from-nics",
            f"{', '.join(far)} reach every NIC only across the link between CPU sockets (SYS): "
            "their traffic to other hosts crosses the CPUs, and GPUDirect RDMA works best with "
            f"the NIC and GPU under the same PCIe root complex ({GPUDIRECT_DOCS}).",
        )
    version = torch.get("version") or ""
    for old, (new, since) in sorted(renamed.items()):
        if old in env and new not in env and (not version or in_range(version, since)):
            warn(
                "renamed-variable",
                f"{old} is the name torch used before {since}; this torch "
                f"({version or 'version unknown'}) reads {new}. Set {new}={env[old]} instead.",
            )
    kinds = {(d.get("name"), d.get("memory_bytes")) for d in cuda}
    if len(kinds) > 1:
        warn(
            "mixed-gpus",
            "The GPUs differ in model or memory: every FSDP rank holds the same shard sizes, "
            "so the smallest GPU sets the memory limit and the slowest sets the step time.",
        )
    return found
