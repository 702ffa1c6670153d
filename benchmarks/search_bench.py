"""Retrieval quality and speed of `fsdp-skill search`, next to baselines measured in the same run.

Quality: each question of ``search_questions.toml`` (asked the way users ask in issues and
forums, a quarter in Chinese) names the section ids that answer it; the table shows hit@1,
hit@3 and MRR (over the top 10) for the shipped search and for a plain-BM25 baseline over the
same sections (one column, no identifier splitting, no glossary, no field weights).

Speed: warm query latency (in-process, opening the index per query as the API does), cold
``fsdp-skill search`` processes next to ``python -c pass``, and the index build time.

    python benchmarks/search_bench.py [--runs 20] [--bundle DIR] [--show-misses]
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
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from fsdp_skill.search import bundle_dir, index, search, sections

QUESTIONS = Path(__file__).with_name("search_questions.toml")
DEPTH = 10


def load_questions(path: Path = QUESTIONS) -> list[dict]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return data["question"]


def _cjk(text: str) -> bool:
    return bool(re.search(r"[\u3400-\u9fff]", text))


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


def scores(ranked: list[list[str]], wanted: list[list[str]]) -> dict[str, float]:
    """hit@1, hit@3 and MRR of ranked id lists against the ids that answer each question."""
    hit1 = hit3 = rr = 0.0
    for got, good in zip(ranked, wanted, strict=True):
        ranks = [i for i, sid in enumerate(got, start=1) if sid in good]
        first = ranks[0] if ranks else None
        hit1 += first == 1
        hit3 += first is not None and first <= 3
        rr += 1 / first if first else 0
    n = len(wanted) or 1
    return {"hit@1": hit1 / n, "hit@3": hit3 / n, "MRR": rr / n}


def quality(bundle: Path, questions: list[dict], show_misses: bool) -> list[tuple]:
    found = sections.bundle_sections(bundle)
    known = {s.id for s in found}
    missing = sorted({i for q in questions for i in q["ids"]} - known)
    if missing:
        print(f"warning: answer ids not in the bundle: {', '.join(missing)}", file=sys.stderr)
    baseline = PlainBM25(found)
    rows = []
    for label, subset in (
        ("all", questions),
        ("English", [q for q in questions if not _cjk(q["q"])]),
        ("Chinese", [q for q in questions if _cjk(q["q"])]),
    ):
        wanted = [q["ids"] for q in subset]
        ours = [
            [r["id"] for r in search(q["q"], k=DEPTH, bundle=bundle)["results"]] for q in subset
        ]
        plain = [baseline.ids(q["q"], DEPTH) for q in subset]
        rows.append((label, len(subset), scores(ours, wanted), scores(plain, wanted)))
        if show_misses and label == "all":
            for q, got in zip(subset, ours, strict=True):
                if not set(got[:3]) & set(q["ids"]):
                    print(f"miss: {q['q']!r} wants {q['ids']} got {got[:3]}", file=sys.stderr)
    return rows


def warm_latency(bundle: Path, questions: list[dict]) -> tuple[float, float]:
    search(questions[0]["q"], bundle=bundle)
    times = []
    for _ in range(3):
        for q in questions:
            start = time.perf_counter()
            search(q["q"], k=5, bundle=bundle)
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
    found = sections.bundle_sections(bundle)
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(3):
            start = time.perf_counter()
            index.write_index(Path(tmp) / f"i{n}.sqlite", sections.bundle_sections(bundle))
            times.append(time.perf_counter() - start)
    return statistics.median(times), len(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="cold processes per command")
    parser.add_argument("--bundle", type=Path, help="bundle to search (default: the shipped one)")
    parser.add_argument("--show-misses", action="store_true", help="list questions missed at 3")
    args = parser.parse_args()
    args.runs = max(args.runs, 2)
    bundle = args.bundle or bundle_dir()
    questions = load_questions()
    index.build(bundle)

    rows = quality(bundle, questions, args.show_misses)
    print(f"retrieval quality ({len(questions)} questions, answers checked in the top {DEPTH})")
    print("| questions | n | hit@1 | hit@3 | MRR | plain BM25 hit@1 | hit@3 | MRR |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, n, ours, plain in rows:
        print(
            f"| {label} | {n} | {ours['hit@1']:.2f} | {ours['hit@3']:.2f} | {ours['MRR']:.2f} "
            f"| {plain['hit@1']:.2f} | {plain['hit@3']:.2f} | {plain['MRR']:.2f} |"
        )
    median, p95 = warm_latency(bundle, questions)
    seconds, count = build_time(bundle)
    print()
    print("| speed | median | p95 / p90 | CPU time (median) |")
    print("|---|---:|---:|---:|")
    print(f"| warm query (in-process, k=5) | {median:.2f} ms | {p95:.2f} ms | |")
    for label, med, p90, cpu in cold_latency(bundle, args.runs):
        print(f"| cold `{label}` process | {med:.0f} ms | {p90:.0f} ms | {cpu:.0f} ms |")
    print(f"| index build ({count} sections) | {seconds * 1000:.0f} ms | | |")
    print(f"\nload average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
