"""``install`` registers the MCP server in JSON-configured clients without losing anything."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fsdp_skill.install import json_splice
from fsdp_skill.install.mcp_config import BACKUP_SUFFIX, MCP_CLIENTS, SERVER_NAME, config_path
from tests.cli import fsdp
from tests.mcp.session import text_of

CLAUDE = ".config/Claude/claude_desktop_config.json"
VSCODE = ".config/Code/User/mcp.json"
CURSOR = ".cursor/mcp.json"

# Odd but valid formatting that a re-serialisation would change: 4-space indent, a number
# written as 1.0e3, an escaped and a literal non-ASCII character, unsorted keys.
CLAUDE_CONFIG = """{
    "globalShortcut": "Ctrl+Space",
    "mcpServers": {
        "filesystem": {"command": "npx", "args": ["-y", "@mcp/fs", "/home/me/Café"]},
        "weather":    {
            "command": "uvx",
            "args": ["weather-mcp"],
            "env": {"TIMEOUT": 1.0e3, "CITY": "Z\\u00fcrich"}
        }
    },
    "zzz": true
}
"""

VSCODE_CONFIG = """// my servers
{
\t"inputs": [],
\t"servers": {
\t\t/* the team's server */
\t\t"team": {"type": "stdio", "command": "team-mcp",},
\t},
}
"""


def put(home: dict[str, str], rel: str, text: str | bytes) -> Path:
    path = Path(home["HOME"]) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode("utf-8"))
    return path


def entry(path: Path, key: str = "mcpServers") -> dict:
    return json.loads(json_splice.strip_comments(path.read_text()))[key][SERVER_NAME]


def test_claude_desktop_keeps_other_servers_byte_for_byte(home):
    path = put(home, CLAUDE, CLAUDE_CONFIG)
    result = fsdp("install", "--client", "claude-desktop", "--json", env=home)
    assert result.code == 0, result.err
    report = result.json()
    assert report["installed"] == [] and report["mcp"][0]["action"] == "add"
    new = path.read_text()
    assert new.startswith(CLAUDE_CONFIG[: CLAUDE_CONFIG.index('\n    },\n    "zzz"')])
    assert new.endswith('\n    },\n    "zzz": true\n}\n')
    before, after = json.loads(CLAUDE_CONFIG), json.loads(new)
    ours = after["mcpServers"].pop(SERVER_NAME)
    assert after == before
    assert ours == {"command": sys.executable, "args": ["-m", "fsdp_skill", "mcp"]}
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    assert backup.read_text() == CLAUDE_CONFIG

    again = fsdp("install", "--client", "claude-desktop", "--json", env=home).json()
    assert again["mcp"][0]["action"] == "up to date"
    assert path.read_text() == new

    removed = fsdp("uninstall", "--client", "claude-desktop", "--json", env=home)
    assert removed.code == 0, removed.err
    assert removed.json()["mcp"][0]["action"] == "remove"
    assert path.read_text() == CLAUDE_CONFIG


def test_broken_config_is_left_untouched_with_a_clear_message(home):
    broken = '{"mcpServers": {"a": {"command": "x",}}'
    path = put(home, CLAUDE, broken)
    result = fsdp("install", "--client", "claude-desktop", "--client", "claude-code", env=home)
    assert result.code == 2
    assert str(path) in result.err and "not valid JSON" in result.err
    assert "Traceback" not in result.err
    assert path.read_text() == broken
    assert not path.with_name(path.name + BACKUP_SUFFIX).exists()
    assert not (Path(home["HOME"]) / ".claude").exists()  # nothing else was written either


def test_broken_config_of_a_client_not_named_is_skipped(home):
    broken = "not json at all"
    path = put(home, CURSOR, broken)
    result = fsdp("install", "--json", env=home)
    assert result.code == 0, result.err
    skipped = [m for m in result.json()["mcp"] if m["action"] == "skipped"]
    assert skipped and skipped[0]["client"] == "cursor" and "not valid JSON" in skipped[0]["reason"]
    assert path.read_text() == broken


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "JSON object at the top"),
        ('{"mcpServers": []}', "'mcpServers' is not an object"),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_configs_of_the_wrong_shape_are_refused(home, text, message):
    path = put(home, CLAUDE, text)
    original = path.read_bytes()
    result = fsdp("install", "--client", "claude-desktop", env=home)
    assert result.code == 2 and message in result.err
    assert path.read_bytes() == original


def test_vscode_jsonc_keeps_comments_and_gets_a_stdio_entry(home):
    path = put(home, VSCODE, VSCODE_CONFIG)
    result = fsdp("install", "--client", "vscode", "--json", env=home)
    assert result.code == 0, result.err
    new = path.read_text()
    assert "// my servers" in new and "/* the team's server */" in new
    assert '"team": {"type": "stdio", "command": "team-mcp",},' in new
    assert entry(path, "servers") == {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "fsdp_skill", "mcp"],
    }
    assert fsdp("uninstall", "--client", "vscode", env=home).code == 0
    assert path.read_text() == VSCODE_CONFIG


def test_crlf_and_bom_survive(home):
    text = '\ufeff{\r\n  "mcpServers": {\r\n    "a": {"command": "x"}\r\n  }\r\n}\r\n'
    path = put(home, CURSOR, text)
    assert fsdp("install", "--client", "cursor", env=home).code == 0
    raw = path.read_bytes()
    assert raw.startswith("\ufeff".encode()) and b"\n" not in raw.replace(b"\r\n", b"")
    assert fsdp("uninstall", "--client", "cursor", env=home).code == 0
    assert path.read_bytes() == text.encode("utf-8")


def test_cursor_project_config_is_created_and_removed_with_the_bundle(home, tmp_path: Path):
    project = tmp_path / "proj"
    project.mkdir()
    result = fsdp("install", "--client", "cursor", "--project", project, "--json", env=home)
    assert result.code == 0, result.err
    config = project / ".cursor" / "mcp.json"
    assert entry(config)["args"] == ["-m", "fsdp_skill", "mcp"]
    assert result.json()["mcp"] == [{"client": "cursor", "path": str(config), "action": "add"}]
    removed = fsdp("uninstall", "--client", "cursor", "--project", project, "--json", env=home)
    assert removed.json()["mcp"][0].get("file_removed") is True
    assert list(project.iterdir()) == []


def test_without_names_only_existing_configs_are_touched(home):
    cursor = put(home, CURSOR, '{"mcpServers": {}}\n')
    windsurf = put(home, ".codeium/windsurf/mcp_config.json", "{}")
    result = fsdp("install", "--json", env=home)
    assert result.code == 0, result.err
    assert [m["client"] for m in result.json()["mcp"]] == ["cursor", "windsurf"]
    assert SERVER_NAME in json.loads(windsurf.read_text())["mcpServers"]
    assert SERVER_NAME in json.loads(cursor.read_text())["mcpServers"]
    assert not (Path(home["HOME"]) / CLAUDE).exists()
    assert not (Path(home["HOME"]) / VSCODE).exists()


def test_no_mcp_leaves_configs_alone(home):
    cursor = put(home, CURSOR, '{"mcpServers": {}}\n')
    result = fsdp("install", "--client", "cursor", "--no-mcp", "--json", env=home)
    assert result.code == 0 and result.json()["mcp"] == []
    assert cursor.read_text() == '{"mcpServers": {}}\n'


def test_dry_run_writes_no_config(home):
    result = fsdp("install", "--client", "claude-desktop", "--dry-run", "--json", env=home)
    assert result.json()["mcp"][0]["action"] == "add"
    assert not (Path(home["HOME"]) / CLAUDE).exists()


def test_update_keeps_what_the_user_added_to_our_entry(home):
    old = {"command": "/old/python", "args": ["-m", "fsdp_skill", "mcp"], "env": {"A": "1"}}
    path = put(home, CLAUDE, json.dumps({"mcpServers": {SERVER_NAME: old}}, indent=2))
    result = fsdp("install", "--client", "claude-desktop", "--json", env=home)
    assert result.json()["mcp"][0]["action"] == "update"
    assert entry(path) == {**old, "command": sys.executable}


def test_uninstall_leaves_a_foreign_entry_of_the_same_name(home):
    text = json.dumps({"mcpServers": {SERVER_NAME: {"command": "someone-else"}}})
    path = put(home, CLAUDE, text)
    result = fsdp("uninstall", "--client", "claude-desktop", "--json", env=home)
    assert result.code == 0 and result.json()["mcp"] == []
    assert path.read_text() == text


def test_unknown_client_lists_the_mcp_clients_too(home):
    result = fsdp("install", "--client", "emacs", env=home)
    assert result.code == 2
    assert "claude-desktop" in result.err and "vscode" in result.err


def test_config_locations_per_platform(tmp_path: Path):
    home = tmp_path
    claude, vscode = MCP_CLIENTS["claude-desktop"], MCP_CLIENTS["vscode"]
    mac = config_path(claude, home, env={}, platform="darwin")
    assert mac == home / "Library/Application Support/Claude/claude_desktop_config.json"
    win = config_path(vscode, home, env={"APPDATA": str(tmp_path / "Roaming")}, platform="win32")
    assert win == tmp_path / "Roaming" / "Code" / "User" / "mcp.json"
    xdg = config_path(claude, home, env={"XDG_CONFIG_HOME": str(tmp_path / "x")}, platform="linux")
    assert xdg == tmp_path / "x" / "Claude" / "claude_desktop_config.json"
    assert config_path(claude, home, project=tmp_path / "p") is None
    windsurf = MCP_CLIENTS["windsurf"]
    assert config_path(windsurf, home, env={}) == home / ".codeium/windsurf/mcp_config.json"
    assert config_path(windsurf, home, project=tmp_path / "p") is None
    assert config_path(vscode, home, project=tmp_path / "p") == tmp_path / "p/.vscode/mcp.json"


def test_the_registered_command_starts_a_working_server(home, tmp_path: Path):
    pytest.importorskip("mcp.server.mcpserver")
    import anyio
    from mcp import Client, StdioServerParameters

    assert fsdp("install", "--client", "cursor", "--project", tmp_path, env=home).code == 0
    registered = entry(tmp_path / ".cursor" / "mcp.json")

    async def talk() -> tuple[list[str], str]:
        params = StdioServerParameters(command=registered["command"], args=registered["args"])
        async with Client(params) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("env", {})
            return tools, text_of(result)

    tools, env_text = anyio.run(talk)
    assert "lint" in tools and "env" in tools
    assert "backend_recommendation" in env_text


# --- the splice itself -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"mcpServers":{"a":1}}',
        '{"mcpServers": {}}',
        '{\n  "mcpServers": {\n  }\n}\n',
        '{"x": [1, {"mcpServers": 2}], "mcpServers": {"b": {"c": [1, 2]}}}',
    ],
)
def test_splice_round_trip(text: str):
    value = {"command": "py", "args": ["-m", "fsdp_skill", "mcp"]}
    added = json_splice.set_member(text, False, ("mcpServers",), SERVER_NAME, value)
    parsed = json.loads(added)
    assert parsed["mcpServers"][SERVER_NAME] == value
    del parsed["mcpServers"][SERVER_NAME]
    assert parsed == json.loads(text)
    assert json_splice.remove_member(added, False, ("mcpServers",), SERVER_NAME) in (
        text,
        text.replace("{\n  }", "{}"),
    )


def test_splice_removes_a_member_in_the_middle():
    text = '{"s": {"a": 1, "pytorch-fsdp": {"x": 2}, "b": 3}}'
    assert json_splice.remove_member(text, False, ("s",), SERVER_NAME) == '{"s": {"a": 1, "b": 3}}'


def test_strip_comments_keeps_strings_and_positions():
    text = '{"url": "http://x//y", /* c */ "a": [1,], // tail\n}'
    clean = json_splice.strip_comments(text)
    assert len(clean) == len(text)
    assert json.loads(clean) == {"url": "http://x//y", "a": [1]}
    with pytest.raises(json_splice.JsonSyntaxError):
        json_splice.load('{"a": 1 /* open', True)


def test_a_config_install_created_goes_with_its_client_folders(home):
    assert fsdp("install", "--client", "vscode", "--client", "claude-desktop", env=home).code == 0
    config = Path(home["HOME"]) / ".config"
    assert (config / "Code/User/mcp.json").is_file()
    assert fsdp("uninstall", "--client", "vscode", "--client", "claude-desktop", env=home).code == 0
    assert list(config.iterdir()) == []  # Code/User and Claude removed; ~/.config is shared


def test_a_linked_config_is_edited_where_it_lives(home, tmp_path: Path):
    dotfiles = tmp_path / "dotfiles" / "cursor-mcp.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"mcpServers": {}}\n')
    dotfiles.chmod(0o600)
    link = Path(home["HOME"]) / CURSOR
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles)
    assert fsdp("install", "--client", "cursor", env=home).code == 0
    assert link.is_symlink() and SERVER_NAME in json.loads(dotfiles.read_text())["mcpServers"]
    assert dotfiles.stat().st_mode & 0o777 == 0o600
    assert fsdp("uninstall", "--client", "cursor", env=home).code == 0
    assert link.is_symlink() and json.loads(dotfiles.read_text()) == {"mcpServers": {}}


def test_an_unwritable_config_location_stops_before_anything_is_written(home):
    blocker = put(home, ".config/Claude", "a file where Claude Desktop's folder should be")
    result = fsdp("install", "--client", "claude-desktop", "--client", "claude-code", env=home)
    assert result.code == 2 and "cannot write" in result.err
    assert "Traceback" not in result.err
    assert not (Path(home["HOME"]) / ".claude").exists()
    assert blocker.read_text() == "a file where Claude Desktop's folder should be"
