"""``pip install .`` (not editable) ships everything the tools read.

The wheel is built from a copy of the sources, installed into a fresh virtual environment
that has neither torch nor this checkout on its path, and the fast-path tools, ``plan`` with
a bundled model and ``verify`` are run from there, as a newcomer following the Quickstart
would. The runtime dependencies come from this test environment (linked, not downloaded),
so the test needs no network.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_NOT_NEEDED = {"mcp"}  # only `fsdp-skill mcp` imports it; that command is not run here


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)


def _build_wheel(out: Path) -> Path:
    source = out / "source"
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(
        REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["--disable-pip-version-check", "-w", str(out), str(source)]
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


def _requirements(dist: str, seen: set[str]) -> None:
    """``dist`` and what it needs at run time (no extras), recursively, into ``seen``."""
    key = re.sub(r"[-_.]+", "-", dist).lower()
    if key in seen or key in _NOT_NEEDED:
        return
    seen.add(key)
    for req in metadata.requires(dist) or []:
        if "extra ==" in req:
            continue
        name = re.match(r"[A-Za-z0-9._-]+", req).group(0)
        marker = req.split(";", 1)[1] if ";" in req else ""
        if "python_version" in marker and not _marker_holds(marker):
            continue
        _requirements(name, seen)


def _marker_holds(marker: str) -> bool:
    from packaging.markers import Marker

    return Marker(marker).evaluate()


def _link_dependencies(wheel: Path, deps: Path) -> None:
    """Link the top-level modules of the wheel's run-time dependencies into ``deps``."""
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [
            line.split(":", 1)[1].strip()
            for line in archive.read(meta).decode().splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line
        ]
    seen: set[str] = set()
    for req in requires:
        marker = req.split(";", 1)[1] if ";" in req else ""
        if marker and not _marker_holds(marker):
            continue
        _requirements(re.match(r"[A-Za-z0-9._-]+", req).group(0), seen)
    deps.mkdir()
    for name in sorted(seen):
        dist = metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in sorted(tops):
            if top.endswith((".dist-info", ".data")) or top in ("..", "__pycache__", "bin"):
                continue
            origin = Path(dist.locate_file(top))
            if origin.exists() and not (deps / top).exists():
                (deps / top).symlink_to(origin)


@pytest.mark.slow
def test_the_built_wheel_runs_every_tool_without_torch_or_the_checkout(tmp_path: Path):
    wheel = _build_wheel(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "fsdp_skill/plan/configs/llama-3-8b.json" in names

    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)]).returncode == 0
    python = venv / "bin" / "python"
    installed = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps"]
        + ["--no-index", "-q", "--disable-pip-version-check", str(wheel)]
    )
    assert installed.returncode == 0, installed.stderr
    site = Path(
        _run([str(python), "-c", "import site; print(site.getsitepackages()[0])"]).stdout.strip()
    )
    _link_dependencies(wheel, tmp_path / "deps")
    (site / "test-dependencies.pth").write_text(str(tmp_path / "deps") + "\n")

    work = tmp_path / "work"
    work.mkdir()
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "FSDP_SKILL_CACHE": str(tmp_path / "cache"),
    }
    where = _run(
        [str(python), "-c", "import fsdp_skill; print(fsdp_skill.__file__)"], env=env, cwd=work
    )
    assert where.stdout.startswith(str(site)), where
    assert _run([str(python), "-c", "import torch"], env=env, cwd=work).returncode != 0

    (work / "train.py").write_text(
        "import torch.distributed as dist\n\n"
        "dist.init_process_group('gloo')\n"
        "if dist.get_rank() == 0:\n"
        "    dist.barrier()\n"
    )
    tool = str(venv / "bin" / "fsdp-skill")
    runs = {
        "plan": ([tool, "plan", "--model", "llama-3-8b", "--gpus", "8", "--gpu-memory", "80GB"], 0),
        "search": ([tool, "search", "reshard after forward", "--json"], 0),
        "show": ([tool, "show", "pitfalls"], 0),
        "lint": ([tool, "lint", "train.py"], 1),
        "explain": ([tool, "explain", "Default process group has not been initialized"], 0),
        "verify": ([tool, "verify"], 0),
        "install": ([tool, "install", "--dest", str(tmp_path / "skills")], 0),
        "hang": ([tool, "hang", str(REPO / "tests/diagnose/fixtures/rank_killed/torchrun.log")], 1),
    }
    for name, (cmd, code) in runs.items():
        result = _run(cmd, env=env, cwd=work)
        assert result.returncode == code, (name, result.stdout[-2000:], result.stderr[-2000:])
        assert "Traceback" not in result.stderr, (name, result.stderr)
    assert "FSDP003" in _run([tool, "lint", "train.py"], env=env, cwd=work).stdout
    # the Hugging Face config checks read their mined data (and YAML) from the wheel too
    real = REPO / "tests/lint/hfconfig/real/accelerate-tests-latest-fsdp.yaml"
    (work / "fsdp.yaml").write_text(real.read_text())
    (work / "config.json").write_text('{"model_type": "llama"}')
    configs = _run([tool, "lint", "fsdp.yaml", "--model-config", "config.json"], env=env, cwd=work)
    assert configs.returncode == 1 and "FSDP105" in configs.stdout, configs
    verified = _run([tool, "verify"], env=env, cwd=work)
    assert "torch" in verified.stdout and "skipped" in verified.stdout, verified.stdout
