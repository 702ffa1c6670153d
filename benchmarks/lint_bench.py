"""Lint throughput on a large generated corpus, next to ``ast.parse`` alone on the same files.

The corpus is built from the lint test fixtures and clean training scripts: each generated
module concatenates several of them (so files look like real, long training scripts), with
names made unique per copy. Both measurements read every file from disk; the baseline then
only parses, while lint also walks folders, loads configuration, builds the file model and
runs all 18 rules. Times are CPU seconds of this process (the machine may be shared), best
of ``--repeat`` interleaved runs.

    python benchmarks/lint_bench.py [--files 400] [--per-file 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import ast
import random
import shutil
import tempfile
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "lint" / "fixtures"


def build_corpus(dest: Path, files: int, per_file: int, seed: int = 0) -> int:
    """Write ``files`` modules under ``dest``; return the total number of lines."""
    sources = [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.rglob("*.py"))]
    rng = random.Random(seed)
    lines = 0
    for i in range(files):
        parts = []
        for j, text in enumerate(rng.sample(sources, per_file)):
            parts.append(text.replace("model", f"model_{i}_{j}").replace("main", f"main_{j}"))
        text = "\n\n".join(parts)
        folder = dest / f"pkg{i % 20:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"train_{i:04d}.py").write_text(text, encoding="utf-8")
        lines += text.count("\n") + 1
    return lines


def time_parse(paths: list[Path]) -> float:
    start = time.process_time()
    for path in paths:
        ast.parse(path.read_bytes().decode("utf-8"), filename=str(path))
    return time.process_time() - start


def time_lint(root: Path) -> tuple[float, int]:
    from fsdp_skill.lint import config, lint_paths

    config.for_folder.cache_clear()
    start = time.process_time()
    result = lint_paths([str(root)])
    return time.process_time() - start, len(result["findings"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--per-file", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="lint-bench-"))
    try:
        lines = build_corpus(root, args.files, args.per_file)
        paths = sorted(root.rglob("*.py"))
        parse_times, lint_times = [], []
        for _ in range(args.repeat):  # interleaved, so that load changes hit both alike
            parse_times.append(time_parse(paths))
            seconds, findings = time_lint(root)
            lint_times.append(seconds)
        parse_s, lint_s = min(parse_times), min(lint_times)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(f"corpus: {len(paths)} files, {lines:,} lines, {findings:,} findings")
    print()
    print("| measurement | seconds | lines/s | x parse |")
    print("|---|---:|---:|---:|")
    print(f"| read + ast.parse (baseline) | {parse_s:.3f} | {lines / parse_s:,.0f} | 1.00 |")
    print(
        f"| fsdp-skill lint (all 18 rules) | {lint_s:.3f} | {lines / lint_s:,.0f} | "
        f"{lint_s / parse_s:.2f} |"
    )


if __name__ == "__main__":
    main()
