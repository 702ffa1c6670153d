"""fsdp-skill install / uninstall: placement per client, idempotence, edits kept, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fsdp_skill.install.clients import CLIENTS, choose_folders
from tests.cli import fsdp

SKILL = "pytorch-fsdp"


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its content (None for folders)."""
    return {
        p.relative_to(root).as_posix(): (None if p.is_dir() else p.read_bytes())
        for p in sorted(root.rglob("*"))
    }


def test_install_to_dest_is_verifiable_idempotent_and_reversible(tmp_path: Path):
    dest = tmp_path / "skills"
    dest.mkdir()
    (dest / "other-skill").mkdir()
    before = snapshot(tmp_path)

    first = fsdp("install", "--dest", dest, "--json")
    assert first.code == 0, first.err
    assert first.json()["installed"] == [{"client": "dest", "path": str(dest / SKILL), "kept": []}]
    assert (dest / SKILL / "SKILL.md").is_file()
    assert os.access(dest / SKILL / "scripts" / "fsdp", os.X_OK)
    verified = fsdp("verify", dest / SKILL, "--json")
    assert verified.code == 0, verified.out
    assert verified.json()["ok"] is True

    installed = snapshot(tmp_path)
    second = fsdp("install", "--dest", dest, "--json")
    assert second.code == 0
    assert second.json()["installed"] == []
    assert second.json()["skipped"][0]["reason"] == "up to date"
    assert snapshot(tmp_path) == installed

    removed = fsdp("uninstall", "--dest", dest, "--json")
    assert removed.code == 0
    assert removed.json()["removed"] == [{"client": "dest", "path": str(dest / SKILL)}]
    assert snapshot(tmp_path) == before


def test_install_creates_missing_folders_and_uninstall_removes_them(tmp_path: Path):
    before = snapshot(tmp_path)
    assert fsdp("install", "--dest", tmp_path / "a" / "b").code == 0
    assert (tmp_path / "a" / "b" / SKILL / "SKILL.md").exists()
    assert fsdp("uninstall", "--dest", tmp_path / "a" / "b").code == 0
    assert snapshot(tmp_path) == before


def test_edited_file_survives_reinstall_until_force(tmp_path: Path):
    assert fsdp("install", "--dest", tmp_path).code == 0
    skill_md = tmp_path / SKILL / "SKILL.md"
    edited = skill_md.read_text() + "\nMy team's notes.\n"
    skill_md.write_text(edited)
    (tmp_path / SKILL / "my-notes.md").write_text("mine\n")

    again = fsdp("install", "--dest", tmp_path, "--json")
    assert again.code == 0
    assert skill_md.read_text() == edited
    assert (tmp_path / SKILL / "my-notes.md").read_text() == "mine\n"

    # Uninstall removes what install wrote and keeps the user's edit and file.
    assert fsdp("uninstall", "--dest", tmp_path).code == 0
    assert skill_md.read_text() == edited
    assert (tmp_path / SKILL / "my-notes.md").exists()
    assert not (tmp_path / SKILL / "scripts" / "fsdp").exists()

    forced = fsdp("install", "--dest", tmp_path, "--force")
    assert forced.code == 0, forced.err
    assert "My team's notes." not in skill_md.read_text()


def test_dry_run_writes_nothing(tmp_path: Path):
    result = fsdp("install", "--dest", tmp_path / "x", "--dry-run")
    assert result.code == 0
    assert "install:" in result.out
    assert not (tmp_path / "x").exists()


EXPECTED_USER = {
    "claude-code": ".claude/skills",
    "codex": ".agents/skills",
    "cursor": ".cursor/skills",
    "opencode": ".config/opencode/skills",
    "gemini": ".gemini/skills",
    "copilot": ".copilot/skills",
    "kiro": ".kiro/skills",
    "agents": ".agents/skills",
}
EXPECTED_PROJECT = {
    "claude-code": ".claude/skills",
    "codex": ".agents/skills",
    "cursor": ".cursor/skills",
    "opencode": ".opencode/skills",
    "gemini": ".gemini/skills",
    "copilot": ".github/skills",
    "kiro": ".kiro/skills",
    "agents": ".agents/skills",
}


@pytest.mark.parametrize("client", sorted(EXPECTED_USER))
def test_each_client_user_scope(client: str, home: dict[str, str]):
    result = fsdp("install", "--client", client, "--json", env=home)
    assert result.code == 0, result.err
    expected = Path(home["HOME"]) / EXPECTED_USER[client] / SKILL
    assert result.json()["installed"][0]["path"] == str(expected)
    assert (expected / "SKILL.md").is_file()
    assert fsdp("uninstall", "--client", client, env=home).code == 0
    assert list(Path(home["HOME"]).iterdir()) == []


