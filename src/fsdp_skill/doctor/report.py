"""Assemble the environment report: run the probes (in parallel, each bounded), then advise."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from fsdp_skill.doctor import advice, probes, topics, torch_info, varinfo
from fsdp_skill.doctor.host import Host, read_text
from fsdp_skill.errors import UsageError

DEEP_TIMEOUT_S = 60.0


def default_route(host: Host) -> str | None:
    """The interface of the IPv4 default route, from ``/proc/net/route``."""
    text = read_text(host.root / "proc" / "net" / "route")
    for line in (text or "").splitlines()[1:]:
        cells = line.split()
        if len(cells) > 2 and cells[1] == "00000000":
            return cells[0]
    return None


def _merge_deep(static: dict, deep: dict) -> dict:
    merged = dict(static)
    merged.update(
        {
            "imported": True,
            "version": deep.get("version", static.get("version")),
            "cuda_available": deep.get("cuda_available"),
            "xpu_available": deep.get("xpu_available"),
            "distributed": deep.get("distributed"),
            "backends": deep.get("backends", static.get("backends", {})),
        }
    )
    if deep.get("cudnn_version") is not None:
        merged["cudnn_version"] = deep["cudnn_version"]
    nccl_wheel = static.get("backends", {}).get("nccl", {}).get("version")
    if merged["backends"].get("nccl") and not merged["backends"]["nccl"].get("version"):
        merged["backends"]["nccl"]["version"] = nccl_wheel
    return merged


def collect(host: Host, deep: bool = False, deep_timeout: float = DEEP_TIMEOUT_S) -> dict:
    """Every fact the doctor can read on ``host``; ``unknown`` lists what it could not."""
    with ThreadPoolExecutor(max_workers=6) as pool:
        jobs = {
            "gpus": pool.submit(probes.nvidia_gpus, host),
            "topology": pool.submit(probes.gpu_topology, host),
            "infiniband": pool.submit(probes.infiniband, host),
            "interfaces": pool.submit(probes.interfaces, host),
            "env": pool.submit(probes.environment, host),
            "torch": pool.submit(torch_info.static_info, host),
        }
        deep_job = pool.submit(torch_info.deep_info, host, deep_timeout) if deep else None
        results = {name: job.result() for name, job in jobs.items()}
        deep_result = deep_job.result() if deep_job else (None, None)

    unknown: list[str] = []
    for name in ("gpus", "topology", "infiniband", "interfaces", "env"):
        unknown.extend(results[name].unknown)
    torch = results["torch"]
    devices = list(results["gpus"].data)
    deep_facts, deep_error = deep_result
    if deep_facts is not None:
        torch = _merge_deep(torch, deep_facts)
        if not devices:
            devices = deep_facts.get("devices", [])
    elif deep_error:
        unknown.append(f"torch runtime: {deep_error}")
    if not torch.get("installed"):
        unknown.append("torch is not installed here: backend availability and versions are unknown")
    elif not torch.get("imported"):
        unknown.append(
            "torch was not imported (it takes seconds): backends are read from its build "
            "definitions; run `fsdp-skill env --deep` to ask torch itself"
        )
    return {
        "torch": torch,
        "devices": devices,
        "gpu_probe_worked": results["gpus"].unknown == [] or bool(devices),
        "topology": results["topology"].data,
        "infiniband": results["infiniband"].data,
        "interfaces": results["interfaces"].data,
        "default_route": default_route(host),
        "env": results["env"].data,
        "unknown": unknown,
    }


def _cuda_section(facts: dict) -> dict:
    torch = facts["torch"]
    drivers = sorted({d["driver"] for d in facts["devices"] if d.get("driver")})
    available = torch.get("cuda_available")
    if available is None and torch.get("installed"):
        cuda_gpus = [d for d in facts["devices"] if d.get("kind") == "cuda"]
        available = bool(torch.get("cuda_build") and cuda_gpus) if cuda_gpus else False
    return {
        "build": torch.get("cuda_build"),
        "driver": drivers[0] if len(drivers) == 1 else (drivers or None),
        "available": available if torch.get("installed") else None,
        "cudnn": torch.get("cudnn_version"),
    }


def build_report(
    host: Host | None = None,
    for_topic: str | None = None,
    deep: bool = False,
    deep_timeout: float = DEEP_TIMEOUT_S,
) -> dict:
    """The full ``env`` report (the DESIGN §3 shape plus the details behind it)."""
    if for_topic is not None and for_topic not in topics.TOPICS:
        raise UsageError(f"unknown topic {for_topic!r}; choose from {', '.join(topics.TOPICS)}")
    facts = collect(host or Host(), deep=deep, deep_timeout=deep_timeout)
    recommendation = advice.recommend_backend(facts)
    backend = recommendation["backend"]
    torch = facts["torch"]
    backends = torch.get("backends", {})
    report = {
        "torch": {k: v for k, v in torch.items() if k != "backends"},
        "cuda": _cuda_section(facts),
        "nccl": backends.get("nccl", {"available": None, "version": None}),
        "gloo": backends.get("gloo", {"available": None, "version": None}),
        "mpi": backends.get("mpi", {"available": None, "version": None}),
        "xccl": backends.get("xccl", {"available": None, "version": None}),
        "devices": facts["devices"],
        "interconnect": facts["topology"],
        "infiniband": facts["infiniband"],
        "interfaces": facts["interfaces"],
        "default_route": facts["default_route"],
        "launcher": facts["env"]["launcher"],
        "env_vars": facts["env"]["set"],
        "backend_recommendation": recommendation,
        "exports": advice.interface_exports(facts, backend),
        "warnings": advice.warnings(facts, backend, varinfo.renamed()),
        "unknown": facts["unknown"],
    }
    if for_topic is not None:
        report["for"] = topics.advice(for_topic, backend, facts["env"]["set"], torch.get("version"))
    return report
