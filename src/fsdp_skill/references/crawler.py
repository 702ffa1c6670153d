"""Fetch the official docs pages: in scope only, cached, retried, within budgets.

- Scope: a page is fetched when it is a seed, or when it lies under a seed's folder and its
  path names a topic (``topics.WEB_TOPIC_WORDS``). Redirects, HTTP ones and redirect stubs
  alike (``redirects``), are followed by hand within the host and docs root of the page
  that redirects, at most ``MAX_REDIRECTS`` times (a loop is reported, not followed); a page
  is stored under its final URL, and a seed's final folder joins the scope.
- Cache: each page's body and its ``ETag``/``Last-Modified`` are kept; the next crawl asks
  with ``If-None-Match``/``If-Modified-Since`` and reuses the body on ``304``. A body is
  staged in a ``.part`` file while it downloads; a crawl killed half-way leaves one, and
  the next crawl removes it.
- Faults: time-outs, connection errors, ``429`` and ``5xx`` are retried with exponential
  backoff; other errors, wrong content types and pages over the per-page byte budget fail at
  once. A page that takes longer than the page deadline, however steadily its bytes
  trickle in, is cut off. Every failure is reported with its reason; the crawl goes on with
  the next page, except that a host which cannot be reached twice in a row is skipped.
- Budgets: at most ``max_pages`` pages and ``max_bytes`` downloaded bytes per crawl.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

from fsdp_skill import __version__, atomic
from fsdp_skill.references import html2md, redirects, seeds
from fsdp_skill.references.topics import WEB_SEEDS, WEB_TOPIC_WORDS

MAX_REDIRECTS = 5
UNREACHABLE_AFTER = 2
"""Pages of a host that failed to connect this many times in a row are skipped, not retried."""
USER_AGENT = f"fsdp-skill/{__version__} (docs refresh)"


@dataclass(frozen=True)
class Page:
    url: str
    title: str
    markdown: str
    fetched: str
    """UTC date the content was downloaded (kept when the server answers 304)."""


@dataclass(frozen=True)
class Failure:
    url: str
    reason: str

    def as_dict(self) -> dict:
        return {"url": self.url, "reason": self.reason}


@dataclass
class CrawlResult:
    pages: list[Page] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    bytes: int = 0
    docs_version: str | None = None
    """The docs version the seeds were read from (``stable``, ``2.11``); None for pages
    named with ``--url`` and no ``--version``."""


class FetchError(Exception):
    """A page could not be fetched; ``retry`` says whether trying again may help."""

    def __init__(self, reason: str, retry: bool = False, unreachable: bool = False) -> None:
        super().__init__(reason)
        self.retry = retry
        self.unreachable = unreachable
        """The host could not be reached at all (no DNS, no route, refused)."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D401
        return None  # surface 3xx as HTTPError: redirects are followed by the crawler


