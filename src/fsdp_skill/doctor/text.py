"""The ``env`` report as text for a terminal."""

from __future__ import annotations


def _yes(value: object) -> str:
    return {True: "yes", False: "no", None: "unknown"}.get(value, str(value))  # type: ignore[arg-type]


def _gib(n: int | None) -> str:
    return f"{n / 2**30:.0f} GiB" if n else "? GiB"


def _ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in spans)


def _torch_line(report: dict) -> str:
    torch = report["torch"]
    if not torch.get("installed"):
        return "torch       not installed"
    build = (
        f"CUDA {torch['cuda_build']}"
        if torch.get("cuda_build")
        else f"ROCm {torch['hip_build']}"
        if torch.get("hip_build")
        else f"XPU {torch['xpu_build']}"
        if torch.get("xpu_build")
        else "CPU-only"
    )
    how = "asked torch" if torch.get("imported") else "read from its files"
    return f"torch       {torch.get('version')} ({build} build; {how})"


def format_report(report: dict) -> str:
    """Readable summary: facts first, then the recommendation, exports and warnings."""
    cuda = report["cuda"]
    lines = [_torch_line(report)]
    lines.append(
        f"CUDA        build {cuda['build'] or '-'}, driver {cuda['driver'] or '-'}, "
        f"usable {_yes(cuda['available'])}, cuDNN {cuda['cudnn'] or '-'}"
    )
    backends = "  ".join(
        f"{name} {_yes(report[name].get('available'))}"
        + (f" ({report[name]['version']})" if report[name].get("version") else "")
        for name in ("nccl", "gloo", "mpi", "xccl")
    )
    lines.append(f"backends    {backends}")
    groups: dict[tuple, list[int]] = {}
    for d in report["devices"]:
        key = (d.get("kind"), d["name"], _gib(d.get("memory_bytes")))
        groups.setdefault(key, []).append(d["index"])
    for (kind, name, memory), indexes in groups.items():
        where = _ranges(indexes)
        lines.append(f"devices     {len(indexes)} x {name} {memory} ({kind}:{where})")
    if not groups:
        lines.append("devices     none found")
    topo = report["interconnect"]
    if topo:
        counts = ", ".join(f"{k} x{v}" for k, v in topo["link_counts"].items())
        lines.append(f"GPU links   {'NVLink' if topo['nvlink'] else 'no NVLink'} ({counts})")
    ports = report["infiniband"]
    if ports:
        for p in ports:
            lines.append(
                f"RDMA        {p['device']} port {p['port']}: {p['state']}, "
                f"{p.get('link_layer') or '?'}, {p.get('rate') or '?'}"
            )
    else:
        lines.append("RDMA        no InfiniBand/RoCE device")
    for i in report["interfaces"]:
        mark = " [default route]" if i["name"] == report.get("default_route") else ""
        lines.append(f"interface   {i['name']}: {i['state']}, {i['kind']}, mtu {i['mtu']}{mark}")
    lines.append(f"launcher    {report['launcher'] or 'none detected'}")
    if report["env_vars"]:
        for name, value in report["env_vars"].items():
            lines.append(f"set         {name}={value}")
    else:
        lines.append("set         no distributed variable is set")
    rec = report["backend_recommendation"]
    lines += ["", f"backend: {rec['backend']}", f"  {rec['why']}", f"  {rec['init']}"]
    if rec.get("fallback"):
        lines.append(f"  fallback: {rec['fallback']}")
    if report["exports"]:
        lines += ["", "set these:"]
        for e in report["exports"]:
            lines.append(f"  export {e['name']}={e['value']}    # {e['why']}")
    if report["warnings"]:
        lines += ["", "warnings:"]
        lines += [f"  ! {w['message']}" for w in report["warnings"]]
    if report["unknown"]:
        lines += ["", "could not tell:"]
        lines += [f"  - {u}" for u in report["unknown"]]
    topic = report.get("for")
    if topic:
        lines += ["", f"to investigate {topic['topic']} ({topic['backend']} job), export:"]
        for e in topic["exports"]:
            note = "" if e["applies"] else "  [NCCL jobs only]"
            if e.get("needs_torch"):
                note = f"  [needs torch {e['needs_torch']}]"
            if e.get("current") is not None:
                note += f"  [now {e['current']!r}]"
            lines.append(f"  export {e['name']}={e['value']}{note}")
            lines.append(f"      {e['shows']}")
    return "\n".join(lines)
