"""A real MCP client session against ``python -m fsdp_skill mcp`` over stdio, usable from
synchronous tests: the client runs in a background event loop behind an anyio portal."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio.from_thread
import mcp_types as types
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[2]


class Session:
    """Blocking wrappers around one connected ``mcp.Client``."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, client: Client) -> None:
        self.portal = portal
        self.client = client

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        return self.portal.call(self.client.call_tool, name, arguments or {})

    def list_tools(self) -> list[types.Tool]:
        return self.portal.call(self.client.list_tools).tools

    def list_resources(self) -> list[types.Resource]:
        return self.portal.call(self.client.list_resources).resources

    def read_resource(self, uri: str) -> types.ReadResourceResult:
        return self.portal.call(self.client.read_resource, uri)


@contextlib.contextmanager
def open_session(
    roots: Sequence[Path] | None = None,
    server_args: Sequence[str] = (),
    cwd: Path | None = None,
    mode: str = "auto",
) -> Iterator[Session]:
    """Spawn the server and connect; ``roots`` None: the client has no roots capability."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fsdp_skill", "mcp", *server_args],
        env=env,
        cwd=str(cwd or REPO),
    )
    kwargs: dict[str, Any] = {"mode": mode, "read_timeout_seconds": 120}
    if roots is not None:
        listed = [types.Root(uri=Path(r).resolve().as_uri(), name=Path(r).name) for r in roots]

        async def list_roots(context: Any) -> types.ListRootsResult:
            return types.ListRootsResult(roots=listed)

        kwargs["list_roots_callback"] = list_roots
    with anyio.from_thread.start_blocking_portal() as portal:
        client = Client(params, **kwargs)
        with portal.wrap_async_context_manager(client) as connected:
            yield Session(portal, connected)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
