"""The SQLite FTS5 index of a bundle's sections, cached by content hash.

The index file is named after a hash of the reference pages and of the indexing code, so a
changed page or a changed tokenizer gets a fresh index and a stale one is never read. Files
are built aside and renamed into place: a reader sees a whole index or none.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from fsdp_skill.cache import cache_dir, prune
from fsdp_skill.search import pages

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    from fsdp_skill.search.sections import Section

    T = TypeVar("T")

try:  # the built-in BLAKE2: importing hashlib would load OpenSSL, a cost on every search
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - Python builds without the module
    from hashlib import blake2b

_CODE = (
    "pages.py",
    "sections.py",
    "index.py",
    "tokens.py",
    "glossary.py",
    "summary.py",
    "errors.py",
    "asked.py",
)

HIT_OPEN, HIT_CLOSE = "\x02", "\x03"

COLUMNS = ("title", "page", "headings", "keywords", "body", "code", "symptom")
"""FTS5 columns, in the order of the weights ``query`` passes to ``bm25``."""


_KEYS: dict[tuple, str] = {}
"""Content keys already computed in this process, by the pages' names, sizes and mtimes."""


def content_key(bundle: Path) -> str:
    """A hash of every indexed page (name and bytes) and of the code that indexes them.

    A long-lived process (the MCP server) asks again and again: pages whose names, sizes and
    modification times are unchanged are not read and hashed a second time.
    """
    from fsdp_skill.search.asked import ASKED_FILE

    entries = pages.page_entries(bundle)
    stamp = (str(bundle), _file_stamp(ASKED_FILE), *((e.name, *_stat(e)) for e in entries))
    key = _KEYS.get(stamp)
    if key is None:
        key = _hash([Path(e.path) for e in entries])
        _KEYS.clear()  # one bundle per process in practice; never let the cache grow
        _KEYS[stamp] = key
    return key


def _file_stamp(path: Path) -> tuple[str, int, int]:
    try:
        info = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return str(path), info.st_size, info.st_mtime_ns


def _stat(entry: os.DirEntry) -> tuple[int, int]:
    info = entry.stat()
    return info.st_size, info.st_mtime_ns


