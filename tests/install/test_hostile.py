"""install / uninstall against what users' machines really hold: linked bundle folders,
interrupted runs, concurrent runs, hand-edited manifests, full disks and read-only mounts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli import fsdp
from tests.install.test_install import snapshot
from tests.mounts import fill, remount_read_only, small_tmpfs

SKILL = "pytorch-fsdp"
MANIFEST = ".fsdp-skill-manifest.json"

# Runs the real CLI in a child process with one function replaced by `hook`, so that the
# child can be stopped by a real signal at an exact point of its work.
_CHILD = """
import os, signal, sys, time
from pathlib import Path
from fsdp_skill import atomic
from fsdp_skill.cli import main

where, action, marker = sys.argv[1], sys.argv[2], Path(sys.argv[3])
module, name = where.rsplit(".", 1)
owner = atomic if module == "atomic" else __import__(module, fromlist=["x"])
real = getattr(owner, name)

def hook(*args, **kwargs):
    if action == "kill-at-backup" and not str(args[1]).endswith(".fsdp-skill.bak"):
        return real(*args, **kwargs)
    marker.write_text(str(os.getpid()))
    if action == "pause":
        while not marker.with_suffix(".go").exists():
            time.sleep(0.02)
        return real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM if action == "SIGTERM" else signal.SIGKILL)
    time.sleep(30)

