"""Malformed JSON-RPC frames on the server's stdin: each gets its JSON-RPC error back and the
server goes on serving (raw frames written to the process, as a broken client would)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the mcp 2.x SDK is not installed")

REPO = Path(__file__).resolve().parents[2]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "1"},
    },
}


class RawServer:
    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(REPO / "src"), env.get("PYTHONPATH")])
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fsdp_skill", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, frame: bytes) -> None:
        self.proc.stdin.write(frame + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 60) -> dict:
        return json.loads(self.lines.get(timeout=timeout))

    def close(self) -> tuple[int, str]:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        return self.proc.returncode, self.proc.stderr.read().decode()


@pytest.fixture()
def server():
    raw = RawServer()
    yield raw
    if raw.proc.poll() is None:
        raw.proc.kill()


@pytest.mark.parametrize(
    ("frame", "code", "frame_id"),
    [
        (b"not json at all", -32700, None),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list"', -32700, None),  # cut short
        (b"\xff\xfe\x00garbage", -32700, None),
        (b"{" * 100_000, -32700, None),
        (b"[1, 2, 3]", -32600, None),
        (b'{"jsonrpc": "2.0", "id": 2}', -32600, 2),
        (b'{"jsonrpc": "1.0", "id": "two", "method": "tools/list"}', -32600, "two"),
        (b'{"jsonrpc": "2.0", "id": true, "method": 5}', -32600, None),  # no valid id to echo
        (b"42", -32600, None),
    ],
    ids=[
        "text",
        "cut",
        "binary",
        "deep",
        "array",
        "no-method",
        "old-version",
        "bool-id",
        "number",
    ],
)
def test_a_bad_frame_gets_an_error_and_the_server_stays_up(server, frame, code, frame_id):
    server.send(frame)
    answer = server.receive()
    assert answer["jsonrpc"] == "2.0" and answer["id"] == frame_id
    assert answer["error"]["code"] == code
    server.send(json.dumps(INITIALIZE).encode())
    assert server.receive()["result"]["serverInfo"]["name"] == "pytorch-fsdp"
    returncode, err = server.close()
    assert returncode == 0 and "Traceback" not in err


def test_bad_frames_between_requests(server):
    server.send(json.dumps(INITIALIZE).encode())
    assert "result" in server.receive()
    server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
    server.send(b"}{")
    assert server.receive()["error"]["code"] == -32700
    server.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}).encode())
    answer = server.receive()
    assert answer["id"] == 7 and {t["name"] for t in answer["result"]["tools"]} >= {"lint", "hang"}
    assert server.close()[0] == 0
