"""A bundle whose references/ holds something that is not a UTF-8 page: search, show, verify
and refresh skip it with a warning, never hang and never print a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli import fsdp


def _latin1(page: Path) -> None:
    page.write_bytes("# Café notes\n\n## Réglages\n\nÀ voir.\n".encode("latin-1"))


def _folder(page: Path) -> None:
    page.mkdir()
    (page / "inside.md").write_text("# inside\n")


def _dangling(page: Path) -> None:
    page.symlink_to(page.with_name("nowhere.md"))


def _fifo(page: Path) -> None:
    os.mkfifo(page)


BAD = {"latin1": _latin1, "folder": _folder, "dangling-link": _dangling, "fifo": _fifo}


@pytest.fixture(params=sorted(BAD))
def bad_bundle(request, bundle: Path) -> tuple[Path, dict[str, str]]:
    BAD[request.param](bundle / "references" / "x.md")
    env = {"FSDP_SKILL_BUNDLE": str(bundle), "FSDP_SKILL_CACHE": os.environ["FSDP_SKILL_CACHE"]}
    return bundle, env


def _clean(result, code: int = 0) -> None:
    assert result.code == code, (result.out, result.err)
    assert "Traceback" not in result.err


def test_search_and_show_skip_a_bad_page_with_a_warning(bad_bundle):
    bundle, env = bad_bundle
    found = fsdp("search", "reshard after forward", "--json", env=env, timeout=30)
    _clean(found)
    assert found.json()["results"][0]["id"] == "fsdp2#reshard-after-forward"
    assert "warning" in found.err and "references/x.md" in found.err
    shown = fsdp("show", "fsdp2#reshard-after-forward", env=env, timeout=30)
    _clean(shown)
    assert "reshard" in shown.out
    assert "references/x.md" in shown.err


def test_verify_reports_a_bad_page_as_a_problem(bad_bundle):
    bundle, env = bad_bundle
    result = fsdp("verify", bundle, "--no-torch", "--json", timeout=30)
    _clean(result, code=1)
    problems = [p for p in result.json()["problems"] if p["path"] == "references/x.md"]
    assert problems, result.json()


def test_refresh_keeps_a_bad_page_and_skips_it(bad_bundle, tmp_path):
    from tests.references.test_refresh_installed import FAKE_V1, REPO, _fake_torch

    bundle, env = bad_bundle
    page = bundle / "references" / "x.md"
    before = os.lstat(page).st_mode
    fake = _fake_torch(tmp_path / "v1", FAKE_V1)
    env = {**env, "PYTHONPATH": f"{fake}{os.pathsep}{REPO / 'src'}"}
    result = fsdp("refresh", "--dest", bundle, "--json", env=env, timeout=60)
    _clean(result)
    assert "api:torch.distributed.barrier" in result.json()["added"]
    assert "references/x.md" in result.err
    assert os.lstat(page).st_mode == before  # still there, of the same kind
