"""What the installed torch supports, read from its files (fast) or by importing it (deep).

Importing torch takes seconds, so the default probe reads what the package ships instead:
``torch/version.py`` (the CUDA / ROCm / XPU versions it was built for), the compile
definitions it exports for C++ builds (``USE_C10D_GLOO``, ``USE_C10D_NCCL``, ...: which
process-group backends were compiled in) and the versions of the NCCL and cuDNN wheels it
loads. The deep probe imports torch in a child process with a deadline and asks it directly.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
from pathlib import Path

from fsdp_skill.doctor.host import Host

BACKENDS = ("nccl", "gloo", "mpi", "xccl", "ucc")
_DEFINE = re.compile(r'INTERFACE_COMPILE_DEFINITIONS\s+"([^"]*)"')
_CUDA_SUFFIXES = ("cu13", "cu12", "cu11")


def find_torch(host: Host) -> Path | None:
    """The torch package folder, found without importing torch."""
    if host.torch_dir is None or host.torch_dir is False:
        return None
    if isinstance(host.torch_dir, Path):
        return host.torch_dir if host.torch_dir.is_dir() else None
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _version_file(torch_dir: Path) -> dict[str, object]:
    """The literal assignments of ``torch/version.py``."""
    try:
        tree = ast.parse((torch_dir / "version.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    values: dict[str, object] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and value is not None:
            try:
                values[target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return values


def _compiled_backends(torch_dir: Path) -> set[str] | None:
    """Backends named by ``USE_C10D_<NAME>`` in torch's exported CMake targets; None if unknown."""
    files = sorted((torch_dir / "share" / "cmake").glob("*/*Targets*.cmake"))
    if not files:
        return None
    found: set[str] = set()
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for group in _DEFINE.findall(text):
            for define in group.split(";"):
                if define.startswith("USE_C10D_"):
                    found.add(define.removeprefix("USE_C10D_").lower())
    return found


def _wheel_version(stem: str) -> str | None:
    """Version of an NVIDIA library wheel (``nvidia-nccl-cu12`` ...) if one is installed."""
    from importlib import metadata  # only CUDA builds get here; the import costs ~50 ms

    for suffix in _CUDA_SUFFIXES:
        try:
            return metadata.version(f"nvidia-{stem}-{suffix}")
        except metadata.PackageNotFoundError:
            continue
    return None


def static_info(host: Host) -> dict:
    """Torch facts read from its installed files, without importing it."""
    torch_dir = find_torch(host)
    if torch_dir is None:
        return {"installed": False, "imported": False}
    version = _version_file(torch_dir)
    compiled = _compiled_backends(torch_dir)
    cuda = version.get("cuda")
    info: dict = {
        "installed": True,
        "imported": False,
        "version": version.get("__version__"),
        "path": str(torch_dir),
        "cuda_build": cuda,
        "hip_build": version.get("hip"),
        "xpu_build": version.get("xpu"),
        "cudnn_version": _wheel_version("cudnn") if cuda else None,
        "backends": {},
    }
    for name in BACKENDS:
        if compiled is None:
            available = None
        else:
            available = name in compiled
        entry: dict = {"available": available, "version": None, "checked": "build definitions"}
        if compiled is None:
            entry["checked"] = "unknown: torch ships no CMake target files"
        info["backends"][name] = entry
    if cuda or version.get("hip"):
        info["backends"]["nccl"]["version"] = _wheel_version("nccl")
    return info


_DEEP_PROBE = r"""
import json, sys
out = {}
import torch
out["version"] = torch.__version__
out["cuda_build"] = torch.version.cuda
out["hip_build"] = getattr(torch.version, "hip", None)
out["xpu_build"] = getattr(torch.version, "xpu", None)
out["cuda_available"] = torch.cuda.is_available()
devices = []
if out["cuda_available"]:
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        devices.append({"index": i, "name": p.name, "memory_bytes": int(p.total_memory),
                        "capability": f"{p.major}.{p.minor}", "kind": "cuda"})
xpu = getattr(torch, "xpu", None)
out["xpu_available"] = bool(xpu is not None and xpu.is_available())
if out["xpu_available"]:
    for i in range(xpu.device_count()):
        p = xpu.get_device_properties(i)
        devices.append({"index": i, "name": p.name, "memory_bytes": int(p.total_memory),
                        "kind": "xpu"})
out["devices"] = devices
cudnn = torch.backends.cudnn
out["cudnn_version"] = cudnn.version() if cudnn.is_available() else None
import torch.distributed as dist
backends = {}
for name in ("nccl", "gloo", "mpi", "xccl", "ucc"):
    check = getattr(dist, f"is_{name}_available", None)
    backends[name] = {"available": bool(check()) if check and dist.is_available() else False,
                      "version": None, "checked": "imported torch"}
if backends["nccl"]["available"] and out["cuda_available"]:
    try:
        v = torch.cuda.nccl.version()
        backends["nccl"]["version"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:
        pass
out["backends"] = backends
out["distributed"] = dist.is_available()
json.dump(out, sys.stdout)
"""


def deep_info(host: Host, timeout: float) -> tuple[dict | None, str | None]:
    """Import torch in a child process and ask it; returns (facts, reason it failed)."""
    env = dict(host.env)
    try:
        done = subprocess.run(
            [host.python, "-c", _DEEP_PROBE],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"importing torch did not finish within {timeout:g} s"
    except OSError as exc:
        return None, f"could not start {host.python}: {exc.strerror or exc}"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return None, f"importing torch failed: {lines[-1] if lines else done.returncode}"
    try:
        return json.loads(done.stdout), None
    except ValueError:
        return None, "the torch probe printed something that is not JSON"
