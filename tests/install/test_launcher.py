"""The bundle's scripts/fsdp runs the toolkit whatever Python is first on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.cli import fsdp


def _fake_python(bin_dir: Path, name: str) -> None:
    """A `python3` that exists but cannot import fsdp_skill."""
    script = bin_dir / name
    script.write_text("#!/bin/sh\necho 'ModuleNotFoundError: fsdp_skill' >&2\nexit 1\n")
    script.chmod(0o755)


def test_launcher_uses_the_installing_python(tmp_path: Path):
    assert fsdp("install", "--dest", tmp_path).code == 0
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_python(bin_dir, "python3")
    _fake_python(bin_dir, "python")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(
        [str(tmp_path / "pytorch-fsdp" / "scripts" / "fsdp"), "--help"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "Usage: fsdp-skill" in result.stdout


def test_launcher_without_any_usable_python_says_how_to_fix(tmp_path: Path):
    assert fsdp("install", "--dest", tmp_path).code == 0
    launcher = tmp_path / "pytorch-fsdp" / "scripts" / "fsdp"
    text = launcher.read_text().replace(sys.executable, str(tmp_path / "gone" / "python"))
    launcher.write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_python(bin_dir, "python3")
    _fake_python(bin_dir, "python")
    sh = shutil.which("sh") or "/bin/sh"
    result = subprocess.run(
        [sh, str(launcher), "--help"],
        capture_output=True,
        text=True,
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
    )
    assert result.returncode == 2
    # The package is not on a registry: the way that works is installing this repository.
    assert "from a checkout of this repository: pip install ." in result.stderr
    assert "pytorch-fsdp-skill" not in result.stderr
    assert "fsdp-skill install" in result.stderr  # which records the new Python
    assert len(result.stderr.strip().splitlines()) == 1


def test_shipped_launcher_is_executable():
    from fsdp_skill.bundle_files import BUNDLE_DIR

    assert os.access(BUNDLE_DIR / "scripts" / "fsdp", os.X_OK)
