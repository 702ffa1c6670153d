"""The signature table ``explain`` matches with, kept between runs.

Reading every pitfall file (TOML) and finding each signature's required literal was most of a
cold ``explain``. The table changes only when a pitfall file or the code that prepares it
does, so it is written to the cache folder under a key of those files' names, sizes and
modification times, and read back as JSON; the full pitfall is then read only for what
matched. A missing, damaged or unwritable cache only costs the time it would have saved.
"""

from __future__ import annotations

import json
from pathlib import Path

from fsdp_skill import knowledge
from fsdp_skill.cache import cache_dir, prune
from fsdp_skill.diagnose.signatures import Signature

try:  # the built-in BLAKE2: importing hashlib would load OpenSSL
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - Python builds without the module
    from hashlib import blake2b

HERE = Path(__file__).parent

Entry = tuple[str, tuple[str, ...], tuple[Signature, ...]]
"""A pitfall with signatures: its id, its tags and its prepared signatures."""


def source_files() -> list[Path]:
    """The files the table is computed from: the pitfalls and the code that prepares them."""
    return [HERE / "signatures.py", Path(__file__), *sorted(knowledge.PITFALLS_DIR.glob("*.toml"))]


def _key(files: list[Path]) -> str:
    digest = blake2b(digest_size=12)
    for path in files:
        stat = path.stat()
        digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def build() -> list[Entry]:
    """The table, computed from the knowledge's pitfalls."""
    from fsdp_skill.diagnose.signatures import prepared

    return [
        (p.id, tuple(p.tags), tuple(prepared(s) for s in p.signatures))
        for p in knowledge.pitfalls()
        if p.signatures
    ]


def _encode(table: list[Entry]) -> bytes:
    rows = [
        {
            "id": pid,
            "tags": list(tags),
            "signatures": [[s.regex, s.literal, s.by_line] for s in sigs],
        }
        for pid, tags, sigs in table
    ]
    return json.dumps(rows, ensure_ascii=False).encode("utf-8")


def _decode(data: bytes) -> list[Entry]:
    """The table stored in ``data``; ValueError when it is not one."""
    table = []
    for row in json.loads(data):
        sigs = tuple(Signature(str(r), str(lit), bool(line)) for r, lit, line in row["signatures"])
        table.append((str(row["id"]), tuple(map(str, row["tags"])), sigs))
    return table


def table() -> list[Entry]:
    """The signature table: read from the cache when it is current, else built (and stored)."""
    try:
        path = cache_dir() / f"signatures-{_key(source_files())}.json"
    except OSError:  # a pitfall file vanished while listed: nothing to key on
        return build()
    try:
        return _decode(path.read_bytes())
    except (OSError, ValueError, KeyError, TypeError):
        pass
    found = build()
    try:
        from fsdp_skill import atomic

        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(path, _encode(found))
        prune(path, "signatures-*.json")
    except OSError:  # a read-only or full cache: explain still works, only slower
        pass
    return found
