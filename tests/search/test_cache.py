"""The search cache is only a cache: damaged, replaced by a folder, or on a full disk, search
and show still answer (rebuilding the index, or building it in memory) without a traceback."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

from fsdp_skill.bundle_files import BUNDLE_DIR
from fsdp_skill.search import build_index, index
from tests.cli import fsdp
from tests.mounts import fill, small_tmpfs

QUERIES = (
    "reshard after forward",
    "hang",
    "init_device_mesh",
    "mixed precision",
    "NCCL_SOCKET_IFNAME",
    "checkpoint memory",
    "训练卡住了怎么办",
)


def _env(bundle: Path, cache: Path) -> dict[str, str]:
    return {"FSDP_SKILL_BUNDLE": str(bundle), "FSDP_SKILL_CACHE": str(cache)}


def _answers(bundle: Path, cache: Path) -> list[list[str]]:
    """The ids each query finds, run as a user would (a fresh process per command)."""
    found = []
    for query in QUERIES:
        result = fsdp("search", query, "-k", "3", "--json", env=_env(bundle, cache), timeout=60)
        assert result.code == 0 and "Traceback" not in result.err, (query, result.err)
        found.append([r["id"] for r in result.json()["results"]])
    shown = fsdp("show", "pitfalls", env=_env(bundle, cache), timeout=60)
    assert shown.code == 0 and "Traceback" not in shown.err, shown.err
    return found


def _corrupt_middle(path: Path) -> None:
    """Overwrite 16 KiB in the middle of the file: the header stays valid, some pages not."""
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.seek(size // 2 - 8192)
        handle.write(bytes((i * 131 + 7) % 256 for i in range(16384)))


def _quick_check(path: Path) -> list:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        return [(str(exc),)]
    finally:
        db.close()


def test_a_cache_damaged_in_the_middle_is_detected_and_rebuilt(tmp_path: Path):
    bundle = tmp_path / "pytorch-fsdp"
    shutil.copytree(BUNDLE_DIR, bundle)  # the real pages: a cache of the real size
    cache = tmp_path / "cache"
    expected = _answers(bundle, cache)
    (path,) = cache.glob("search-*.sqlite")
    _corrupt_middle(path)
    assert _quick_check(path) != [("ok",)]
    assert _answers(bundle, cache) == expected
    assert _quick_check(path) == [("ok",)]  # rebuilt in place


def test_a_folder_in_place_of_the_cache_file(bundle: Path):
    cache = Path(os.environ["FSDP_SKILL_CACHE"])
    expected = _answers(bundle, cache)
    path = index.index_path(bundle)
    path.unlink()
    path.mkdir()
    (path / "something").write_text("not ours")
    assert _answers(bundle, cache) == expected
    assert (path / "something").read_text() == "not ours"


def test_a_cache_folder_that_is_a_file(bundle: Path, tmp_path: Path):
    cache = Path(os.environ["FSDP_SKILL_CACHE"])
    expected = _answers(bundle, cache)
    blocker = tmp_path / "cache-is-a-file"
    blocker.write_text("x")
    assert _answers(bundle, blocker) == expected


def test_a_full_disk_under_the_cache(bundle: Path, tmp_path: Path):
    expected = _answers(bundle, Path(os.environ["FSDP_SKILL_CACHE"]))
    with small_tmpfs(tmp_path / "full", "256k") as disk:
        fill(disk)
        assert _answers(bundle, disk / "cache") == expected
        assert not list((disk / "cache").glob("*.tmp")) if (disk / "cache").exists() else True


def test_an_error_at_query_time_rebuilds_the_index_once(bundle: Path, monkeypatch):
    """A damaged page that only a query reaches: the query is answered from a rebuilt index."""
    build_index(bundle)
    calls = []
    real = index.leaders

    def flaky(db, *args):
        calls.append(db)
        if len(calls) == 1:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real(db, *args)

    monkeypatch.setattr(index, "leaders", flaky)
    from fsdp_skill.search import search

    found = search("reshard after forward", k=1, bundle=bundle)
    assert found["results"][0]["id"] == "fsdp2#reshard-after-forward"
    assert len(calls) == 2 and calls[0] is not calls[1]
