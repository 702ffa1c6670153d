"""explain's signature table, kept in the cache folder between runs (``diagnose.catalog``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fsdp_skill.diagnose import catalog


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FSDP_SKILL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _tables(cache):
    return sorted(cache.glob("signatures-*.json"))


def test_the_stored_table_is_the_one_the_pitfalls_give(cache):
    built = catalog.build()
    assert catalog.table() == built and len(built) > 70
    assert len(_tables(cache)) == 1
    assert catalog.table() == built  # read back from the file


def test_a_current_table_is_read_without_the_pitfall_files(cache, monkeypatch):
    expected = catalog.table()

    def refuse():
        raise AssertionError("the pitfall files were read again")

    monkeypatch.setattr(catalog, "build", refuse)
    assert catalog.table() == expected


def test_a_changed_source_file_gives_a_new_table(cache, monkeypatch, tmp_path):
    extra = tmp_path / "zz-extra.toml"
    extra.write_text("a", encoding="utf-8")
    files = [*catalog.source_files(), extra]
    monkeypatch.setattr(catalog, "source_files", lambda: files)
    calls = []
    real = catalog.build
    monkeypatch.setattr(catalog, "build", lambda: calls.append(1) or real())
    catalog.table()
    catalog.table()
    assert len(calls) == 1
    extra.write_text("ab", encoding="utf-8")  # another size: another key
    catalog.table()
    assert len(calls) == 2 and len(_tables(cache)) == 2  # the other is a week from removal


def test_a_damaged_table_is_rebuilt(cache):
    catalog.table()
    (path,) = _tables(cache)
    path.write_bytes(b'[{"id": "x", "tags": [], "signatures": [["a"]]}]')  # a row cut short
    assert catalog.table() == catalog.build()
    assert json.loads(path.read_bytes())[0]["signatures"][0][1] is not None  # rewritten whole


def test_an_unwritable_cache_still_explains(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("FSDP_SKILL_CACHE", str(blocker))
    assert catalog.table() == catalog.build()


def test_a_cold_explain_reads_only_the_pitfalls_that_matched(cache):
    """With the table cached, a fresh process explains without parsing every pitfall file."""
    code = (
        "import json\n"
        "from fsdp_skill import knowledge\n"
        "from fsdp_skill.diagnose import explain\n"
        "found = explain('Watchdog caught collective operation timeout')\n"
        "print(json.dumps([[m['id'] for m in found['matches']],"
        " knowledge.pitfalls.cache_info().currsize]))\n"
    )
    env = {"FSDP_SKILL_CACHE": str(cache), "PATH": "/usr/bin:/bin"}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
        )
        for _ in range(2)
    ]
    (first_ids, first_parsed), (ids, parsed) = (json.loads(r.stdout) for r in runs)
    assert first_parsed == 1  # the first run builds the table from every file
    assert parsed == 0 and ids == first_ids and ids[0] == "nccl-watchdog-timeout"