@pytest.mark.parametrize("client", sorted(EXPECTED_PROJECT))
def test_each_client_project_scope(client: str, home: dict[str, str], tmp_path: Path):
    project = tmp_path / "proj"
    project.mkdir()
    result = fsdp("install", "--client", client, "--project", project, "--json", env=home)
    assert result.code == 0, result.err
    expected = project / EXPECTED_PROJECT[client] / SKILL
    assert (expected / "SKILL.md").is_file()
    assert list(Path(home["HOME"]).iterdir()) == []
    assert fsdp("uninstall", "--client", client, "--project", project, env=home).code == 0
    assert list(project.iterdir()) == []


def test_shared_folder_serves_several_clients_once(tmp_path: Path):
    home = tmp_path
    chosen = choose_folders(["codex", "gemini", "copilot"], home, home, project=False)
    assert list(chosen) == [home / ".agents/skills"]
    assert chosen[home / ".agents/skills"] == ["codex", "gemini", "copilot"]


def test_no_client_sees_the_skill_twice_when_avoidable(tmp_path: Path):
    from fsdp_skill.install.clients import reads

    names = [n for n in CLIENTS if n != "agents"]  # every real client, user scope
    chosen = choose_folders(names, tmp_path, tmp_path, project=False)
    for name in names:
        seen = [f for f in chosen if f in reads(CLIENTS[name], tmp_path, tmp_path, False)]
        assert len(seen) == 1, (name, seen)


def test_detects_clients_from_their_home_folders(home: dict[str, str]):
    root = Path(home["HOME"])
    (root / ".claude").mkdir()
    (root / ".gemini").mkdir()
    result = fsdp("install", "--json", env=home)
    assert result.code == 0, result.err
    paths = {entry["client"]: entry["path"] for entry in result.json()["installed"]}
    assert paths == {
        "claude-code": str(root / ".claude/skills" / SKILL),
        "gemini": str(root / ".gemini/skills" / SKILL),
    }


def test_no_client_detected_falls_back_to_shared_agents_folder(home: dict[str, str]):
    result = fsdp("install", "--json", env=home)
    assert result.code == 0
    assert result.json()["installed"][0]["path"] == str(
        Path(home["HOME"]) / ".agents/skills" / SKILL
    )


def _one_line_error(result) -> None:
    assert result.code == 2
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fsdp-skill: error:"), result.err
    assert "Traceback" not in result.err


def test_unknown_client(home: dict[str, str]):
    _one_line_error(fsdp("install", "--client", "emacs", env=home))
    assert list(Path(home["HOME"]).iterdir()) == []


def test_destination_is_a_file(tmp_path: Path):
    target = tmp_path / "file"
    target.write_text("x")
    _one_line_error(fsdp("install", "--dest", target))
    assert snapshot(tmp_path) == {"file": b"x"}


def test_bundle_path_is_a_file(tmp_path: Path):
    (tmp_path / SKILL).write_text("x")
    _one_line_error(fsdp("install", "--dest", tmp_path))


def test_unwritable_destination(tmp_path: Path):
    if os.geteuid() == 0:
        # root writes through permission bits; a read-only mount refuses even root.
        target = Path("/sys/fsdp-skill-test")
        if os.access("/sys", os.W_OK) and not _really_read_only(Path("/sys")):
            pytest.skip("no read-only folder available to root here")
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        target = locked / "skills"
    _one_line_error(fsdp("install", "--dest", target))
    assert not target.exists()


def _really_read_only(folder: Path) -> bool:
    try:
        (folder / ".fsdp-skill-probe").touch()
    except OSError:
        return True
    (folder / ".fsdp-skill-probe").unlink()
    return False


def test_corrupted_manifest(tmp_path: Path):
    assert fsdp("install", "--dest", tmp_path).code == 0
    manifest = tmp_path / SKILL / ".fsdp-skill-manifest.json"
    manifest.write_text("{not json")
    before = snapshot(tmp_path)
    _one_line_error(fsdp("install", "--dest", tmp_path))
    _one_line_error(fsdp("uninstall", "--dest", tmp_path))
    assert snapshot(tmp_path) == before