class _Deadline:
    """Cuts a request off when its time is up: shuts down the sockets it watches."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._request = 0
        """Counts requests, so that a late timer of an earlier one cuts nothing off."""
        self.expired = False

    @contextlib.contextmanager
    def running(self, seconds: float):
        with self._lock:
            self._request += 1
            self._sockets, self.expired = [], False
            timer = threading.Timer(seconds, self._expire, (self._request,))
        timer.daemon = True
        timer.start()
        try:
            yield self
        finally:
            timer.cancel()
            with self._lock:
                self._sockets = []

    def watch(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self, request: int) -> None:
        with self._lock:
            if request != self._request:
                return
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _watched(connection_class, deadline: _Deadline):
    """A connection factory whose connections report their socket to ``deadline``."""

    def make(*args, **kwargs):
        connection = connection_class(*args, **kwargs)
        connect = connection.connect

        def connect_and_watch() -> None:
            connect()
            deadline.watch(connection.sock)

        connection.connect = connect_and_watch
        return connection

    return make


class _Watching:
    """A handler whose connections are watched by a deadline."""

    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def do_open(self, http_class, req, **kwargs):
        return super().do_open(_watched(http_class, self.deadline), req, **kwargs)


class _WatchedHTTP(_Watching, urllib.request.HTTPHandler):
    pass


class _WatchedHTTPS(_Watching, urllib.request.HTTPSHandler):
    pass


@dataclass
class Scope:
    """Which URLs a crawl may fetch."""

    seeds: tuple[str, ...]
    words: tuple[str, ...] = WEB_TOPIC_WORDS
    moved_to: set[str] = field(default_factory=set)
    """Folders the seeds redirected into (``/docs/2.11/`` for a ``/docs/stable/`` stub)."""

    @property
    def folders(self) -> tuple[str, ...]:
        return tuple(sorted({redirects.folder(s) for s in self.seeds} | self.moved_to))

    def allows(self, url: str) -> bool:
        url = urldefrag(url)[0]
        if url in self.seeds:
            return True
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or parts.query:
            return False
        folder = next((f for f in self.folders if url.startswith(f)), None)
        if folder is None:
            return False
        rest = url[len(folder) :].lower()
        if "/../" in f"/{rest}" or not (rest.endswith((".html", "/")) or "." not in rest):
            return False
        if any(part.startswith("_") for part in rest.split("/")[:-1]):
            return False  # Sphinx's own folders: _modules (source listings), _sources, _static
        return any(word in rest for word in self.words)

    def follows(self, source: str, target: str) -> bool:
        """Whether a redirect from ``source`` to ``target`` is followed: in scope, or within
        the same host and docs root (``/docs/stable/x.html`` -> ``/docs/2.11/x.html``)."""
        if self.allows(target):
            return True
        parts = urlsplit(target)
        if parts.scheme not in ("http", "https") or parts.query or "/../" in parts.path:
            return False
        root = urlsplit(redirects.docs_root(source))
        return parts.netloc == root.netloc and parts.path.startswith(root.path)


class Cache:
    """Bodies and validators of fetched pages, one pair of files per URL."""

    STAGED = ".part"

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    def _paths(self, url: str) -> tuple[Path, Path]:
        assert self.folder is not None
        key = hashlib.sha256(url.encode()).hexdigest()[:32]
        return self.folder / f"{key}.json", self.folder / f"{key}.body"

    def get(self, url: str) -> tuple[dict, bytes] | None:
        if self.folder is None:
            return None
        meta_path, body_path = self._paths(url)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            return meta, body_path.read_bytes()
        except (OSError, ValueError):
            return None

    @contextlib.contextmanager
    def staging(self, url: str):
        """A file to write ``url``'s body into while it downloads (None without a cache or
        when the folder cannot be written); removed unless ``put`` moved it into place."""
        part = handle = None
        if self.folder is not None:
            part = self.folder / f".{self._paths(url)[1].name}.{os.getpid()}{self.STAGED}"
            with contextlib.suppress(OSError):
                self.folder.mkdir(parents=True, exist_ok=True)
                handle = part.open("wb")
        if part is None or handle is None:
            yield None
            return
        try:
            with handle:
                yield handle
        finally:
            with contextlib.suppress(OSError):
                part.unlink()

    def put(self, url: str, meta: dict, staged=None, body: bytes = b"") -> None:
        """Keep ``url``'s body (the ``staged`` file, or ``body``) and its validators."""
        if self.folder is None:
            return
        with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
            self.folder.mkdir(parents=True, exist_ok=True)
            meta_path, body_path = self._paths(url)
            if staged is not None and not staged.closed:
                staged.flush()
                os.replace(staged.name, body_path)
            else:
                atomic.write_bytes(body_path, body)
            atomic.write_text(meta_path, json.dumps(meta, sort_keys=True))

    @contextlib.contextmanager
    def owned(self):
        """Hold the cache while a crawl runs; the first crawl to hold it removes what a
        killed crawl left behind (staged bodies, half-written files)."""
        if self.folder is None:
            yield
            return
        try:
            import fcntl
        except ImportError:  # no advisory locks here: leave leftovers rather than guess
            yield
            return
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
        try:
            handle = open(self.folder / ".lock", "a+b")  # noqa: SIM115 (held for the crawl)
        except OSError:
            yield
            return
        with handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield  # another crawl holds it: its staged files are not leftovers
                return
            self._remove_leftovers()
            yield

    def _remove_leftovers(self) -> None:
        assert self.folder is not None
        for path in self.folder.glob(".*"):
            if path.name.endswith((self.STAGED, ".tmp")) and path.is_file():
                with contextlib.suppress(OSError):
                    path.unlink()


