"""The crawler against a local docs site: scope, conversion, cache, faults, safety."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fsdp_skill.references import crawler, refresh
from tests.references.docs_server import HUGE_BYTES, docs_server

FAST = {"timeout": 0.5, "retries": 2, "backoff": 0.01, "max_page_bytes": HUGE_BYTES // 2}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FSDP_SKILL_CACHE", str(tmp_path / "cache"))


def _bundle(tmp_path: Path) -> Path:
    bundle = tmp_path / "bundle" / "pytorch-fsdp"
    (bundle / "references").mkdir(parents=True)
    (bundle / "SKILL.md").write_text("---\nname: pytorch-fsdp\n---\n")
    (bundle / "references" / "mine.md").write_text("# Mine\n\n## Kept\n\nuser text\n")
    return bundle


def test_crawl_converts_pages_and_stays_in_scope():
    with docs_server() as (base, log):
        result = crawler.crawl_pages(url=f"{base}/docs/distributed.html", **FAST)
    urls = {p.url for p in result.pages}
    assert f"{base}/docs/distributed.html" in urls
    assert f"{base}/docs/fsdp.html" in urls
    asked = log.paths()
    assert not any(p.startswith("/outside") for p in asked)
    assert not any("?" in p for p in asked)
    assert "/docs/index.html" not in asked  # in the folder but about no topic
    assert not any("/_modules/" in p for p in asked)  # the [source] links
    page = next(p for p in result.pages if p.url.endswith("/distributed.html"))
    text = page.markdown
    assert page.title == "Distributed communication package - torch.distributed"
    assert "## Backends" in text and "### Which backend to use?" in text
    assert "| Backend | CPU | GPU |" in text and "all_reduce \\| broadcast" in text
    assert "### torch.distributed.init_process_group" in text
    assert "```python snippet\nimport torch.distributed as dist" in text
    assert "```bash\n$ torchrun" in text
    assert "> **Note:**" in text
    assert "- Rule of thumb: use **NCCL** for GPU training." in text
    assert "  - Nested point about *InfiniBand*." in text
    assert "[source]" not in text and "#\n" not in text and "Elsewhere" not in text
    old_theme = next(p for p in result.pages if p.url.endswith("/fsdp.html"))
    assert "```pycon\n>>> sharded_module = FSDP(my_module)" in old_theme.markdown
    assert "> **Warning:**" in old_theme.markdown
    assert "Distributed" not in old_theme.markdown.split("\n")[0]  # the left menu is dropped


def test_faults_are_reported_and_bounded():
    with docs_server() as (base, log):
        result = crawler.crawl_pages(url=f"{base}/docs/distributed.html", **FAST)
    reasons = {f.url.rsplit("/", 1)[-1]: f.reason for f in result.failures}
    assert "timed out" in reasons["distributed-slow.html"]
    assert log.count("/docs/distributed-slow.html") == FAST["retries"]  # retried, then given up
    assert reasons["fsdp-missing.html"] == "HTTP 404"
    assert log.count("/docs/fsdp-missing.html") == 1  # a 404 is not retried
    assert reasons["fsdp-loop.html"].startswith("redirect loop")
    assert "byte budget" in reasons["fsdp-huge.html"]
    assert "byte budget" in reasons["fsdp-stream.html"]  # counted while reading, no header


def test_page_and_byte_budgets():
    with docs_server() as (base, _):
        result = crawler.crawl_pages(url=f"{base}/docs/distributed.html", max_pages=1, **FAST)
    assert len(result.pages) == 1
    assert any("page budget of 1" in f.reason for f in result.failures)
    with docs_server() as (base, _):
        result = crawler.crawl_pages(url=f"{base}/docs/distributed.html", max_bytes=10, **FAST)
    assert len(result.pages) == 1 and any("byte budget" in f.reason for f in result.failures)


def test_validators_are_cached_and_sent_back():
    with docs_server() as (base, log):
        seed = (f"{base}/docs/fsdp-cached.html",)
        first = crawler.crawl_pages(seeds=seed, **FAST)
        second = crawler.crawl_pages(seeds=seed, **FAST)
    assert first.pages[0].markdown == second.pages[0].markdown
    headers = [h for p, h in log.requests if p == "/docs/fsdp-cached.html"]
    assert "if-none-match" not in headers[0]
    assert headers[1]["if-none-match"] == '"fsdp-cached-v1"'
    assert second.bytes == 0  # 304: nothing downloaded again


def test_web_refresh_writes_only_inside_the_references_folder(tmp_path):
    bundle = _bundle(tmp_path)
    before = {p for p in tmp_path.rglob("*") if "cache" not in p.parts}
    with docs_server() as (base, _):
        report = refresh(bundle, source="web", url=f"{base}/docs/distributed.html", **FAST)
    after = {p for p in tmp_path.rglob("*") if "cache" not in p.parts}
    created = after - before
    assert created and all(p.parent == bundle / "references" for p in created)
    names = sorted(p.name for p in created)
    assert all(n.startswith("web-") and n.endswith(".md") for n in names)
    assert "web-escape-fsdp.md" in names
    assert not (tmp_path / "evil").exists() and not list(Path("/tmp").glob("distributed-evil*"))
    assert (bundle / "references" / "mine.md").read_text() == "# Mine\n\n## Kept\n\nuser text\n"
    assert "web-distributed#backends" in report["added"]
    assert report["failures"] and report["pages"]
    page = (bundle / "references" / "web-distributed.md").read_text()
    assert f"Source: <{base}/docs/distributed.html> · fetched " in page


def test_web_refresh_keeps_pages_that_failed_this_time(tmp_path):
    bundle = _bundle(tmp_path)
    with docs_server() as (base, _):
        refresh(bundle, source="web", seeds=(f"{base}/docs/fsdp-cached.html",), **FAST)
    page = bundle / "references" / "web-fsdp-cached.md"
    assert page.exists()
    with docs_server() as (base, _):
        seeds = (f"{base}/docs/fsdp-cached.html", f"{base}/docs/fsdp-missing.html")
        report = refresh(bundle, source="web", seeds=seeds, cache=False, **FAST)
    assert page.exists() and report["removed"] == []


def test_cli_json_is_one_document_and_progress_stays_off_pipes(tmp_path):
    bundle = _bundle(tmp_path)
    env = {**os.environ, "FSDP_SKILL_CACHE": str(tmp_path / "cache")}
    with docs_server() as (base, _):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "fsdp_skill",
                "refresh",
                "--source",
                "web",
                "--url",
                f"{base}/docs/fsdp.html",
                "--dest",
                str(bundle),
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert {"source", "torch_version", "sections", "added", "removed", "changed"} <= set(report)
    assert proc.stderr == ""


def test_unreachable_site_is_a_usage_error_and_changes_nothing(tmp_path):
    bundle = _bundle(tmp_path)
    before = sorted(p.name for p in (bundle / "references").iterdir())
    with docs_server() as (base, _):
        url = f"{base}/docs/fsdp-missing.html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsdp_skill",
            "refresh",
            "--source",
            "web",
            "--url",
            url,
            "--dest",
            str(bundle),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FSDP_SKILL_CACHE": str(tmp_path / "cache")},
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("fsdp-skill: error: no page could be fetched")
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in (bundle / "references").iterdir()) == before


def test_progress_bar_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    with crawler._progress_bar(True) as bar:
        assert bar is None
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    with crawler._progress_bar(False) as bar:
        assert bar is None  # --json asks for no progress, terminal or not
    from rich.progress import Progress

    assert isinstance(crawler._progress_bar(True), Progress)


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


def test_an_unreachable_host_is_given_up_after_two_pages():
    with docs_server() as (base, _):
        pass  # the port is closed again: nothing listens there
    seeds = tuple(f"{base}/docs/{name}.html" for name in ("distributed", "fsdp", "fsdp-cached"))
    result = crawler.crawl_pages(seeds=seeds, cache=False, **FAST)
    reasons = [f.reason for f in result.failures]
    assert reasons[0].startswith("cannot connect") and reasons[1].startswith("cannot connect")
    assert reasons[2] == f"skipped: {base.split('//')[1]} could not be reached"


def test_sloppy_and_hostile_html_converts_without_crashing():
    from fsdp_skill.references import html2md

    sloppy = "<main><h2>Steps</h2><p>one<p>two<ul><li>a<li>b</ul><table><tr><td>x<td>y</table>"
    text = html2md.convert(sloppy, "https://example.org/docs/x.html").markdown
    assert "one\n\ntwo" in text and "- a\n- b" in text and "| x | y |" in text
    deep = "<main>" + "<div>" * 5000 + "<p>bottom</p>" + "</div>" * 5000 + "</main>"
    assert "bottom" in html2md.convert(deep, "https://example.org/docs/x.html").markdown


def test_a_new_fetch_date_alone_is_not_a_change():
    from fsdp_skill.references.rebuild import diff_sections
    from fsdp_skill.search.sections import Section

    def page(date: str, body: str = "Text.") -> Section:
        text = f"# T\n\nSource: <https://x.org/a.html> · fetched {date}\n\n{body}\n"
        return Section("web-a", "T", "references/web-a.md", "", text)

    assert diff_sections([page("2026-01-01")], [page("2026-02-01")])["changed"] == []
    assert diff_sections([page("2026-01-01")], [page("2026-01-01", "New.")])["changed"] == ["web-a"]


def test_a_server_error_is_retried_and_last_modified_is_revalidated():
    with docs_server() as (base, log):
        flaky = crawler.crawl_pages(seeds=(f"{base}/docs/fsdp-flaky.html",), **FAST)
        seed = (f"{base}/docs/fsdp-lastmod.html",)
        first = crawler.crawl_pages(seeds=seed, **FAST)
        second = crawler.crawl_pages(seeds=seed, **FAST)
    assert [p.title for p in flaky.pages] == ["Flaky"] and log.count("/docs/fsdp-flaky.html") == 2
    headers = [h for p, h in log.requests if p == "/docs/fsdp-lastmod.html"]
    assert "if-modified-since" not in headers[0]
    assert headers[1]["if-modified-since"] == "Wed, 21 Oct 2026 07:28:00 GMT"
    assert second.pages[0].markdown == first.pages[0].markdown and second.bytes == 0
