"""Reference pages from the official sources: the installed torch, or the official docs site.

``refresh(bundle_dir, source)`` regenerates the pages of one source inside a bundle's
``references/`` and rebuilds the search index, atomically, and reports which sections were
added, removed or changed. Importing this package is cheap; torch is imported by the
``installed`` source only, inside the call.
"""

from __future__ import annotations

from pathlib import Path

from fsdp_skill.errors import UsageError

SOURCES = ("installed", "web")


def refresh(
    bundle_dir: str | Path,
    source: str = "installed",
    urls: tuple[str, ...] | list[str] = (),
    base: str | None = None,
    version: str | None = None,
    prune: bool = False,
    progress: bool = False,
    **options,
) -> dict:
    """Rebuild the ``source`` pages of the bundle at ``bundle_dir``; return what changed.

    ``{"source", "torch_version", "sections", "added", "removed", "changed"}`` (and, for the
    web, ``pages`` fetched, ``failures`` and the ``docs_version`` read). The web source
    crawls from ``urls``, or from the official pages (moved onto the mirror ``base``, read
    from the docs of ``version``); it replaces the pages it fetched and keeps the other
    ``web-*`` pages, unless ``prune`` removes those. ``options`` go to the crawler
    (budgets, timeouts, retries). Raises UsageError for a bad bundle, source or option, or
    when the source gives nothing (torch not importable, every page failing).
    """
    from fsdp_skill.references import rebuild as machinery

    if source not in SOURCES:
        raise UsageError(f"unknown source {source!r}; choose from {', '.join(SOURCES)}")
    web_only = {"--url": bool(urls), "--base": base, "--version": version, "--prune": prune}
    given = [name for name, value in web_only.items() if value]
    if given and source != "web":
        raise UsageError(f"{', '.join(given)}: only with --source web")
    bundle = machinery.check_bundle(Path(bundle_dir))
    extra: dict = {}
    if source == "installed":
        from fsdp_skill.references import api

        with _status("reading the API of the installed torch", progress):
            try:
                version_found, pages = api.build_pages()
            except api.TorchMissing as exc:
                raise UsageError(
                    f"{exc}; install torch (the toolkit's [torch] extra: pip install "
                    "'.[torch]' from a checkout of this repository) or refresh from the "
                    "official docs with --source web"
                ) from None

        def owned(name: str, text: str) -> bool:
            return name.startswith(api.PAGE_PREFIX) and api.is_generated(text)

    else:
        from fsdp_skill.references import crawler, web_pages

        result = crawler.crawl_pages(
            urls=tuple(urls), base=base, version=version, progress=progress, **options
        )
        if not result.pages:
            reasons = "; ".join(f"{f.url}: {f.reason}" for f in result.failures[:3])
            raise UsageError(f"no page could be fetched ({reasons or 'nothing in scope'})")
        pages = web_pages.render_pages(result.pages, web_pages.existing(bundle / "references"))
        from fsdp_skill.knowledge import installed_torch_version

        version_found = (installed_torch_version() or "not installed").split("+")[0]
        extra = {
            "pages": sorted(p.url for p in result.pages),
            "failures": [f.as_dict() for f in result.failures],
        }
        if result.docs_version:
            extra["docs_version"] = result.docs_version
        owned = web_pages.owner((p.url for p in result.pages), prune)
    from fsdp_skill import locking
    from fsdp_skill.install.manifest import adopt_generated

    try:
        with locking.bundle_lock(bundle.resolve()):
            before = {p.name for p in (bundle / "references").glob("*.md")}
            old, new = machinery.replace_pages(bundle, pages, owned)
            after = {p.name for p in (bundle / "references").glob("*.md")}
            adopt_generated(bundle, sorted(set(pages) | (before - after)))
    except OSError as exc:  # a full disk, a read-only install: the bundle is left as it was
        raise UsageError(f"cannot refresh {bundle}: {exc.strerror or exc}") from None
    report = {"source": source, "torch_version": version_found, "sections": len(new)}
    report.update(machinery.diff_sections(old, new))
    report.update(extra)
    return report


def _status(message: str, enabled: bool):
    """A spinner on a terminal while torch imports (seconds); nothing on pipes or --json."""
    import contextlib
    import sys

    if not enabled or not sys.stderr.isatty():
        return contextlib.nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(message)