def default_cache() -> Path:
    from fsdp_skill.cache import cache_dir

    return cache_dir() / "web"


@dataclass
class Crawler:
    scope: Scope
    cache: Cache
    max_pages: int = 60
    max_bytes: int = 40 * 1024 * 1024
    max_page_bytes: int = 5 * 1024 * 1024
    timeout: float = 20.0
    """Seconds one network read may wait."""
    page_deadline: float = 60.0
    """Seconds one page may take in all: connecting, headers and body."""
    retries: int = 3
    backoff: float = 1.0
    opener: urllib.request.OpenerDirector | None = None
    downloaded: int = 0

    def __post_init__(self) -> None:
        self._deadline = _Deadline()
        if self.opener is None:
            self.opener = urllib.request.build_opener(
                _NoRedirects, _WatchedHTTP(self._deadline), _WatchedHTTPS(self._deadline)
            )

    def _request(self, url: str, cached: tuple[dict, bytes] | None):
        """One GET within the page deadline: (status, headers, body); 3xx and 304 come back
        as statuses."""
        with self._deadline.running(self.page_deadline) as deadline:
            try:
                return self._get(url, cached)
            except (FetchError, OSError, http.client.HTTPException, ValueError) as exc:
                if deadline.expired:
                    reason = f"took longer than the {self.page_deadline:g}s page deadline"
                    raise FetchError(reason) from None
                if isinstance(exc, FetchError):
                    raise
                retry = not isinstance(exc, ValueError)  # a malformed URL stays malformed
                raise FetchError(f"connection failed: {exc}", retry=retry) from None

    def _get(self, url: str, cached: tuple[dict, bytes] | None):
        headers = {"User-Agent": USER_AGENT, "Accept": "text/html"}
        if cached:
            if cached[0].get("etag"):
                headers["If-None-Match"] = cached[0]["etag"]
            if cached[0].get("last_modified"):
                headers["If-Modified-Since"] = cached[0]["last_modified"]
        request = urllib.request.Request(url, headers=headers)
        try:
            response = self.opener.open(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            status = exc.code
            info = {k.lower(): v for k, v in (exc.headers or {}).items()}
            exc.close()
            if status in (301, 302, 303, 307, 308, 304):
                return status, info, b""
            retry = status == 429 or status >= 500
            raise FetchError(f"HTTP {status}", retry=retry) from None
        except TimeoutError:
            raise FetchError(f"timed out after {self.timeout:g}s", retry=True) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                raise FetchError(f"timed out after {self.timeout:g}s", retry=True) from None
            raise FetchError(f"cannot connect: {reason}", retry=True, unreachable=True) from None
        except ConnectionRefusedError as exc:
            raise FetchError(f"cannot connect: {exc}", retry=True, unreachable=True) from None
        with response:
            info = {k.lower(): v for k, v in response.headers.items()}
            ctype = info.get("content-type", "text/html")
            if "html" not in ctype:
                raise FetchError(f"not an HTML page ({ctype})")
            length = info.get("content-length", "")
            if length.isdigit() and int(length) > self.max_page_bytes:
                raise FetchError(f"page larger than the {self.max_page_bytes} byte budget")
            with self.cache.staging(url) as staged:
                body = self._read(response, staged)
                if length.isdigit() and len(body) < int(length):
                    reason = f"connection closed after {len(body)} of {length} bytes"
                    raise FetchError(reason, retry=True)
                if response.status == 200:
                    self.cache.put(url, _validators(url, info), staged, body)
            return response.status, info, body

    def _read(self, response, staged) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                chunk = response.read1(65536)
            except TimeoutError:
                raise FetchError(f"timed out after {self.timeout:g}s", retry=True) from None
            if not chunk:
                break
            size += len(chunk)
            if size > self.max_page_bytes:
                raise FetchError(f"page larger than the {self.max_page_bytes} byte budget")
            chunks.append(chunk)
            if staged is not None and not staged.closed:
                try:
                    staged.write(chunk)
                except OSError:  # a full cache only costs time: the page is kept in memory
                    staged.close()
        if self._deadline.expired:  # the socket was shut: what came is not the whole page
            raise FetchError(f"took longer than the {self.page_deadline:g}s page deadline")
        self.downloaded += size
        return b"".join(chunks)

    def _with_retries(self, url: str, cached):
        attempt = 0
        while True:
            try:
                return self._request(url, cached)
            except FetchError as exc:
                attempt += 1
                if not exc.retry or attempt >= self.retries:
                    raise
                time.sleep(min(self.backoff * 2 ** (attempt - 1), 30.0))

    def _load(self, url: str) -> tuple[str, str, str]:
        """(HTTP redirect target or '', HTML text, fetch date) of one URL."""
        cached = self.cache.get(url)
        status, info, body = self._with_retries(url, cached)
        if status in (301, 302, 303, 307, 308):
            return urldefrag(urljoin(url, info.get("location", "")))[0], "", ""
        if status == 304:
            if not cached:
                raise FetchError("HTTP 304 for a page that is not cached")
            fetched = str(cached[0].get("fetched") or _today())
            return "", cached[1].decode("utf-8", "replace"), fetched
        return "", _decode(body, info.get("content-type", "")), _today()

    def fetch(self, url: str) -> tuple[str, str, str]:
        """(final URL, HTML text, fetch date) of an in-scope page, following redirects and
        redirect stubs."""
        seen = [url]
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            location, text, fetched = self._load(current)
            target = location or redirects.target(text, current)
            if not target:
                return current, text, fetched
            target = urldefrag(target)[0]
            if target in seen:
                raise FetchError("redirect loop: " + " -> ".join([*seen, target]))
            if not self.scope.follows(current, target):
                raise FetchError(f"redirects out of scope to {target}")
            seen.append(target)
            current = target
        raise FetchError(f"more than {MAX_REDIRECTS} redirects")

    def exists(self, url: str) -> bool:
        """Whether ``url`` is a page of its own (not missing, not redirected elsewhere)."""
        try:
            return self.fetch(url)[0] == url
        except FetchError:
            return False

    def crawl(self, on_page=None) -> CrawlResult:
        """Breadth-first from the seeds; ``on_page(url, done, total)`` reports progress."""
        result = CrawlResult()
        queue = deque(self.scope.seeds)
        queued = set(queue)
        done: set[str] = set()
        unreachable: dict[str, int] = {}
        while queue:
            url = queue.popleft()
            host = urlsplit(url).netloc
            if unreachable.get(host, 0) >= UNREACHABLE_AFTER:
                result.failures.append(Failure(url, f"skipped: {host} could not be reached"))
                continue
            if len(result.pages) >= self.max_pages:
                result.failures.append(Failure(url, f"page budget of {self.max_pages} reached"))
                continue
            if self.downloaded >= self.max_bytes:
                result.failures.append(Failure(url, f"byte budget of {self.max_bytes} reached"))
                continue
            try:
                final, html, fetched = self.fetch(url)
            except FetchError as exc:
                result.failures.append(Failure(url, str(exc)))
                if exc.unreachable:
                    unreachable[host] = unreachable.get(host, 0) + 1
            else:
                unreachable.pop(host, None)
                queued.add(final)  # links to the final page are not fetched again
                if url in self.scope.seeds and final != url:
                    self.scope.moved_to.add(redirects.folder(final))
                if final not in done:
                    done.add(final)
                    self._convert(url, final, html, fetched, result, queue, queued)
            if on_page:
                on_page(url, len(result.pages) + len(result.failures), len(queued))
        result.bytes = self.downloaded
        return result

    def _convert(self, url, final, html, fetched, result, queue, queued) -> None:
        try:
            converted = html2md.convert(html, final)
        except (RecursionError, ValueError) as exc:
            result.failures.append(Failure(url, f"cannot convert the page: {exc}"))
            return
        result.pages.append(Page(final, converted.title, converted.markdown, fetched))
        for link in converted.links:
            if link not in queued and self.scope.allows(link):
                queued.add(link)
                queue.append(link)


def _validators(url: str, info: dict) -> dict:
    return {
        "url": url,
        "etag": info.get("etag", ""),
        "last_modified": info.get("last-modified", ""),
        "fetched": _today(),
    }


def _decode(body: bytes, content_type: str) -> str:
    charset = "utf-8"
    if "charset=" in content_type:
        charset = content_type.split("charset=")[-1].split(";")[0].strip()
    try:
        return body.decode(charset, "replace")
    except LookupError:
        return body.decode("utf-8", "replace")


def _today() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")


def _progress_bar(enabled: bool):
    """A rich progress bar on a terminal; a no-op elsewhere (pipes, --json)."""
    if not enabled or not sys.stderr.isatty():
        return contextlib.nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    return Progress(
        TextColumn("fetching docs"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        transient=True,
    )


def crawl_pages(
    urls: tuple[str, ...] | list[str] = (),
    base: str | None = None,
    version: str | None = None,
    progress: bool = False,
    cache: Path | None | bool = True,
    **limits,
) -> CrawlResult:
    """Crawl from ``urls`` (their folders are the scope) or from the official pages.

    The official pages are moved onto the mirror at ``base`` when given, and read from the
    docs of ``version``: by default the installed torch's, when the site has them, else
    ``stable``. ``limits`` set ``max_pages``, ``max_bytes``, ``max_page_bytes``,
    ``timeout``, ``page_deadline``, ``retries`` and ``backoff``; ``cache=False`` disables
    the validator cache.
    """
    urls = tuple(seeds.check_url(u, "--url") for u in urls)
    if base is not None:
        seeds.check_url(base, "--base")
        if urls:
            from fsdp_skill.errors import UsageError

            raise UsageError("--base moves the official pages onto a mirror; give it or --url")
    if version is not None:
        seeds.check_version(version)
    folder = default_cache() if cache is True else (cache or None)
    crawler = Crawler(Scope(()), Cache(folder), **limits)
    with crawler.cache.owned(), _progress_bar(progress) as bar:
        docs_version = version  # None for named pages read as they are
        if urls:
            start = tuple(seeds.with_version(u, version) for u in urls) if version else urls
        else:
            official = tuple(seeds.rebase(u, base) for u in WEB_SEEDS) if base else WEB_SEEDS
            docs_version = version or _available_version(crawler, official)
            start = tuple(seeds.with_version(u, docs_version) for u in official)
        crawler.scope = Scope(start)
        task = bar.add_task("", total=len(start)) if bar else None

        def on_page(page_url: str, done: int, total: int) -> None:
            if bar is not None:
                bar.update(task, completed=done, total=total, description=page_url[-60:])

        result = crawler.crawl(on_page)
    result.docs_version = docs_version
    return result


def _available_version(crawler: Crawler, official: tuple[str, ...]) -> str:
    """The installed torch's docs version when the site has it, else ``stable``."""
    installed = seeds.installed_docs_version()
    docs = seeds.versioned(official)
    if installed and docs:
        probe = seeds.with_version(docs[0], installed)
        crawler.scope = Scope((probe,))
        if crawler.exists(probe):
            return installed
    return seeds.STABLE