def test_manifest_cannot_point_outside_the_bundle(tmp_path: Path):
    assert fsdp("install", "--dest", tmp_path).code == 0
    manifest = tmp_path / SKILL / ".fsdp-skill-manifest.json"
    data = json.loads(manifest.read_text())
    data["files"]["../../victim"] = "0" * 64
    manifest.write_text(json.dumps(data))
    _one_line_error(fsdp("uninstall", "--dest", tmp_path))


def test_foreign_folder_is_not_overwritten(tmp_path: Path):
    (tmp_path / SKILL).mkdir()
    (tmp_path / SKILL / "SKILL.md").write_text("someone else's skill")
    _one_line_error(fsdp("install", "--dest", tmp_path))
    assert (tmp_path / SKILL / "SKILL.md").read_text() == "someone else's skill"


def test_interrupted_install_leaves_previous_bundle(tmp_path: Path, monkeypatch):
    """A failure while the new bundle is being built leaves the old one untouched."""
    from fsdp_skill.errors import UsageError
    from fsdp_skill.install import installer

    installer.install(dest=tmp_path)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(installer.atomic, "replace_dir", full_disk)
    # An older install: its SKILL.md differs from the shipped one, unedited since.
    (tmp_path / SKILL / "SKILL.md").write_text("old version\n")
    manifest = installer.read_manifest(tmp_path / SKILL)
    manifest["files"]["SKILL.md"] = installer.sha256(b"old version\n")
    (tmp_path / SKILL / installer.MANIFEST).write_text(json.dumps(manifest))
    before = snapshot(tmp_path)
    with pytest.raises(UsageError, match="No space left"):
        installer.install(dest=tmp_path)
    assert snapshot(tmp_path) == before


def test_api_references_follow_the_installed_torch(tmp_path: Path, monkeypatch):
    """Another torch version than the shipped pages' gets pages built from it; the same does not."""
    from fsdp_skill.install import api_pages, installer

    files = {"SKILL.md": b"x", "references/api-x.md": b"<!-- generated ... from torch 2.13.0: -->"}
    assert api_pages.shipped_version(files) == "2.13.0"

    monkeypatch.setattr(api_pages, "installed_torch_version", lambda: "2.13.0")
    assert api_pages.for_installed_torch(files) == (files, None)

    from fsdp_skill.references import api

    def fake_build_pages():
        marker = api.marker("2.99.0")
        return "2.99.0", {"api-fsdp2.md": f"{marker}\n# API: fully_shard\n"}

    monkeypatch.setattr(api_pages, "installed_torch_version", lambda: "2.99.0")
    monkeypatch.setattr(api, "build_pages", fake_build_pages)
    report = installer.install(dest=tmp_path, mcp=False)
    assert any("rebuilt for the installed torch 2.99.0" in a for a in report.actions)
    pages = sorted(p.name for p in (tmp_path / SKILL / "references").glob("api-*.md"))
    assert pages == ["api-fsdp2.md"]
    assert "from torch 2.99.0" in (tmp_path / SKILL / "references" / "api-fsdp2.md").read_text()
    # The rebuilt pages are install's own: a second install sees no user edit and writes nothing.
    again = installer.install(dest=tmp_path, mcp=False)
    assert again.installed == [] and again.skipped[0]["reason"] == "up to date"


def test_launcher_searches_its_own_bundle(tmp_path: Path):
    assert fsdp("install", "--dest", tmp_path).code == 0
    text = (tmp_path / SKILL / "scripts" / "fsdp").read_text()
    assert "FSDP_SKILL_BUNDLE" in text


def test_refreshed_pages_stay_install_owned(tmp_path: Path, monkeypatch):
    """After `refresh` rewrites an installed bundle's API pages, install sees no user edit and
    uninstall removes everything it wrote."""
    from fsdp_skill import references
    from fsdp_skill.install import installer
    from fsdp_skill.references import api

    before = snapshot(tmp_path)
    installer.install(dest=tmp_path, mcp=False, api_refs=False)

    def fake_build_pages():
        return "2.99.0", {"api-fsdp2.md": f"{api.marker('2.99.0')}\n# API: fully_shard\n"}

    monkeypatch.setattr(api, "build_pages", fake_build_pages)
    monkeypatch.setenv("FSDP_SKILL_CACHE", str(tmp_path.parent / "cache"))
    report = references.refresh(tmp_path / SKILL, source="installed")
    assert report["torch_version"] == "2.99.0"
    again = installer.install(dest=tmp_path, mcp=False, api_refs=False)
    assert again.installed and again.installed[0]["kept"] == []
    installer.uninstall(dest=tmp_path, mcp=False)
    assert snapshot(tmp_path) == before
