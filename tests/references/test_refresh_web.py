"""``refresh --source web`` on a loopback copy of the docs site: from the stable stubs, by
version, from a mirror, partial and pruned refreshes, search over the result, the CLI."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from fsdp_skill import markdown
from fsdp_skill.bundle_files import BUNDLE_DIR
from fsdp_skill.references import refresh, seeds
from fsdp_skill.search import search
from fsdp_skill.search.sections import bundle_sections
from tests.cli import fsdp
from tests.references.bundles import USER_PAGE, small_bundle
from tests.references.docs_server import HUGE_BYTES, docs_server

FAST = {"timeout": 2, "retries": 2, "backoff": 0.01, "max_page_bytes": HUGE_BYTES // 2}
DOCS_PAGES = ("distributed", "fsdp", "distributed.fsdp.fully_shard", "elastic/run")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FSDP_SKILL_CACHE", str(tmp_path / "cache"))


def _web_pages(bundle: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((bundle / "references").glob("web-*.md"))}


def test_the_official_list_on_a_mirror_is_read_through_the_stable_stubs(tmp_path):
    bundle = small_bundle(tmp_path)
    with docs_server() as (base, log):
        report = refresh(bundle, source="web", base=base, **FAST)
        again = refresh(bundle, source="web", base=base, **FAST)
    assert report["docs_version"] == "stable"  # no 2.13 docs on the site: the stable ones
    assert f"/docs/{seeds.installed_docs_version()}/distributed.html" in log.paths()  # probed
    for page in DOCS_PAGES:
        assert f"{base}/docs/2.11/{page}.html" in report["pages"]
    assert f"{base}/tutorials/intermediate/FSDP_tutorial.html" in report["pages"]
    assert not [u for u in report["pages"] if "/stable/" in u]
    pages = _web_pages(bundle)
    assert {"web-distributed.md", "web-fsdp.md", "web-run.md", "web-fsdp-tutorial.md"} <= set(pages)
    for text in pages.values():
        assert "Redirecting" not in text and "Continue to" not in text
        titles = [t for _, level, t in markdown.headings(text) if level == 1]
        assert len(titles) == 1  # the title once, never repeated by the page's own h1
    assert f"Source: <{base}/docs/2.11/elastic/run.html> · fetched " in pages["web-run.md"]
    assert "web-run#usage" in report["added"]
    for section in bundle_sections(bundle):  # each section links to its own place
        if section.id.startswith("web-run"):
            page = f"{base}/docs/2.11/elastic/run.html"
            assert re.fullmatch(re.escape(page) + r"(#[\w.-]+)?", section.url), section.url
    usage = next(s for s in bundle_sections(bundle) if s.id == "web-run#usage")
    assert usage.url == f"{base}/docs/2.11/elastic/run.html#usage"
    assert (again["added"], again["removed"], again["changed"]) == ([], [], [])
    assert (bundle / "references" / "mine.md").read_text() == USER_PAGE


def test_a_version_is_read_from_its_folder_without_the_stubs(tmp_path, monkeypatch):
    bundle = small_bundle(tmp_path)
    with docs_server() as (base, log):
        report = refresh(bundle, source="web", base=base, version="2.11", **FAST)
    assert report["docs_version"] == "2.11"
    assert not [p for p in log.paths() if p.startswith("/docs/stable/")]
    assert f"{base}/docs/2.11/distributed.html" in report["pages"]
    # by default, the installed torch's version when the site has its docs
    monkeypatch.setattr(seeds, "installed_docs_version", lambda: "2.11")
    with docs_server() as (base, log):
        report = refresh(small_bundle(tmp_path / "second"), source="web", base=base, **FAST)
    assert report["docs_version"] == "2.11"
    assert not [p for p in log.paths() if p.startswith("/docs/stable/")]


def test_a_partial_refresh_keeps_the_other_pages_and_prune_removes_them(tmp_path):
    bundle = small_bundle(tmp_path)
    with docs_server() as (base, _):
        refresh(bundle, source="web", base=base, version="2.11", **FAST)
        full = _web_pages(bundle)
        run = f"{base}/docs/2.11/elastic/run.html"
        partial = refresh(
            bundle, source="web", urls=(run, f"{base}/docs/fsdp-missing.html"), **FAST
        )
        assert _web_pages(bundle) == full  # same page, same text: nothing else touched
        assert (partial["added"], partial["removed"], partial["changed"]) == ([], [], [])
        pruned = refresh(bundle, source="web", urls=(run,), prune=True, **FAST)
    assert sorted(_web_pages(bundle)) == ["web-run.md"]
    assert "web-distributed#backends" in pruned["removed"]
    assert (bundle / "references" / "mine.md").exists()  # never a page the crawl wrote


def test_a_page_moving_to_a_new_version_replaces_its_old_copy(tmp_path):
    bundle = small_bundle(tmp_path)
    with docs_server() as (base, _):
        refresh(bundle, source="web", urls=(f"{base}/docs/2.11/fsdp.html",), **FAST)
        refresh(bundle, source="web", urls=(f"{base}/docs/stable/fsdp.html",), **FAST)
    assert sorted(_web_pages(bundle)) == ["web-fsdp.md"]


def test_crawled_pages_are_found_by_search(tmp_path):
    bundle = tmp_path / "pytorch-fsdp"
    shutil.copytree(BUNDLE_DIR, bundle)
    with docs_server() as (base, _):
        refresh(bundle, source="web", base=base, version="2.11", **FAST)
    queries = {  # phrases only the crawled pages have, chosen before the crawl ran
        "GPU hosts with Ethernet interconnect": "web-distributed#",
        "GIL-thrashing from driving several execution threads": "web-distributed#",
        "all-gathers queued into its own cuda stream implicit prefetching": "web-fsdp-tutorial#",
        "local unsharded gradients are reduce-scatterred": "web-fsdp-tutorial#",
        "init_method shared file system share_folder_name": "web-distributed#",
    }
    for query, expected in queries.items():
        ids = [r["id"] for r in search(query, k=3, bundle=bundle)["results"]]
        assert any(i.startswith(expected) for i in ids), (query, ids)


def test_cli_takes_several_urls_and_reports_one_json_document(tmp_path):
    bundle = small_bundle(tmp_path)
    env = {"FSDP_SKILL_CACHE": str(tmp_path / "cache")}
    with docs_server() as (base, _):
        urls = (f"{base}/docs/stable/fsdp.html", f"{base}/docs/stable/elastic/run.html")
        result = fsdp(
            *("refresh", "--source", "web", "--url", urls[0], "--url", urls[1]),
            *("--dest", bundle, "--json"),
            env=env,
        )
    assert result.code == 0, result.err
    report = result.json()
    assert {"source", "torch_version", "sections", "added", "removed", "changed"} <= set(report)
    assert report["pages"] == [f"{base}/docs/2.11/elastic/run.html", f"{base}/docs/2.11/fsdp.html"]
    assert result.err == ""


@pytest.mark.parametrize(
    "args, message",
    [
        (("--source", "web", "--base", "ftp://mirror"), "--base must be an http(s) URL"),
        (("--source", "web", "--version", "latest!"), "--version must look like 2.11"),
        (("--source", "web", "--base", "http://m", "--url", "http://m/x"), "give it or --url"),
        (("--prune",), "--prune: only with --source web"),
        (("--url", "http://m/x.html"), "--url: only with --source web"),
    ],
)
def test_cli_refuses_bad_options_in_one_line(tmp_path, args, message):
    bundle = small_bundle(tmp_path)
    result = fsdp("refresh", *args, "--dest", bundle, env={"FSDP_SKILL_CACHE": str(tmp_path)})
    assert result.code == 2
    assert message in result.err and "Traceback" not in result.err
    assert len(result.err.strip().split("\n")) == 1


def test_unreachable_site_is_a_usage_error_and_changes_nothing(tmp_path):
    bundle = small_bundle(tmp_path)
    before = sorted(p.name for p in (bundle / "references").iterdir())
    with docs_server() as (base, _):
        url = f"{base}/docs/fsdp-missing.html"
    result = fsdp(
        *("refresh", "--source", "web", "--url", url, "--dest", bundle),
        env={"FSDP_SKILL_CACHE": str(tmp_path / "cache")},
    )
    assert result.code == 2
    assert result.err.startswith("fsdp-skill: error: no page could be fetched")
    assert "Traceback" not in result.err
    assert sorted(p.name for p in (bundle / "references").iterdir()) == before


def test_web_refresh_writes_only_inside_the_references_folder(tmp_path):
    bundle = small_bundle(tmp_path)
    before = {p for p in tmp_path.rglob("*") if "cache" not in p.parts}
    with docs_server() as (base, _):
        urls = (f"{base}/docs/..%2F..%2F..%2Fescape-fsdp.html", f"{base}/docs/stable/fsdp.html")
        report = refresh(bundle, source="web", urls=urls, **FAST)
    created = {p for p in tmp_path.rglob("*") if "cache" not in p.parts} - before
    assert created and all(p.parent == bundle / "references" for p in created)
    names = sorted(p.name for p in created)
    assert all(n.startswith("web-") and n.endswith(".md") for n in names)
    assert "web-escape-fsdp.md" in names
    assert not (tmp_path / "evil").exists() and not list(Path("/tmp").glob("distributed-evil*"))
    assert len(report["pages"]) == 2 and not {f["url"] for f in report["failures"]} & set(urls)


def test_a_new_fetch_date_alone_is_not_a_change():
    from fsdp_skill.references.rebuild import diff_sections
    from fsdp_skill.search.sections import Section

    def page(date: str, body: str = "Text.") -> Section:
        text = f"# T\n\nSource: <https://x.org/a.html> · fetched {date}\n\n{body}\n"
        return Section("web-a", "T", "references/web-a.md", "", text)

    assert diff_sections([page("2026-01-01")], [page("2026-02-01")])["changed"] == []
    assert diff_sections([page("2026-01-01")], [page("2026-01-01", "New.")])["changed"] == ["web-a"]
