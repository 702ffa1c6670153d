"""The crawler against a local docs site: redirects and stubs, scope, cache, faults, budgets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fsdp_skill.references import crawler, redirects
from tests.references.bundles import small_bundle
from tests.references.docs_server import HUGE_BYTES, SITE, docs_server

FAST = {"timeout": 0.5, "retries": 2, "backoff": 0.01, "max_page_bytes": HUGE_BYTES // 2}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FSDP_SKILL_CACHE", str(tmp_path / "cache"))


def test_stubs_are_followed_into_the_version_folder_and_pages_kept_under_it():
    with docs_server() as (base, log):
        result = crawler.crawl_pages(urls=(f"{base}/docs/stable/distributed.html",), **FAST)
    urls = {p.url for p in result.pages}
    assert f"{base}/docs/2.11/distributed.html" in urls
    assert not any("/stable/" in u for u in urls)  # the stub itself is no page
    assert all(
        "Redirecting" not in p.markdown and "Continue to" not in p.markdown for p in result.pages
    )
    page = next(p for p in result.pages if p.url.endswith("/2.11/distributed.html"))
    assert page.title == "Distributed communication package - torch.distributed"
    # the scope moved with the seed: the version folder's topic pages are followed
    asked = log.paths()
    assert "/docs/2.11/distributed.html" in asked
    linked = "/docs/2.11/generated/torch.nn.parallel.DistributedDataParallel.html"
    assert linked in asked  # linked from the page and in the version folder: in scope now
    assert "/docs/2.11/torch_nccl_environment_variables.html" in asked  # from the navigation
    assert not any("/_modules/" in p or "?" in p for p in asked)
    assert "/docs/2.11/data.html" not in asked  # in the folder but about no topic
    assert asked.count("/docs/2.11/distributed.html") == 1  # not fetched again through links


def test_each_kind_of_stub_is_a_redirect_and_a_real_page_is_not():
    stub = (SITE / "docs" / "stable" / "elastic" / "run.html").read_text()
    here = "https://docs.pytorch.org/docs/stable/elastic/run.html"
    final = "https://docs.pytorch.org/docs/2.11/elastic/run.html"
    assert redirects.target(stub, here) == final  # refresh header, script and canonical
    script_only = "\n".join(ln for ln in stub.split("\n") if "http-equiv" not in ln)
    assert redirects.target(script_only, here) == final
    canonical_only = "\n".join(ln for ln in script_only.split("\n") if "location" not in ln)
    assert redirects.target(canonical_only, here) == final
    real = (SITE / "docs" / "2.11" / "distributed.html").read_text()
    # a real page names the stable stub as its canonical URL: that is not a redirect
    assert 'rel="canonical" href="https://docs.pytorch.org/docs/stable/' in real
    assert redirects.target(real, "https://docs.pytorch.org/docs/2.11/distributed.html") == ""
    assert redirects.docs_root(here) == "https://docs.pytorch.org/docs/"
    assert (
        redirects.docs_root("https://m.corp/pytorch/docs/2.11/x.html")
        == "https://m.corp/pytorch/docs/"
    )


def test_redirects_stay_within_the_host_and_docs_root_with_loop_and_count_limits():
    scope = crawler.Scope(("https://docs.pytorch.org/docs/stable/elastic/run.html",))
    source = "https://docs.pytorch.org/docs/stable/elastic/run.html"
    assert scope.follows(source, "https://docs.pytorch.org/docs/2.11/elastic/run.html")
    assert not scope.follows(source, "https://evil.example/docs/2.11/elastic/run.html")
    assert not scope.follows(source, "https://docs.pytorch.org/blog/elastic.html")
    assert not scope.follows(source, "https://docs.pytorch.org/docs/2.11/x.html?next=evil")
    with docs_server() as (base, _):
        result = crawler.crawl_pages(
            urls=(f"{base}/docs/fsdp-loop.html", f"{base}/docs/fsdp-hops.html"), **FAST
        )
    reasons = {f.url.rsplit("/", 1)[-1]: f.reason for f in result.failures}
    assert reasons["fsdp-loop.html"].startswith("redirect loop")
    assert reasons["fsdp-hops.html"] == f"more than {crawler.MAX_REDIRECTS} redirects"


def test_faults_are_reported_and_bounded():
    names = ("distributed-slow", "fsdp-missing", "fsdp-huge", "fsdp-stream")
    with docs_server() as (base, log):
        result = crawler.crawl_pages(urls=tuple(f"{base}/docs/{n}.html" for n in names), **FAST)
    reasons = {f.url.rsplit("/", 1)[-1]: f.reason for f in result.failures}
    assert "timed out" in reasons["distributed-slow.html"]
    assert log.count("/docs/distributed-slow.html") == FAST["retries"]  # retried, then given up
    assert reasons["fsdp-missing.html"] == "HTTP 404"
    assert log.count("/docs/fsdp-missing.html") == 1  # a 404 is not retried
    assert "byte budget" in reasons["fsdp-huge.html"]
    assert "byte budget" in reasons["fsdp-stream.html"]  # counted while reading, no header


def test_a_page_that_trickles_in_is_cut_off_at_its_deadline():
    """One byte every 5 s never trips a 10 s read timeout; only a page deadline stops it."""
    with docs_server() as (base, _):
        start = time.monotonic()
        result = crawler.crawl_pages(
            urls=(f"{base}/docs/fsdp-trickle.html",),
            timeout=10,
            page_deadline=1,
            retries=3,
            backoff=0.01,
        )
        elapsed = time.monotonic() - start
    assert result.pages == []
    assert result.failures[0].reason == "took longer than the 1s page deadline"
    assert elapsed < 4, f"the crawl waited {elapsed:.1f}s for a 1s page deadline"


def test_page_and_byte_budgets():
    with docs_server() as (base, _):
        seed = (f"{base}/docs/stable/distributed.html",)
        result = crawler.crawl_pages(urls=seed, max_pages=1, **FAST)
    assert len(result.pages) == 1
    assert any("page budget of 1" in f.reason for f in result.failures)
    with docs_server() as (base, _):
        seed = (f"{base}/docs/stable/distributed.html",)
        result = crawler.crawl_pages(urls=seed, max_bytes=10, **FAST)
    assert len(result.pages) == 1 and any("byte budget" in f.reason for f in result.failures)


def test_validators_are_cached_and_sent_back():
    with docs_server() as (base, log):
        seed = (f"{base}/docs/fsdp-cached.html",)
        first = crawler.crawl_pages(urls=seed, **FAST)
        second = crawler.crawl_pages(urls=seed, **FAST)
    assert first.pages[0].markdown == second.pages[0].markdown
    headers = [h for p, h in log.requests if p == "/docs/fsdp-cached.html"]
    assert "if-none-match" not in headers[0]
    assert headers[1]["if-none-match"] == '"fsdp-cached-v1"'
    assert second.bytes == 0  # 304: nothing downloaded again


def test_a_server_error_is_retried_and_last_modified_is_revalidated():
    with docs_server() as (base, log):
        flaky = crawler.crawl_pages(urls=(f"{base}/docs/fsdp-flaky.html",), **FAST)
        seed = (f"{base}/docs/fsdp-lastmod.html",)
        first = crawler.crawl_pages(urls=seed, **FAST)
        second = crawler.crawl_pages(urls=seed, **FAST)
    assert [p.title for p in flaky.pages] == ["Flaky"] and log.count("/docs/fsdp-flaky.html") == 2
    headers = [h for p, h in log.requests if p == "/docs/fsdp-lastmod.html"]
    assert "if-modified-since" not in headers[0]
    assert headers[1]["if-modified-since"] == "Wed, 21 Oct 2026 07:28:00 GMT"
    assert second.pages[0].markdown == first.pages[0].markdown and second.bytes == 0


def test_an_unreachable_host_is_given_up_after_two_pages():
    with docs_server() as (base, _):
        pass  # the port is closed again: nothing listens there
    urls = tuple(f"{base}/docs/{name}.html" for name in ("distributed", "fsdp", "fsdp-cached"))
    result = crawler.crawl_pages(urls=urls, cache=False, **FAST)
    reasons = [f.reason for f in result.failures]
    assert reasons[0].startswith("cannot connect") and reasons[1].startswith("cannot connect")
    assert reasons[2] == f"skipped: {base.split('//')[1]} could not be reached"


def test_default_scope_follows_topic_pages_under_the_seed_folders():
    scope = crawler.Scope(crawler.WEB_SEEDS)
    docs = "https://docs.pytorch.org/docs/stable/"
    assert scope.allows(docs + "distributed.tensor.parallel.html")
    assert scope.allows(docs + "generated/torch.nn.parallel.DistributedDataParallel.html")
    assert scope.allows(docs + "elastic/rendezvous.html")
    assert scope.allows("https://docs.pytorch.org/tutorials/intermediate/ddp_tutorial.html")
    assert not scope.allows(docs + "torch.html")  # under a seed folder, but off topic
    assert not scope.allows(docs + "_modules/torch/distributed/distributed_c10d.html")
    assert not scope.allows(docs + "distributed.html?highlight=fsdp")
    assert not scope.allows("https://example.com/docs/stable/distributed.html")
    assert not scope.allows("https://docs.pytorch.org/docs/2.4/distributed.html")
    assert not scope.allows(docs + "../../tutorials/../evil/distributed.html")


def test_progress_bar_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    with crawler._progress_bar(True) as bar:
        assert bar is None
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    with crawler._progress_bar(False) as bar:
        assert bar is None  # --json asks for no progress, terminal or not
    from rich.progress import Progress

    assert isinstance(crawler._progress_bar(True), Progress)


def _refresh(url: str, bundle: Path) -> list[str]:
    """The command line of a web refresh of ``bundle`` from ``url``."""
    return [
        *(sys.executable, "-m", "fsdp_skill", "refresh", "--source", "web"),
        *("--url", url, "--dest", str(bundle), "--json"),
    ]


def test_a_refresh_killed_while_a_page_downloads_leaves_nothing_the_next_run_keeps(tmp_path):
    bundle = small_bundle(tmp_path)
    cache = tmp_path / "cache" / "web"
    env = {**os.environ, "FSDP_SKILL_CACHE": str(tmp_path / "cache")}
    before = sorted(p.name for p in bundle.rglob("*"))
    with docs_server() as (base, _):
        child = subprocess.Popen(_refresh(f"{base}/docs/distributed-stall.html", bundle), env=env)
        try:
            deadline = time.monotonic() + 30
            while not list(cache.glob(".*.part")) and time.monotonic() < deadline:
                time.sleep(0.05)
            staged = list(cache.glob(".*.part"))
            assert staged, "the download was never staged"
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL
        assert all(p.exists() for p in staged)  # killed mid-download: the staged body is left
        assert sorted(p.name for p in bundle.rglob("*")) == before  # the bundle is untouched
        done = subprocess.run(
            _refresh(f"{base}/docs/stable/fsdp.html", bundle),
            env=env,
            capture_output=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    leftovers = [p.name for p in cache.iterdir() if p.name.endswith((".part", ".tmp"))]
    assert leftovers == []
    assert (bundle / "references" / "web-fsdp.md").exists()
    assert not [p for p in bundle.iterdir() if p.name.startswith(".")]  # no staging left
