"""The cache folder's pruning, shared by the search index and explain's signature table."""

from __future__ import annotations

import os
import time

from fsdp_skill.cache import STALE_AFTER_S, prune


def test_prune_removes_only_stale_files_of_the_pattern(tmp_path):
    keep, fresh, stale, other = (
        tmp_path / name
        for name in ("search-a.sqlite", "search-b.sqlite", "search-c.sqlite", "signatures-c.json")
    )
    for path in (keep, fresh, stale, other):
        path.write_bytes(b"x")
    old = time.time() - STALE_AFTER_S - 60
    for path in (keep, stale, other):
        os.utime(path, (old, old))
    prune(keep, "search-*.sqlite")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "search-a.sqlite",  # the one in use, however old
        "search-b.sqlite",  # read within the week
        "signatures-c.json",  # another pattern
    ]
