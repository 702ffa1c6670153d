"""A local docs site for the crawler tests: the fixture pages plus pages that misbehave."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SITE = Path(__file__).parent / "fixtures" / "site"
SLOW_SECONDS = 1.0
TRICKLE_SECONDS = 5.0
"""``/docs/fsdp-trickle.html`` sends its response one byte at a time, this far apart."""
STALL_BYTES = 2048
"""``/docs/distributed-stall.html`` sends this much of its body, then nothing until shut."""
HUGE_BYTES = 3 * 1024 * 1024
ETAG = '"fsdp-cached-v1"'
LAST_MODIFIED = "Wed, 21 Oct 2026 07:28:00 GMT"


@dataclass
class Log:
    """What the server was asked: (path, headers) per request, in order."""

    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]

    def count(self, path: str) -> int:
        return self.paths().count(path)


def _handler(log: Log, stop: threading.Event):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep the test output clean
            pass

        def _send(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
            self.send_response(status)
            headers = {"Content-Type": "text/html; charset=utf-8", **(headers or {})}
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        def do_GET(self) -> None:  # noqa: N802 (the http.server API)
            path = self.path
            log.requests.append((path, {k.lower(): v for k, v in self.headers.items()}))
            if path == "/docs/distributed-slow.html":
                time.sleep(SLOW_SECONDS)
                return self._send(200, b"<html><body><h1>late</h1></body></html>")
            if path == "/docs/fsdp-trickle.html":  # every byte arrives well within a timeout
                response = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html>slow</html>"
                for byte in response:
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        return None
                    if stop.wait(TRICKLE_SECONDS):
                        return None
                return None
            if path == "/docs/distributed-stall.html":  # part of the body, then silence
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(STALL_BYTES * 2))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(b"<p>" + b"s" * (STALL_BYTES - 3))
                    self.wfile.flush()
                stop.wait(60)
                return None
            hops = re.fullmatch(r"/docs/fsdp-hops(?:-(\d+))?\.html", path)
            if hops:  # a chain of redirects longer than any crawler should follow
                following = int(hops.group(1) or 0) + 1
                return self._send(302, headers={"Location": f"fsdp-hops-{following}.html"})
            if path == "/docs/fsdp-loop.html":
                return self._send(302, headers={"Location": "fsdp-loop-b.html"})
            if path == "/docs/fsdp-loop-b.html":
                return self._send(302, headers={"Location": "/docs/fsdp-loop.html"})
            if path == "/docs/fsdp-huge.html":
                filler = b"<p>" + b"sharding " * (HUGE_BYTES // 9) + b"</p>"
                return self._send(200, b"<html><body>" + filler + b"</body></html>")
            if path == "/docs/fsdp-stream.html":  # no Content-Length: the body ends at close
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                try:
                    for _ in range(HUGE_BYTES // 65536 + 1):
                        self.wfile.write(b"<p>" + b"x" * 65529 + b"</p>")
                except (BrokenPipeError, ConnectionResetError):
                    pass
                return None
            if path == "/docs/fsdp-flaky.html":  # fails once, then works: a retry must save it
                if log.count(path) == 1:
                    return self._send(503, b"busy")
                return self._send(
                    200, b"<html><body><main><h1>Flaky</h1><p>ok</p></main></body></html>"
                )
            if path == "/docs/fsdp-lastmod.html":
                if self.headers.get("If-Modified-Since") == LAST_MODIFIED:
                    return self._send(304)
                body = b"<html><body><main><h1>Dated</h1><p>by date</p></main></body></html>"
                return self._send(200, body, {"Last-Modified": LAST_MODIFIED})
            if path == "/docs/fsdp-cached.html":
                if self.headers.get("If-None-Match") == ETAG:
                    return self._send(304, headers={"ETag": ETAG})
                body = (
                    b"<html><head><title>Cached FSDP page</title></head><body>"
                    b"<article role='main'><h1>Cached</h1><h2>Reshard after forward</h2>"
                    b"<p>Validators are kept.</p></article></body></html>"
                )
                return self._send(200, body, {"ETag": ETAG})
            if "escape-fsdp" in path:
                body = (
                    b"<html><head><title>../../../../evil</title></head><body><main>"
                    b"<h1>../../escape</h1><p>This page tries to escape.</p>"
                    b"<a href='../../../../../../tmp/distributed-evil.html'>up</a></main>"
                    b"</body></html>"
                )
                return self._send(200, body)
            local = (SITE / path.lstrip("/").split("?")[0]).resolve()
            if SITE.resolve() in local.parents and local.is_file():
                return self._send(200, local.read_bytes())
            return self._send(404, b"<html><body>not found</body></html>")

    return Handler


@contextmanager
def docs_server() -> Iterator[tuple[str, Log]]:
    """Serve the site on a free port of 127.0.0.1; yields (base URL, request log)."""
    log = Log()
    stop = threading.Event()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(log, stop))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", log
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
