"""Fetch the official docs pages: in scope only, cached, retried, within budgets.

- Scope: a page is fetched when it is a seed, or when it lies under a seed's folder and its
  path names a topic (``topics.WEB_TOPIC_WORDS``). Redirects are followed by hand, only to
  in-scope pages and at most ``MAX_REDIRECTS`` times (a loop is reported, not followed).
- Cache: each page's body and its ``ETag``/``Last-Modified`` are kept; the next crawl asks
  with ``If-None-Match``/``If-Modified-Since`` and reuses the body on ``304``.
- Faults: time-outs, connection errors, ``429`` and ``5xx`` are retried with exponential
  backoff; other errors, wrong content types and pages over the per-page byte budget fail at
  once. Every failure is reported with its reason; the crawl goes on with the next page,
  except that a host which cannot be reached twice in a row is skipped (no network).
- Budgets: at most ``max_pages`` pages and ``max_bytes`` downloaded bytes per crawl.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

from fsdp_skill import __version__, atomic
from fsdp_skill.references import html2md
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


@dataclass
class Scope:
    """Which URLs a crawl may fetch."""

    seeds: tuple[str, ...]
    words: tuple[str, ...] = WEB_TOPIC_WORDS

    @property
    def folders(self) -> tuple[str, ...]:
        return tuple(sorted({s.rsplit("/", 1)[0] + "/" for s in self.seeds}))

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


class Cache:
    """Bodies and validators of fetched pages, one pair of files per URL."""

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

    def put(self, url: str, meta: dict, body: bytes) -> None:
        if self.folder is None:
            return
        with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
            self.folder.mkdir(parents=True, exist_ok=True)
            meta_path, body_path = self._paths(url)
            atomic.write_bytes(body_path, body)
            atomic.write_text(meta_path, json.dumps(meta, sort_keys=True))


def default_cache() -> Path:
    from fsdp_skill.search.index import cache_dir

    return cache_dir() / "web"


@dataclass
class Crawler:
    scope: Scope
    cache: Cache
    max_pages: int = 60
    max_bytes: int = 40 * 1024 * 1024
    max_page_bytes: int = 5 * 1024 * 1024
    timeout: float = 20.0
    retries: int = 3
    backoff: float = 1.0
    opener: urllib.request.OpenerDirector = field(
        default_factory=lambda: urllib.request.build_opener(_NoRedirects)
    )
    downloaded: int = 0

    def _request(self, url: str, cached: tuple[dict, bytes] | None) -> tuple[int, dict, bytes]:
        """One GET: (status, headers, body); 3xx and 304 come back as statuses."""
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
        except (ConnectionError, OSError) as exc:
            raise FetchError(f"connection failed: {exc}", retry=True, unreachable=True) from None
        with response:
            info = {k.lower(): v for k, v in response.headers.items()}
            ctype = info.get("content-type", "text/html")
            if "html" not in ctype:
                raise FetchError(f"not an HTML page ({ctype})")
            length = info.get("content-length", "")
            if length.isdigit() and int(length) > self.max_page_bytes:
                raise FetchError(f"page larger than the {self.max_page_bytes} byte budget")
            body = self._read(response)
            return response.status, info, body

    def _read(self, response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                chunk = response.read(65536)
            except TimeoutError:
                raise FetchError(f"timed out after {self.timeout:g}s", retry=True) from None
            if not chunk:
                break
            size += len(chunk)
            if size > self.max_page_bytes:
                raise FetchError(f"page larger than the {self.max_page_bytes} byte budget")
            chunks.append(chunk)
        self.downloaded += size
        return b"".join(chunks)

    def _with_retries(self, url: str, cached) -> tuple[int, dict, bytes]:
        attempt = 0
        while True:
            try:
                return self._request(url, cached)
            except FetchError as exc:
                attempt += 1
                if not exc.retry or attempt >= self.retries:
                    raise
                time.sleep(min(self.backoff * 2 ** (attempt - 1), 30.0))

    def fetch(self, url: str) -> tuple[str, str, str]:
        """(final URL, HTML text, fetch date) of an in-scope page, following redirects."""
        seen = [url]
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            cached = self.cache.get(current)
            status, info, body = self._with_retries(current, cached)
            if status == 304:
                if not cached:
                    raise FetchError("HTTP 304 for a page that is not cached")
                fetched = str(cached[0].get("fetched") or _today())
                return current, cached[1].decode("utf-8", "replace"), fetched
            if status in (301, 302, 303, 307, 308):
                target = urldefrag(urljoin(current, info.get("location", "")))[0]
                if target in seen:
                    raise FetchError("redirect loop: " + " -> ".join([*seen, target]))
                if not self.scope.allows(target):
                    raise FetchError(f"redirects out of scope to {target}")
                seen.append(target)
                current = target
                continue
            fetched = _today()
            meta = {
                "url": current,
                "etag": info.get("etag", ""),
                "last_modified": info.get("last-modified", ""),
                "fetched": fetched,
            }
            self.cache.put(current, meta, body)
            charset = "utf-8"
            if "charset=" in info.get("content-type", ""):
                charset = info["content-type"].split("charset=")[-1].split(";")[0].strip()
            try:
                text = body.decode(charset, "replace")
            except LookupError:
                text = body.decode("utf-8", "replace")
            return current, text, fetched
        raise FetchError(f"more than {MAX_REDIRECTS} redirects")

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
                if final not in done:
                    done.add(final)
                    try:
                        converted = html2md.convert(html, final)
                    except (RecursionError, ValueError) as exc:
                        result.failures.append(Failure(url, f"cannot convert the page: {exc}"))
                    else:
                        page = Page(final, converted.title, converted.markdown, fetched)
                        result.pages.append(page)
                        for link in converted.links:
                            if link not in queued and self.scope.allows(link):
                                queued.add(link)
                                queue.append(link)
            if on_page:
                on_page(url, len(result.pages) + len(result.failures), len(queued))
        result.bytes = self.downloaded
        return result


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
    url: str | None = None,
    seeds: tuple[str, ...] | None = None,
    progress: bool = False,
    cache: Path | None | bool = True,
    **limits,
) -> CrawlResult:
    """Crawl from ``url`` (its folder is the scope) or from the configured official pages.

    ``limits`` set ``max_pages``, ``max_bytes``, ``max_page_bytes``, ``timeout``, ``retries``
    and ``backoff``; ``cache=False`` disables the validator cache.
    """
    if url is not None and not url.startswith(("http://", "https://")):
        from fsdp_skill.errors import UsageError

        raise UsageError(f"--url must be an http(s) URL, not {url!r}")
    scope = Scope(seeds or ((url,) if url else WEB_SEEDS))
    folder = default_cache() if cache is True else (cache or None)
    crawler = Crawler(scope, Cache(folder), **limits)
    with _progress_bar(progress) as bar:
        task = bar.add_task("", total=len(scope.seeds)) if bar else None

        def on_page(page_url: str, done: int, total: int) -> None:
            if bar is not None:
                bar.update(task, completed=done, total=total, description=page_url[-60:])

        return crawler.crawl(on_page)
