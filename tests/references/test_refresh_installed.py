"""Refresh from the installed torch: deterministic, reports changes, all or nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fsdp_skill import atomic
from fsdp_skill.errors import UsageError
from fsdp_skill.references import refresh
from fsdp_skill.search import index

REPO = Path(__file__).resolve().parents[2]

FAKE_V1 = {
    "torch/__init__.py": '__version__ = "2.98.0"\n',
    "torch/distributed/__init__.py": '''
        def init_process_group(backend=None, timeout=None):
            """Start the default group.

            Args:
                backend (str): which backend.
                timeout (timedelta): how long to wait.
            """

        def barrier(group=None):
            """Wait for everyone."""
    ''',
}
FAKE_V2 = {
    "torch/__init__.py": '__version__ = "2.99.0"\n',
    "torch/distributed/__init__.py": '''
        def init_process_group(backend=None, timeout=None, device_id=None):
            """Start the default group.

            Args:
                backend (str): which backend.
                timeout (timedelta): how long to wait.
                device_id (torch.device): bind the process to this device.
            """

        def get_rank(group=None):
            """This process's rank."""
    ''',
}


def _fake_torch(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _bundle(tmp_path: Path) -> Path:
    bundle = tmp_path / "pytorch-fsdp"
    (bundle / "references").mkdir(parents=True)
    (bundle / "SKILL.md").write_text("---\nname: pytorch-fsdp\n---\n")
    (bundle / "references" / "guide.md").write_text("# Guide\n\n## Part\n\nhand-written\n")
    return bundle


def _refresh_with(fake: Path, bundle: Path, cache: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{fake}{os.pathsep}{REPO / 'src'}"}
    env["FSDP_SKILL_CACHE"] = str(cache)
    proc = subprocess.run(
        [sys.executable, "-m", "fsdp_skill", "refresh", "--dest", str(bundle), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_changed_torch_shows_added_removed_changed(tmp_path):
    bundle = _bundle(tmp_path)
    cache = tmp_path / "cache"
    first = _refresh_with(_fake_torch(tmp_path / "v1", FAKE_V1), bundle, cache)
    assert first["torch_version"] == "2.98.0"
    assert first["added"] == [
        "api:torch.distributed.barrier",
        "api:torch.distributed.init_process_group",
    ]
    page = (bundle / "references" / "api-process-groups.md").read_text()
    assert "torch 2.98.0" in page and "https://docs.pytorch.org/docs/2.98/distributed.html" in page
    assert "- `backend` (str): which backend." in page
    again = _refresh_with(tmp_path / "v1", bundle, cache)
    assert again["added"] == again["removed"] == again["changed"] == []
    second = _refresh_with(_fake_torch(tmp_path / "v2", FAKE_V2), bundle, cache)
    assert second["torch_version"] == "2.99.0"
    assert second["changed"] == ["api:torch.distributed.init_process_group"]
    assert second["added"] == ["api:torch.distributed.get_rank"]
    assert second["removed"] == ["api:torch.distributed.barrier"]
    assert (bundle / "references" / "guide.md").read_text().endswith("hand-written\n")


def test_no_torch_is_a_usage_error(tmp_path):
    bundle = _bundle(tmp_path)
    blocker = _fake_torch(tmp_path / "none", {"torch/__init__.py": "raise ImportError('no')\n"})
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{REPO / 'src'}"}
    proc = subprocess.run(
        [sys.executable, "-m", "fsdp_skill", "refresh", "--dest", str(bundle)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("fsdp-skill: error: torch is not importable")
    assert len(proc.stderr.strip().splitlines()) == 1
    # ... and how to get past it: the extra that brings torch, or the other source.
    assert "[torch]" in proc.stderr and "--source web" in proc.stderr


@pytest.mark.parametrize("stage", ["index", "swap"])
def test_a_refresh_that_fails_half_way_leaves_the_bundle_as_it_was(tmp_path, monkeypatch, stage):
    bundle = _bundle(tmp_path)
    monkeypatch.setenv("FSDP_SKILL_CACHE", str(tmp_path / "cache"))
    fake = _fake_torch(tmp_path / "v1", FAKE_V1)
    _refresh_with(fake, bundle, tmp_path / "cache")
    before = _snapshot(bundle / "references")
    from fsdp_skill.references import api

    monkeypatch.setattr(api, "build_pages", lambda: ("9.9.9", {"api-process-groups.md": "x\n"}))

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(
        index if stage == "index" else atomic, "build" if stage == "index" else "replace_dir", boom
    )
    with pytest.raises(KeyboardInterrupt):
        refresh(bundle)
    assert _snapshot(bundle / "references") == before
    assert sorted(p.name for p in bundle.iterdir()) == ["SKILL.md", "references"]


def test_bad_destination_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError):
        refresh(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError):
        refresh(tmp_path / "empty")
    with pytest.raises(UsageError):
        refresh(tmp_path, source="ftp")


@pytest.mark.torch
def test_two_refreshes_from_the_installed_torch_are_byte_identical(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("FSDP_SKILL_CACHE", str(tmp_path / "cache"))
    bundle = _bundle(tmp_path)
    first = refresh(bundle)
    snapshot = _snapshot(bundle / "references")
    second = refresh(bundle)
    assert _snapshot(bundle / "references") == snapshot
    assert second["added"] == second["removed"] == second["changed"] == []
    assert "api:torch.distributed.fsdp.fully_shard" in first["added"]
    assert "api:torch.distributed.device_mesh.init_device_mesh" in first["added"]


def test_a_full_disk_during_refresh_is_a_usage_error_and_changes_nothing(tmp_path, monkeypatch):
    import errno

    bundle = _bundle(tmp_path)
    monkeypatch.setenv("FSDP_SKILL_CACHE", str(tmp_path / "cache"))
    _refresh_with(_fake_torch(tmp_path / "v1", FAKE_V1), bundle, tmp_path / "cache")
    before = _snapshot(bundle / "references")
    from fsdp_skill.references import api

    monkeypatch.setattr(api, "build_pages", lambda: ("9.9.9", {"api-process-groups.md": "x\n"}))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "write_text", full)
    with pytest.raises(UsageError, match="No space left on device"):
        refresh(bundle)
    assert _snapshot(bundle / "references") == before
    assert sorted(p.name for p in bundle.iterdir()) == ["SKILL.md", "references"]


def test_refresh_keeps_every_folder_link_and_file_it_did_not_write(tmp_path):
    bundle = _bundle(tmp_path)
    refs = bundle / "references"
    (refs / "team").mkdir()
    (refs / "team" / "notes.md").write_text("# our notes\n")
    (refs / "team" / "run.sh").write_text("#!/bin/sh\n")
    (refs / "team" / "run.sh").chmod(0o755)
    (refs / "shared.md").symlink_to(tmp_path / "dotfiles-shared.md")
    (tmp_path / "dotfiles-shared.md").write_text("# Shared\n\n## Tips\n\nfrom dotfiles\n")
    (refs / "gone.md").symlink_to("nowhere.md")
    (refs / "images").symlink_to(tmp_path)
    (refs / "data.bin").write_bytes(bytes(range(256)))
    before = {p.relative_to(refs).as_posix(): os.lstat(p) for p in refs.rglob("*")}

    report = _refresh_with(_fake_torch(tmp_path / "v1", FAKE_V1), bundle, tmp_path / "cache")
    assert "api:torch.distributed.barrier" in report["added"]
    for rel, info in before.items():
        now = os.lstat(refs / rel)
        assert (now.st_mode, now.st_size) == (info.st_mode, info.st_size), rel
    assert os.readlink(refs / "shared.md") == str(tmp_path / "dotfiles-shared.md")
    assert os.readlink(refs / "gone.md") == "nowhere.md"
    assert (refs / "team" / "notes.md").read_text() == "# our notes\n"
    assert (refs / "data.bin").read_bytes() == bytes(range(256))
    assert sorted(p.name for p in bundle.iterdir()) == ["SKILL.md", "references"]
