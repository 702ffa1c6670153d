"""Root handling of the MCP server, without a connection."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsdp_skill.errors import UsageError
from fsdp_skill.mcp_server import check_path, root_paths


def test_root_uris_become_local_folders():
    uris = ["file:///tmp/a%20b", "https://example.org/x", "file://localhost/srv", "file://h/z"]
    assert root_paths(uris) == [Path("/tmp/a b"), Path("/srv")]


def test_check_path_inside_relative_and_outside(tmp_path: Path):
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "other.py").write_text("x = 1\n")
    assert check_path(str(root / "pkg" / "a.py"), [root]) == (root / "pkg" / "a.py").resolve()
    assert check_path("pkg/a.py", [root]) == (root / "pkg" / "a.py").resolve()
    for bad in (str(tmp_path / "other.py"), "../other.py", "/"):
        with pytest.raises(UsageError, match="outside"):
            check_path(bad, [root])
    with pytest.raises(UsageError, match="does not exist"):
        check_path("pkg/missing.py", [root])
    with pytest.raises(UsageError, match="no roots"):
        check_path(str(root / "pkg" / "a.py"), [])
    with pytest.raises(UsageError, match="bad path"):
        check_path("a\x00b", [root])


def test_a_root_that_is_a_prefix_of_another_folder_grants_only_itself(tmp_path: Path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj-secrets").mkdir()
    (tmp_path / "proj-secrets" / "k.py").write_text("")
    with pytest.raises(UsageError, match="outside"):
        check_path(str(tmp_path / "proj-secrets" / "k.py"), [tmp_path / "proj"])


def test_a_folder_with_a_link_leading_out_is_refused(tmp_path: Path):
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "ok.py").write_text("")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key.py").write_text("")
    assert check_path(str(root), [root]) == root.resolve()
    (root / "src" / "inner.py").symlink_to(root / "src" / "ok.py")  # a link that stays inside
    assert check_path(str(root), [root]) == root.resolve()
    (root / "src" / "leak").symlink_to(tmp_path / "secret")
    with pytest.raises(UsageError, match="leak, a link to .*outside"):
        check_path(str(root), [root])
    assert check_path(str(root / "src" / "ok.py"), [root])  # a single file inside is fine


def test_without_the_sdk_the_command_says_what_to_install():
    import subprocess
    import sys

    code = "import sys; sys.modules['mcp'] = None\nfrom fsdp_skill.cli import main\nmain(['mcp'])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "pip install 'mcp>=2.3,<3'" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