setattr(owner, name, hook)
main(sys.argv[4:])
"""


def _child(where: str, action: str, marker: Path, *args, env=None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, where, action, str(marker), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"child ended early: {proc.communicate()}")
        assert time.monotonic() < deadline, "child never reached the hook"
        time.sleep(0.02)


def _one_line_error(result) -> str:
    assert result.code == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fsdp-skill: error:"), result.err
    assert "Traceback" not in result.err
    return lines[0]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _make_outdated(bundle: Path) -> None:
    """Turn an installed bundle into an older install, unedited since: the next install
    updates it."""
    (bundle / "SKILL.md").write_text("old version\n")
    data = json.loads((bundle / MANIFEST).read_text())
    import hashlib

    data["files"]["SKILL.md"] = hashlib.sha256(b"old version\n").hexdigest()
    (bundle / MANIFEST).write_text(json.dumps(data))


# --- item 5: a bundle folder that is a symbolic link -----------------------------------------


def test_a_linked_bundle_folder_is_updated_where_it_lives(tmp_path: Path):
    dotfiles = tmp_path / "dotfiles" / SKILL
    dotfiles.mkdir(parents=True)
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / SKILL).symlink_to(dotfiles)

    first = fsdp("install", "--dest", skills, "--no-api-refs")
    assert first.code == 0, first.err
    assert (skills / SKILL).is_symlink() and (dotfiles / "SKILL.md").is_file()
    assert _leftovers(skills) == [] and _leftovers(tmp_path / "dotfiles") == []

    _make_outdated(dotfiles)
    second = fsdp("install", "--dest", skills, "--no-api-refs", "--json")
    assert second.code == 0, second.err
    assert second.json()["installed"][0]["path"] == str(skills / SKILL)
    assert (skills / SKILL).is_symlink()
    assert (dotfiles / "SKILL.md").read_text() != "old version\n"
    assert _leftovers(skills) == [] and _leftovers(tmp_path / "dotfiles") == []
    assert fsdp("install", "--dest", skills, "--no-api-refs").out.startswith("up to date")

    assert fsdp("uninstall", "--dest", skills).code == 0
    # What install wrote is gone; the link and the folder it points to are the user's.
    assert (skills / SKILL).is_symlink() and list(dotfiles.iterdir()) == []


def test_a_dangling_bundle_link_is_refused_and_left_alone(tmp_path: Path):
    (tmp_path / SKILL).symlink_to(tmp_path / "gone")
    line = _one_line_error(fsdp("install", "--dest", tmp_path))
    assert "link" in line and str(tmp_path / "gone") in line
    assert "unchanged" not in line
    assert (tmp_path / SKILL).is_symlink() and sorted(os.listdir(tmp_path)) == [SKILL]


# --- item 6: leftovers of interrupted runs ---------------------------------------------------


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_an_interrupted_install_leaves_nothing_the_next_run_keeps(tmp_path: Path, sig: str):
    assert fsdp("install", "--dest", tmp_path, "--no-api-refs").code == 0
    _make_outdated(tmp_path / SKILL)
    marker = tmp_path.parent / f"{tmp_path.name}.marker"
    proc = _child("atomic.replace_dir", sig, marker, "install", "--dest", tmp_path, "--no-api-refs")
    proc.communicate(timeout=120)
    assert proc.returncode != 0 and marker.exists()
    assert (tmp_path / SKILL / "SKILL.md").read_text() == "old version\n"  # old bundle intact
    if sig == "SIGKILL":  # nothing can clean up after SIGKILL: the staging folder stays ...
        assert [n for n in _leftovers(tmp_path) if n.endswith(".staging")], _leftovers(tmp_path)
        found = fsdp("verify", tmp_path / SKILL, "--no-torch", "--json").json()["problems"]
        assert any(
            p["path"].startswith("../.pytorch-fsdp.") and "interrupted" in p["message"]
            for p in found
        ), found
    else:  # ... SIGTERM stops the run cleanly
        assert _leftovers(tmp_path) == []
    again = fsdp("install", "--dest", tmp_path, "--no-api-refs")
    assert again.code == 0, again.err
    assert _leftovers(tmp_path) == [] and _leftovers(tmp_path / SKILL) == [MANIFEST]
    assert fsdp("verify", tmp_path / SKILL, "--no-torch").code == 0


def test_an_interrupted_refresh_leaves_nothing_the_next_run_keeps(tmp_path: Path):
    from tests.references.test_refresh_installed import FAKE_V1, REPO, _bundle, _fake_torch

    bundle = _bundle(tmp_path)
    fake = _fake_torch(tmp_path / "v1", FAKE_V1)
    env = {"PYTHONPATH": f"{fake}{os.pathsep}{REPO / 'src'}", "FSDP_SKILL_CACHE": str(tmp_path)}
    marker = tmp_path / "marker"
    args = ("refresh", "--dest", bundle)
    proc = _child("atomic.replace_dir", "SIGKILL", marker, *args, env=env)
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert [n for n in _leftovers(bundle) if n.startswith(".references.")]
    problems = fsdp("verify", bundle, "--no-torch", "--json").json()["problems"]
    assert any(".references." in p["path"] and "interrupted" in p["message"] for p in problems)
    again = fsdp(*args, env=env)
    assert again.code == 0, again.err
    assert _leftovers(bundle) == []


def test_a_killed_config_write_leaves_no_temporary_file_behind(home: dict[str, str]):
    config = Path(home["HOME"]) / ".cursor" / "mcp.json"
    config.parent.mkdir()
    config.write_text('{"mcpServers": {"other": {"command": "x"}}}\n')
    marker = Path(home["HOME"]).parent / "marker"
    proc = _child("os.replace", "kill-at-backup", marker, "install", "--client", "cursor", env=home)
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert [n for n in os.listdir(config.parent) if n.endswith(".tmp")]
    assert fsdp("install", "--client", "cursor", env=home).code == 0
    assert sorted(os.listdir(config.parent)) == ["mcp.json", "mcp.json.fsdp-skill.bak", "skills"]


def test_a_running_install_is_waited_for_and_its_staging_never_removed(tmp_path: Path):
    assert fsdp("install", "--dest", tmp_path, "--no-api-refs").code == 0
    _make_outdated(tmp_path / SKILL)
    marker = tmp_path.parent / f"{tmp_path.name}.marker"
    first = _child(
        "atomic.replace_dir", "pause", marker, "install", "--dest", tmp_path, "--no-api-refs"
    )
    _wait_for(marker, first)
    second = subprocess.Popen(
        [sys.executable, "-m", "fsdp_skill", "install", "--dest", str(tmp_path), "--no-api-refs"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)
    assert second.poll() is None, "the second install did not wait for the first"
    assert [n for n in _leftovers(tmp_path) if n.endswith(".staging")]
    marker.with_suffix(".go").touch()
    out1, err1 = first.communicate(timeout=120)
    out2, err2 = second.communicate(timeout=120)
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    assert out2.startswith("up to date")
    assert _leftovers(tmp_path) == []


# --- item 7: concurrent installs, hand-edited manifests, MCP backups -------------------------


def _install(dest: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "fsdp_skill", "install", "--dest", str(dest), "--no-api-refs"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_concurrent_installs_into_a_new_folder_are_undone_by_one_uninstall(tmp_path: Path):
    before = snapshot(tmp_path)
    dest = tmp_path / "a" / "b"
    procs = [_install(dest) for _ in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert fsdp("verify", dest / SKILL, "--no-torch").code == 0
    manifest = json.loads((dest / SKILL / MANIFEST).read_text())
    assert manifest["created_dirs"] == [str(dest), str(tmp_path / "a")]
    assert fsdp("uninstall", "--dest", dest).code == 0
    assert snapshot(tmp_path) == before


def test_an_install_that_made_the_folders_records_them_when_it_finds_the_bundle_written(
    tmp_path: Path, monkeypatch
):
    """The race behind a failed concurrent-install run: another install, which found the
    folders already made, took the lock first and wrote the same bundle (listing no created
    folders); the install that made them then finds the bundle up to date and must still add
    them to the manifest, or no uninstall ever removes them."""
    import contextlib

    from fsdp_skill import locking
    from fsdp_skill.install import installer

    before = snapshot(tmp_path)
    dest = tmp_path / "a" / "b"
    dest.mkdir(parents=True)  # made by the install that is slower to take the lock
    installer.install(dest=dest, mcp=False, api_refs=False)  # the one that found them made
    assert json.loads((dest / SKILL / MANIFEST).read_text())["created_dirs"] == []
    real_lock = locking.bundle_lock

    @contextlib.contextmanager
    def lock_having_made(bundle_dir, make_parents=False):
        with real_lock(bundle_dir, make_parents) as made:
            assert made == []
            yield [dest, dest.parent]  # what this install's mkdir calls created, earlier

    monkeypatch.setattr(locking, "bundle_lock", lock_having_made)
    report = installer.install(dest=dest, mcp=False, api_refs=False)
    assert report.installed == [] and report.skipped  # the bundle itself was up to date
    manifest = json.loads((dest / SKILL / MANIFEST).read_text())
    assert manifest["created_dirs"] == [str(dest), str(dest.parent)]
    monkeypatch.undo()
    assert fsdp("verify", dest / SKILL, "--no-torch").code == 0
    assert fsdp("uninstall", "--dest", dest).code == 0
    assert snapshot(tmp_path) == before


def test_an_install_that_finishes_second_keeps_the_first_ones_created_folders(tmp_path: Path):
    """The first install creates a/b; the second starts after that and swaps its bundle in
    last: the manifest must still list a/b and a."""
    before = snapshot(tmp_path)
    dest = tmp_path / "work" / "a" / "b"
    (tmp_path / "work").mkdir()
    marks = [tmp_path / "first.marker", tmp_path / "second.marker"]
    args = ("install", "--dest", dest, "--no-api-refs")
    first = _child("atomic.replace_dir", "pause", marks[0], *args)
    _wait_for(marks[0], first)
    second = _child("atomic.replace_dir", "pause", marks[1], *args)
    time.sleep(2)
    marks[0].with_suffix(".go").touch()
    assert first.wait(timeout=120) == 0, first.communicate()
    marks[1].with_suffix(".go").touch()  # the second may swap its bundle in now, if it has one
    assert second.wait(timeout=120) == 0, second.communicate()
    manifest = json.loads((dest / SKILL / MANIFEST).read_text())
    assert manifest["created_dirs"] == [str(dest), str(dest.parent)]
    assert fsdp("uninstall", "--dest", dest).code == 0
    for mark in marks:
        mark.unlink(missing_ok=True)
        mark.with_suffix(".go").unlink()
    assert snapshot(tmp_path) == {**before, "work": None}


def test_a_hand_edited_manifest_cannot_make_uninstall_remove_other_folders(tmp_path: Path):
    victim = tmp_path / "victim"
    victim.mkdir()
    users = tmp_path / "users-empty-folder"  # there before install, empty after uninstall
    users.mkdir()
    dest = users / "skills"
    assert fsdp("install", "--dest", dest).code == 0
    path = dest / SKILL / MANIFEST
    data = json.loads(path.read_text())
    data["created_dirs"] += [str(users), str(victim), str(tmp_path), "/"]
    path.write_text(json.dumps(data))
    assert fsdp("uninstall", "--dest", dest).code == 0
    assert not dest.exists()  # install made it: it goes
    assert users.is_dir() and victim.is_dir()


def test_uninstall_leaves_no_backup_that_holds_our_entry(home: dict[str, str]):
    config = Path(home["HOME"]) / ".cursor" / "mcp.json"
    config.parent.mkdir()
    original = '{"mcpServers": {"other": {"command": "x"}}}\n'
    config.write_text(original)
    assert fsdp("install", "--client", "cursor", env=home).code == 0
    assert fsdp("install", "--client", "cursor", env=home).code == 0
    assert fsdp("uninstall", "--client", "cursor", env=home).code == 0
    assert config.read_text() == original
    for name in os.listdir(config.parent):
        assert "fsdp_skill" not in (config.parent / name).read_text(), name


# --- item 8: a corrupted manifest ------------------------------------------------------------


def test_force_moves_a_bundle_with_a_corrupted_manifest_aside_and_installs_fresh(tmp_path):
    dest = tmp_path / "skills"
    assert fsdp("install", "--dest", dest).code == 0
    (dest / SKILL / MANIFEST).write_text("{not json")
    (dest / SKILL / "my-notes.md").write_text("mine\n")
    refused = _one_line_error(fsdp("install", "--dest", dest))
    assert "--force" in refused

    forced = fsdp("install", "--dest", dest, "--force")
    assert forced.code == 0, forced.err
    backups = [p for p in tmp_path.iterdir() if p.name.startswith(f"{SKILL}.backup-")]
    assert len(backups) == 1, sorted(os.listdir(tmp_path))
    assert str(backups[0]) in forced.out
    assert (backups[0] / "my-notes.md").read_text() == "mine\n"
    assert (backups[0] / MANIFEST).read_text() == "{not json"
    assert fsdp("verify", dest / SKILL, "--no-torch").code == 0
    assert sorted(os.listdir(dest)) == [SKILL]  # no second skill for the clients to load
    assert fsdp("uninstall", "--dest", dest).code == 0


# --- item 12: one line, exit 2, nothing half-written -----------------------------------------


@pytest.mark.parametrize("bad", [[1, 2], [None], [{"a": 1}], "a/b"])
def test_a_manifest_with_odd_created_dirs_is_reported_in_one_line(tmp_path: Path, bad):
    assert fsdp("install", "--dest", tmp_path / "d").code == 0
    path = tmp_path / "d" / SKILL / MANIFEST
    data = json.loads(path.read_text())
    data["created_dirs"] = bad
    path.write_text(json.dumps(data))
    before = snapshot(tmp_path)
    assert "corrupted" in _one_line_error(fsdp("uninstall", "--dest", tmp_path / "d"))
    assert "corrupted" in _one_line_error(fsdp("install", "--dest", tmp_path / "d"))
    assert snapshot(tmp_path) == before


def test_an_update_on_a_full_disk_is_one_line_and_changes_nothing(tmp_path: Path):
    with small_tmpfs(tmp_path / "disk", "3m") as disk:
        assert fsdp("install", "--dest", disk, "--no-api-refs").code == 0
        _make_outdated(disk / SKILL)
        filler = fill(disk, leave=64 * 1024)
        before = snapshot(disk / SKILL)
        line = _one_line_error(fsdp("install", "--dest", disk, "--no-api-refs"))
        assert "No space left on device" in line and len(line) < 300
        assert snapshot(disk / SKILL) == before
        assert sorted(os.listdir(disk)) == sorted([SKILL, filler.name])


def test_a_config_write_on_a_full_disk_is_one_line_and_changes_nothing(home: dict[str, str]):
    with small_tmpfs(Path(home["HOME"]), "1m") as disk:
        config = disk / ".codeium" / "windsurf" / "mcp_config.json"
        config.parent.mkdir(parents=True)
        original = '{"mcpServers": {"other": {"command": "x"}}}\n'
        config.write_text(original)
        fill(disk)
        line = _one_line_error(fsdp("install", "--client", "windsurf", env=home))
        assert str(config) in line and "No space left on device" in line
        assert config.read_text() == original
        assert sorted(os.listdir(config.parent)) == ["mcp_config.json"]


def test_uninstall_on_a_read_only_mount_is_one_line(tmp_path: Path):
    with small_tmpfs(tmp_path / "ro", "4m") as disk:
        assert fsdp("install", "--dest", disk, "--no-api-refs").code == 0
        remount_read_only(disk)
        before = snapshot(disk)
        line = _one_line_error(fsdp("uninstall", "--dest", disk))
        assert "read-only" in line.lower()
        assert snapshot(disk) == before


def test_a_dangling_config_link_is_one_line(home: dict[str, str], tmp_path: Path):
    link = Path(home["HOME"]) / ".cursor" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(tmp_path / "dotfiles" / "gone.json")
    line = _one_line_error(fsdp("install", "--client", "cursor", env=home))
    assert str(link) in line and "link" in line
    assert link.is_symlink() and not (tmp_path / "dotfiles").exists()
    assert sorted(os.listdir(link.parent)) == ["mcp.json"]