def _hash(files: list[Path]) -> str:
    digest = blake2b(digest_size=12)
    here = Path(__file__).parent
    for name in _CODE:
        digest.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
    from fsdp_skill.search.asked import ASKED_FILE  # the questions the index learns from
    from fsdp_skill.search.errors import knowledge_files  # the signatures the index copies

    for path in [*knowledge_files(), ASKED_FILE]:
        if not path.is_file():
            continue
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for page in files:
        try:
            data = page.read_bytes()
        except OSError as exc:
            data = f"unreadable: {exc.strerror}".encode()
        pages.check_text(page, data)
        digest.update(page.name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()


def index_path(bundle: Path) -> Path:
    return cache_dir() / f"search-{content_key(bundle)}.sqlite"


_SCHEMA = """
CREATE VIRTUAL TABLE fts USING fts5(
    title, page, headings, keywords, body, code, symptom,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE section (  -- text last: ranking reads the small columns only
    rowid INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, title TEXT NOT NULL, path TEXT NOT NULL,
    url TEXT NOT NULL, kind TEXT NOT NULL, intro INTEGER NOT NULL, lean INTEGER NOT NULL,
    seen INTEGER NOT NULL, summary TEXT NOT NULL, text TEXT NOT NULL
);
CREATE VIRTUAL TABLE asked USING fts5(  -- questions asked before, one row per answer
    section UNINDEXED, terms,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE asked_han USING fts5(  -- the Chinese ones as character pairs
    section UNINDEXED, grams, tokenize = 'unicode61'
);
CREATE TABLE word (  -- every word of the sections and in how many it occurs: spelling fixes
    w TEXT PRIMARY KEY, n INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE signature (  -- the error signatures of the pitfalls, as explain matches them
    section TEXT NOT NULL, pattern TEXT NOT NULL, literal TEXT NOT NULL, anchored INTEGER NOT NULL,
    tags TEXT NOT NULL
);
"""


def _prose_and_code(section: Section) -> tuple[str, str]:
    """The section's prose (link targets dropped: URLs only add noise words) and the text of
    its fenced code blocks, indexed apart so that code weighs less than explanations."""
    import re

    from fsdp_skill import markdown

    text = section.indexed_text
    prose = re.sub(r"\]\([^)]*\)", "]", markdown.strip_code(text))
    code = "\n".join(block.code for block in markdown.code_blocks(text))
    return prose, code


def write_index(
    path: Path, found: list[Section], asked_before: list[tuple[str, tuple[str, ...]]] | None = None
) -> None:
    """Build the index of ``found`` at ``path`` (written aside, then renamed).

    ``asked_before``: the questions answered before, ``(question, section ids)``; by default
    those the package ships (``knowledge/asked.toml``).
    """
    import tempfile  # imported only when writing: a search skips their import cost

    from fsdp_skill.search import asked, errors, sections, summary, tokens

    if asked_before is None:
        asked_before = asked.load()

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        db = sqlite3.connect(tmp)
        try:
            db.executescript(_SCHEMA)
            found_texts = []
            for rowid, s in enumerate(found, start=1):
                body, code = _prose_and_code(s)
                found_texts.append(f"{s.title}\n{body}\n{code}")
                keywords = " ".join(
                    part
                    for part in (
                        tokens.identifier_words(s.title + " " + s.headings),
                        tokens.identifier_words(body + "\n" + code),
                        s.id.split(":", 1)[-1].replace("#", " ").replace("-", " "),
                    )
                    if part
                )
                if s.kind != sections.INDEX_KIND:
                    db.execute(
                        "INSERT INTO fts(rowid, title, page, headings, keywords, body, code,"
                        " symptom) VALUES (?,?,?,?,?,?,?,?)",
                        (
                            rowid,
                            s.label or s.title,
                            s.page_title,
                            s.headings,
                            keywords,
                            body,
                            code,
                            s.symptom,
                        ),
                    )
                db.execute(
                    "INSERT INTO section VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        rowid,
                        s.id,
                        s.title,
                        s.path,
                        s.url,
                        s.kind,
                        int(s.is_intro),
                        int(s.is_lean),
                        int(bool(s.symptom)),
                        summary.section_summary(s.text, s.kind),
                        s.text,
                    ),
                )
            db.executemany(
                "INSERT INTO word VALUES (?,?)", tokens.document_frequencies(found_texts)
            )
            searchable = {s.id for s in found if s.kind != sections.INDEX_KIND}
            db.executemany("INSERT INTO asked VALUES (?,?)", asked.rows(asked_before, searchable))
            db.executemany(
                "INSERT INTO asked_han VALUES (?,?)", asked.han_rows(asked_before, searchable)
            )
            db.executemany(
                "INSERT INTO signature VALUES (?,?,?,?,?)",
                errors.signature_rows({s.id for s in found}),
            )
            db.execute("INSERT INTO fts(fts) VALUES ('optimize')")
            db.commit()
        finally:
            db.close()
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def build(bundle: Path) -> Path:
    """Make sure the index of ``bundle`` exists; return its path.

    Raises OSError when the cache cannot hold it (a full disk, a folder in its place, a
    read-only cache folder).
    """
    path = index_path(bundle)
    if not path.is_file():
        try:
            write_index(path, _sections(bundle))
        except sqlite3.Error as exc:  # "database or disk is full" is not an OSError
            raise OSError(f"cannot write the search index {path}: {exc}") from None
        prune(path, "search-*.sqlite")
    return path


_OPEN: dict[tuple[Path, int], sqlite3.Connection] = {}
"""Connections kept open per index file and thread: a warm query skips re-reading the file."""


def connect(bundle: Path) -> sqlite3.Connection:
    """A read-only connection to the index of ``bundle``, building the index when missing.

    The connection stays open for later calls from the same thread; do not close it. An
    index file that fails SQLite's ``quick_check`` is rebuilt; when the cache cannot be
    written or read back, the index is built in memory instead.
    """
    try:
        path = build(bundle)
        slot = (path, threading.get_ident())
        db = _OPEN.get(slot)
        if db is None:
            for stale in [s for s in _OPEN if s[1] == slot[1]]:
                _OPEN.pop(stale).close()
            db = _open_checked(path, bundle)
            _OPEN[slot] = db
        return db
    except (OSError, sqlite3.Error):
        return _memory(bundle)


