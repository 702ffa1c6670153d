"""Retrieval quality and speed of `fsdp-skill search`, next to baselines measured in the same run.

Quality, on two question sets:

- ``search_corpus.toml``: questions people asked in public GitHub issues and forums (titles and
  first lines, a third in Chinese, each with its source), labelled with the sections that answer
  them before the search was run on them. A fixed fifth of them, chosen by a hash of the source
  URL, is a hold-out that ranking changes are never tuned on: its figures are the honest
  estimate for questions outside this repository. Questions answered only by guides that are
  not in the bundle yet (``guide:<id>``) are counted as pending, outside the figures.
- ``search_questions.toml``: questions written for this benchmark, the earlier set.

Each table shows hit@1, hit@3 and MRR (over the top 10) for the shipped search, for the same
search without earlier questions, and for a plain-BM25 baseline over the same sections (one
column, no identifier splitting, no glossary, no field weights). A result that is a part of an
answering section (``<id>/<slug>``) counts as that section.

The tuned questions ship as the earlier questions search learns from (``knowledge/asked.toml``,
written by ``search_asked.py``), so no question is searched with an index that holds it: a
tuned question is searched with an index built without its fifth of them (five folds by
source), every other question with the shipped one.

Speed: warm query latency (in-process), cold ``fsdp-skill search`` processes next to
``python -c pass``, and the index build time.

    python benchmarks/search_bench.py [--runs 20] [--bundle DIR] [--show-misses]

``--show-misses`` lists the tuning questions missed at 3 (never the hold-out), with the
re-judged labels (``search_relabel.toml``); both label sets are reported, hold-out first.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from fsdp_skill.search import _ranked as ranked_results
from fsdp_skill.search import asked, bundle_dir, index, search, sections
from fsdp_skill.search.asked import GUIDE

HERE = Path(__file__).parent
CORPUS = HERE / "search_corpus.toml"
QUESTIONS = HERE / "search_questions.toml"
RELABEL = HERE / "search_relabel.toml"
"""The corpus's labels as re-judged blind (``search_judge.py``): reported beside the originals."""
DEPTH = 10
HOLDOUT_EVERY = 5


def load(path: Path) -> list[dict]:
    return tomllib.loads(path.read_text(encoding="utf-8"))["question"]


def toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; DEL is the one TOML adds)."""
    import json

    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def is_chinese(text: str) -> bool:
    return bool(re.search(r"[\u3400-\u9fff]", text))


def _source_number(source: str, person: bytes = b"") -> int:
    """A number fixed by the source URL alone (stable, unbiased), for splitting the corpus."""
    from hashlib import blake2b

    return int.from_bytes(blake2b(source.encode(), digest_size=8, person=person).digest(), "big")


def is_holdout(source: str) -> bool:
    """A fixed fifth of the corpus, chosen by the source URL alone."""
    return _source_number(source) % HOLDOUT_EVERY == 0


@dataclass(frozen=True)
class Question:
    text: str
    answers: frozenset[str]
    """Section ids, and ``guide:<id>`` (any section of that guide)."""
    source: str = ""

    def hit(self, section_id: str) -> bool:
        """The section answers, or is a part of one that does, or is on an answering guide."""
        whole = section_id.split(sections.PART, 1)[0]
        if section_id in self.answers or whole in self.answers:
            return True
        page = whole.split("#", 1)[0]
        return GUIDE + page in self.answers

    def pending(self, known_pages: set[str]) -> bool:
        """Answered only by guides that the bundle does not have yet."""
        return bool(self.answers) and all(
            a.startswith(GUIDE) and a[len(GUIDE) :] not in known_pages for a in self.answers
        )


def questions_of(path: Path) -> list[Question]:
    return [Question(q["q"], frozenset(q["ids"]), q.get("source", "")) for q in load(path)]


def question_key(source: str, text: str) -> str:
    """A short stable key for one corpus question (its source and text)."""
    from hashlib import blake2b

    return blake2b(f"{source}\n{text}".encode(), digest_size=5).hexdigest()


def rejudged(asked: list[Question]) -> list[Question]:
    """``asked`` with the labels of ``search_relabel.toml`` where a question was re-judged."""
    if not RELABEL.exists():
        return asked
    new = {e["key"]: e["new"] for e in tomllib.loads(RELABEL.read_text("utf-8"))["rejudged"]}
    return [
        Question(q.text, frozenset(new.get(question_key(q.source, q.text), q.answers)), q.source)
        for q in asked
    ]


class PlainBM25:
    """The baseline: the same sections in one FTS5 column, default tokenizer, raw words."""

    def __init__(self, found: list[sections.Section]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE t USING fts5(id UNINDEXED, body)")
        self.db.executemany(
            "INSERT INTO t VALUES (?, ?)",
            [(s.id, s.text) for s in found if s.kind != sections.INDEX_KIND],
        )

    def ids(self, query: str, k: int) -> list[str]:
        words = re.findall(r"\w+", query.lower())
        if not words:
            return []
        expression = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
        rows = self.db.execute(
            "SELECT id FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?", (expression, k)
        ).fetchall()
        return [r[0] for r in rows]


def scores(ranked: list[list[str]], asked: list[Question]) -> dict[str, float]:
    """hit@1, hit@3 and MRR of ranked id lists against the answers of each question."""
    hit1 = hit3 = rr = 0.0
    for got, question in zip(ranked, asked, strict=True):
        first = next((i for i, sid in enumerate(got, start=1) if question.hit(sid)), None)
        hit1 += first == 1
        hit3 += first is not None and first <= 3
        rr += 1 / first if first else 0
    n = len(asked) or 1
    return {"hit@1": hit1 / n, "hit@3": hit3 / n, "MRR": rr / n}


def _check_answers(asked: list[Question], known: set[str], pages: set[str], name: str) -> None:
    missing = sorted(
        a
        for q in asked
        for a in q.answers
        if (a[len(GUIDE) :] not in pages if a.startswith(GUIDE) else a not in known)
        and not a.startswith(GUIDE)
    )
    if missing:
        print(
            f"warning: {name}: answer ids not in the bundle: {', '.join(missing)}", file=sys.stderr
        )


FOLDS = 5


class Searcher:
    """The shipped search over index files built in this run, so that no question is searched
    by an index that has learnt from it (``knowledge/asked.toml`` holds the tuned questions).

    A question of ``asked.toml`` is searched with an index built without its fifth of the
    file (five folds by source); any other question (hold-out, written) with the shipped
    questions; ``alone`` searches with no earlier questions at all."""

    def __init__(self, bundle: Path, workdir: Path) -> None:
        found = sections.searchable_sections(bundle)
        shipped = asked.load_entries()
        self.fold_of = {e["q"]: fold_of(e["source"]) for e in shipped}
        self.dbs: dict[object, sqlite3.Connection] = {}
        plans = [("shipped", shipped), ("alone", [])]
        plans += [(n, [e for e in shipped if fold_of(e["source"]) != n]) for n in range(FOLDS)]
        for name, entries in plans:
            path = workdir / f"index-{name}.sqlite"
            index.write_index(path, found, [(e["q"], asked.section_ids(e)) for e in entries])
            self.dbs[name] = sqlite3.connect(path)

    def ids(self, text: str, k: int = DEPTH, alone: bool = False) -> list[str]:
        name = "alone" if alone else self.fold_of.get(text, "shipped")
        return [r["id"] for r in ranked_results(self.dbs[name], text, k)["results"]]


def fold_of(source: str) -> int:
    """The fold of a tuned question (a hash of its source apart from the hold-out's)."""
    return _source_number(source, b"folds") % FOLDS


def table_rows(
    groups: list[tuple[str, list[Question]]], searcher: Searcher, baseline: PlainBM25
) -> list[tuple]:
    rows = []
    for label, asked_here in groups:
        ours = [searcher.ids(q.text) for q in asked_here]
        alone = [searcher.ids(q.text, alone=True) for q in asked_here]
        plain = [baseline.ids(q.text, DEPTH) for q in asked_here]
        rows.append(
            (label, len(asked_here), *(scores(r, asked_here) for r in (ours, alone, plain)))
        )
    return rows


def print_table(title: str, rows: list[tuple]) -> None:
    print(title)
    print(
        "| questions | n | hit@1 | hit@3 | MRR | no earlier questions hit@1 | hit@3 | MRR "
        "| plain BM25 hit@1 | hit@3 | MRR |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, n, *figures in rows:
        cells = " | ".join(f"{f['hit@1']:.2f} | {f['hit@3']:.2f} | {f['MRR']:.2f}" for f in figures)
        print(f"| {label} | {n} | {cells} |")
    print()


def by_language(label: str, asked: list[Question]) -> list[tuple[str, list[Question]]]:
    return [
        (label, asked),
        (f"{label}, English", [q for q in asked if not is_chinese(q.text)]),
        (f"{label}, Chinese", [q for q in asked if is_chinese(q.text)]),
    ]


def quality(bundle: Path, show_misses: bool, workdir: Path) -> None:
    found = sections.bundle_sections(bundle)
    searcher = Searcher(bundle, workdir)
    known = {part.id for s in found for part in sections.parts(s)}  # long ones: their parts too
    pages = {sid.split("#", 1)[0] for sid in known}
    baseline = PlainBM25(found)

    original = questions_of(CORPUS)
    relabelled = rejudged(original)
    _check_answers(relabelled, known, pages, RELABEL.name)
    zh = sum(is_chinese(q.text) for q in original)
    changed = sum(a.answers != b.answers for a, b in zip(original, relabelled, strict=True))
    unanswered = sum(not q.answers for q in relabelled)
    print(
        f"real questions ({len(original)} from public issues and forums, {zh} in Chinese; "
        f"answers checked in the top {DEPTH}); labels re-judged blind for {changed} of them, "
        f"{unanswered} that no section answers count as misses"
    )
    for title, corpus in (("re-judged labels", relabelled), ("original labels", original)):
        scored = [q for q in corpus if not q.pending(pages)]
        tune = [q for q in scored if not is_holdout(q.source)]
        hold = [q for q in scored if is_holdout(q.source)]
        groups = by_language("hold-out", hold) + by_language("tuned", tune)
        groups += by_language("all", scored)
        pending = len(corpus) - len(scored)
        note = f", {pending} pending (answered only by guides not in the bundle)" if pending else ""
        print_table(f"{title}{note}", table_rows(groups, searcher, baseline))
    if show_misses:
        for q in relabelled:
            if is_holdout(q.source):
                continue
            got = searcher.ids(q.text, k=3)
            if not any(q.hit(sid) for sid in got):
                print(f"miss: {q.text!r} wants {sorted(q.answers)} got {got}", file=sys.stderr)

    written = questions_of(QUESTIONS)
    _check_answers(written, known, pages, QUESTIONS.name)
    print_table(
        f"written questions ({len(written)}, {sum(is_chinese(q.text) for q in written)} in Chinese)",
        table_rows(by_language("all", written), searcher, baseline),
    )


def warm_latency(bundle: Path, asked: list[Question]) -> tuple[float, float]:
    search(asked[0].text, bundle=bundle)
    times = []
    for _ in range(3):
        for q in asked:
            start = time.perf_counter()
            search(q.text, k=5, bundle=bundle)
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), statistics.quantiles(times, n=20)[-1]


def cold_latency(bundle: Path, runs: int) -> list[tuple[str, float, float, float]]:
    """Fresh processes, as an agent runs them: the console script when installed.

    Wall time (median, p90) and CPU time (median): on a busy machine the CPU time is the
    figure that does not depend on what else runs."""
    script = Path(sys.executable).with_name("fsdp-skill")
    tool = [str(script)] if script.exists() else [sys.executable, "-m", "fsdp_skill"]
    env = {**os.environ, "FSDP_SKILL_BUNDLE": str(bundle)}
    commands = [
        ("python -c pass (baseline)", [sys.executable, "-c", "pass"]),
        ("fsdp-skill --help", [*tool, "--help"]),
        ("fsdp-skill search QUERY", [*tool, "search", "fsdp hangs in all_gather"]),
        ("fsdp-skill show ID", [*tool, "show", "pitfalls"]),
    ]
    rows = []
    for label, argv in commands:
        subprocess.run(argv, capture_output=True, env=env)  # warm the file cache and the index
        times, cpu = [], []
        for _ in range(runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(argv, capture_output=True, env=env)
            times.append((time.perf_counter() - start) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            cpu.append(used * 1000)
        rows.append(
            (
                label,
                statistics.median(times),
                statistics.quantiles(times, n=10)[-1],
                statistics.median(cpu),
            )
        )
    return rows


def build_time(bundle: Path) -> tuple[float, int]:
    found = sections.searchable_sections(bundle)
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(3):
            start = time.perf_counter()
            index.write_index(Path(tmp) / f"i{n}.sqlite", sections.searchable_sections(bundle))
            times.append(time.perf_counter() - start)
    return statistics.median(times), len(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="cold processes per command")
    parser.add_argument("--bundle", type=Path, help="bundle to search (default: the shipped one)")
    parser.add_argument(
        "--show-misses", action="store_true", help="list tuning questions missed at 3"
    )
    parser.add_argument("--quality-only", action="store_true", help="skip the speed figures")
    args = parser.parse_args()
    args.runs = max(args.runs, 2)
    bundle = args.bundle or bundle_dir()
    index.build(bundle)

    with tempfile.TemporaryDirectory() as workdir:
        quality(bundle, args.show_misses, Path(workdir))
    if args.quality_only:
        return
    median, p95 = warm_latency(bundle, questions_of(CORPUS))
    seconds, count = build_time(bundle)
    print("| speed | median | p95 / p90 | CPU time (median) |")
    print("|---|---:|---:|---:|")
    print(f"| warm query (in-process, k=5) | {median:.2f} ms | {p95:.2f} ms | |")
    for label, med, p90, cpu in cold_latency(bundle, args.runs):
        print(f"| cold `{label}` process | {med:.0f} ms | {p90:.0f} ms | {cpu:.0f} ms |")
    print(f"| index build ({count} sections and parts) | {seconds * 1000:.0f} ms | | |")
    print(f"\nload average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
