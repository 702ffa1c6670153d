"""Root handling of the MCP server, without a connection."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsdp_skill.errors import UsageError
from fsdp_skill.mcp_server import is_model_name, root_paths
from fsdp_skill.roots import Roots


def check_path(raw: str, roots: list[Path]) -> Path:
    return Roots.of(roots).locate(raw)


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


def test_a_missing_path_outside_is_refused_like_an_existing_one(tmp_path: Path):
    """The refusal must not tell whether something exists outside the roots."""
    (tmp_path / "root").mkdir()
    (tmp_path / "there.json").write_text("{}")
    messages = []
    for name in ("there.json", "not-there.json"):
        with pytest.raises(UsageError, match="outside") as refused:
            check_path(f"../{name}", [tmp_path / "root"])
        messages.append(str(refused.value).replace(name, "NAME"))
    assert messages[0] == messages[1]


def test_links_are_judged_by_their_target(tmp_path: Path):
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "ok.py").write_text("")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key.py").write_text("")
    (root / "src" / "inner.py").symlink_to(root / "src" / "ok.py")
    (root / "src" / "leak").symlink_to(tmp_path / "secret")
    (root / "src" / "leak.py").symlink_to(tmp_path / "secret" / "key.py")
    (root / "loop").symlink_to(root / "loop")
    roots = Roots.of([root])
    assert check_path("src/inner.py", [root]) == (root / "src" / "ok.py").resolve()
    assert roots.contains(root / "src")
    for escaping in ("src/leak", "src/leak/key.py", "src/leak.py", "src/leak/../leak/key.py"):
        with pytest.raises(UsageError, match="outside"):
            check_path(escaping, [root])
    assert not roots.contains(root / "loop")


def test_a_root_given_as_a_link_grants_its_target(tmp_path: Path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.py").write_text("")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    assert check_path(str(tmp_path / "real" / "a.py"), [tmp_path / "alias"])


@pytest.mark.parametrize(
    ("model", "is_name"),
    [
        ("llama-3-8b", True),
        ("meta-llama/Llama-3.1-8B", True),
        ("gpt2", True),
        ("../models/llama", False),
        ("/etc/models/config.json", False),
        ("a/b/c", False),
        ("org/..", False),
        ("./local", False),
        ("~/models", False),
        ("a--b/c", False),
    ],
)
def test_model_names_and_paths_are_told_apart(model: str, is_name: bool):
    assert is_model_name(model) is is_name


def test_without_the_sdk_the_command_says_what_to_install():
    import subprocess
    import sys

    code = "import sys; sys.modules['mcp'] = None\nfrom fsdp_skill.cli import main\nmain(['mcp'])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "pip install 'mcp>=2.3,<3'" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