def run(bundle: Path, query: Callable[[sqlite3.Connection], T]) -> T:
    """``query(db)`` on the index of ``bundle``.

    A database error that only a query reaches (a damaged page ``quick_check`` did not
    visit) rebuilds the index and runs the query again, from memory if need be.
    """
    db = connect(bundle)
    try:
        return query(db)
    except sqlite3.DatabaseError:
        _forget(db)
        with contextlib.suppress(OSError):
            _discard(index_path(bundle))
    db = connect(bundle)
    try:
        return query(db)
    except sqlite3.DatabaseError:
        _forget(db)
    return query(_memory(bundle))


def _forget(db: sqlite3.Connection) -> None:
    for slot in [s for s, open_db in _OPEN.items() if open_db is db]:
        del _OPEN[slot]
    db.close()


def _discard(path: Path) -> None:
    """Delete a damaged index file; refuse (OSError) to touch anything else in its place."""
    if path.is_symlink() or not path.is_file():
        if path.exists() or path.is_symlink():
            raise OSError(f"{path} is not an index file; left alone")
        return
    path.unlink()


def _open_checked(path: Path, bundle: Path) -> sqlite3.Connection:
    """Open an index file; one that is damaged (a disk error, a foreign file) is rebuilt."""
    try:
        return _open(path)
    except sqlite3.DatabaseError:
        _discard(path)
        build(bundle)
        return _open(path)


def _open(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        # A few milliseconds: the b-trees of a file damaged in the middle fail here, where
        # the probes below (which read the first pages only) would pass.
        if db.execute("PRAGMA quick_check").fetchall() != [("ok",)]:
            raise sqlite3.DatabaseError(f"{path} fails SQLite's quick_check")
        db.execute("SELECT count(*) FROM section").fetchone()
        db.execute("SELECT count(*) FROM fts WHERE fts MATCH 'x'").fetchone()
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db


def _memory(bundle: Path) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    try:
        _fill_memory(db, bundle)
    except (OSError, sqlite3.Error) as exc:
        from fsdp_skill.errors import UsageError

        raise UsageError(
            f"cannot build the search index, neither in {cache_dir()} nor in a temporary "
            f"folder ({exc})"
        ) from None
    return db


def _fill_memory(db: sqlite3.Connection, bundle: Path) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index.sqlite"
        write_index(path, _sections(bundle))
        source = sqlite3.connect(path)
        source.backup(db)
        source.close()


# --- queries: the only code that knows the schema besides write_index ------------------------


def leaders(
    db: sqlite3.Connection, expression: str, weights: tuple[float, ...], limit: int
) -> list[tuple]:
    """The best BM25 matches: ``(rowid, id, title, path, url, kind, intro, lean, seen, bm25)``,
    best first (FTS5's bm25 is negative: lower is better; ``seen``: the section says what the
    user sees)."""
    return db.execute(
        "SELECT s.rowid, s.id, s.title, s.path, s.url, s.kind, s.intro, s.lean, s.seen,"
        f" bm25(fts, {', '.join('?' * len(weights))}) AS score"
        " FROM fts JOIN section s ON s.rowid = fts.rowid"
        " WHERE fts MATCH ? ORDER BY score LIMIT ?",
        (*weights, expression, limit),
    ).fetchall()


ASKED_TABLES = ("asked", "asked_han")
"""The earlier questions by their search terms, and the Chinese ones by character pairs."""


def asked_like(
    db: sqlite3.Connection, expression: str, limit: int, table: str = "asked"
) -> list[tuple[str, float]]:
    """The answers of the ``limit`` earlier questions of ``table`` most like ``expression``
    (its search terms, or for ``asked_han`` its ``tokens.han_bigrams``): ``(section id,
    bm25)``, most alike first (several rows may name one section)."""
    if table not in ASKED_TABLES:
        raise ValueError(f"no table of earlier questions {table!r}")
    return db.execute(
        f"SELECT section, bm25({table}) AS score FROM {table} WHERE {table} MATCH ?"
        " ORDER BY score LIMIT ?",
        (expression, limit),
    ).fetchall()


def rows(db: sqlite3.Connection, section_ids: list[str]) -> list[tuple]:
    """The sections ``section_ids`` in the shape of ``leaders`` (bm25 0), in the order given."""
    marks = ",".join("?" * len(section_ids))
    found = {
        row[1]: row
        for row in db.execute(
            "SELECT rowid, id, title, path, url, kind, intro, lean, seen, 0.0 FROM section"
            f" WHERE id IN ({marks})",
            section_ids,
        )
    }
    return [found[sid] for sid in section_ids if sid in found]


def matches_any(db: sqlite3.Connection, word: str) -> bool:
    """Whether some section holds ``word``, as the index's tokenizer reads it (stemmed)."""
    quoted = '"' + word.replace('"', "") + '"'
    return (
        db.execute("SELECT 1 FROM fts WHERE fts MATCH ? LIMIT 1", (quoted,)).fetchone() is not None
    )


def known_words(db: sqlite3.Connection, words: list[str]) -> dict[str, int]:
    """``{word: number of sections that use it}`` for those of ``words`` the sections use."""
    found: dict[str, int] = {}
    for start in range(0, len(words), 500):  # far below SQLite's limit on parameters
        chunk = words[start : start + 500]
        marks = ",".join("?" * len(chunk))
        found.update(db.execute(f"SELECT w, n FROM word WHERE w IN ({marks})", chunk))
    return found


def signatures(db: sqlite3.Connection) -> list[tuple[str, str, str, int, str]]:
    """Every stored error signature: ``(section id, pattern, literal, anchored, tags)``."""
    return db.execute("SELECT section, pattern, literal, anchored, tags FROM signature").fetchall()


def snippets(db: sqlite3.Connection, expression: str, rowids: list[int]) -> dict[int, str]:
    """``{rowid: body excerpt}`` for a few sections, matched words between ``HIT_OPEN`` and
    ``HIT_CLOSE`` (control characters, so they never clash with the Markdown in the text)."""
    marks = ",".join("?" * len(rowids))
    return dict(
        db.execute(
            f"SELECT rowid, snippet(fts, 4, '{HIT_OPEN}', '{HIT_CLOSE}', '…', 20) FROM fts"
            f" WHERE fts MATCH ? AND rowid IN ({marks})",
            (expression, *rowids),
        ).fetchall()
    )


def summaries(db: sqlite3.Connection, rowids: list[int]) -> dict[int, str]:
    """``{rowid: summary}`` for a few sections: what each says, in a sentence or two."""
    marks = ",".join("?" * len(rowids))
    return dict(db.execute(f"SELECT rowid, summary FROM section WHERE rowid IN ({marks})", rowids))


def link_lists(db: sqlite3.Connection, path: str) -> list[str]:
    """The texts of a page's sections that are only links (its "Related pitfalls" lists)."""
    rows = db.execute("SELECT text FROM section WHERE path = ? AND lean = 1", (path,))
    return [row[0] for row in rows]


def section(db: sqlite3.Connection, section_id: str) -> dict | None:
    """One whole section as ``{"id", "title", "path", "url", "text"}``, or None."""
    row = db.execute(
        "SELECT id, title, path, url, text FROM section WHERE id = ?", (section_id,)
    ).fetchone()
    return dict(zip(("id", "title", "path", "url", "text"), row, strict=True)) if row else None


def _like_literal(text: str) -> str:
    """``text`` matched literally by a LIKE pattern with ``ESCAPE '\\'``."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def page_sections(db: sqlite3.Connection, page_id: str) -> list[dict]:
    """``{"id", "title"}`` of the sections of page ``page_id`` (its ``page#slug`` ids, not
    their parts), in page order; empty for any id that is not a page's."""
    rows = db.execute(
        "SELECT id, title FROM section WHERE id LIKE ? ESCAPE '\\' ORDER BY rowid",
        (f"{_like_literal(page_id)}#%",),
    ).fetchall()
    return [{"id": sid, "title": title} for sid, title in rows if "/" not in sid]


def similar_ids(db: sqlite3.Connection, fragment: str, limit: int = 5) -> list[str]:
    """Section ids containing ``fragment``, shortest first (for "did you mean")."""
    rows = db.execute(
        "SELECT id FROM section WHERE id LIKE ? ESCAPE '\\' ORDER BY length(id), id LIMIT ?",
        (f"%{_like_literal(fragment)}%", limit),
    ).fetchall()
    return [r[0] for r in rows]


def _sections(bundle: Path) -> list[Section]:
    from fsdp_skill.search.sections import searchable_sections  # the parser: only when building

    return searchable_sections(bundle)
