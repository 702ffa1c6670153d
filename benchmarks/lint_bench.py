"""Lint precision and throughput: the real-world corpus (pinned registry packages, judged
findings, tuned part and hold-out), the planted fixture corpus (recall, clean files), and
throughput on a large generated corpus, each next to ``ast.parse`` alone on the same files.

The corpus is built from the lint test fixtures and clean training scripts: each generated
module concatenates several of them (so files look like real, long training scripts), with
names made unique per copy. Both measurements read every file from disk; the baseline then
only parses, while lint also walks folders, loads configuration, builds the file model and
runs every rule. Times are CPU seconds of this process (the machine may be shared), best
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


def real_world() -> None:
    """Findings and precision on the judged real-world corpus (registry packages and, given a
    local copy, the GitHub-only files), tuned part and hold-out apart, and its lines/s."""
    import sys

    sys.path.insert(0, str(FIXTURES.parent.parent.parent))
    from tests.lint.realworld import corpus

    rows: dict[str, list] = {}  # label -> [files, lines, found, true, false]
    lint_s = parse_s = 0.0
    lines_all = 0

    def add(label: str, paths: list[Path], found: list, verdict_of) -> None:
        row = rows.setdefault(label, [0, 0, 0, 0, 0])
        row[0] += len(paths)
        row[1] += sum(p.read_bytes().count(b"\n") + 1 for p in paths)
        row[2] += len(found)
        for f in found:
            verdict = verdict_of(f)
            row[3] += verdict is True
            row[4] += verdict is False

    def timed_parse(paths: list[Path]) -> float:
        start = time.process_time()
        for path in paths:
            ast.parse(path.read_bytes().decode("utf-8"), filename=str(path))
        return time.process_time() - start

    verdicts = {v.key: v.verdict for v in corpus.verdicts()}
    for package in corpus.packages():
        root = corpus.fetch(package)
        paths = [root / p for p in package.paths]
        parse_s += timed_parse(paths)
        start = time.process_time()
        found = corpus.lint_package(package, root)
        lint_s += time.process_time() - start
        label = "registry, hold-out" if package.holdout else "registry, tuned"
        add(
            label,
            paths,
            found,
            lambda f: verdicts.get((f["package"], f["path"], f["line"], f["code"])),
        )

    files, gh_verdicts = corpus.github()
    gh = {v.key: v for v in gh_verdicts}
    checkout = corpus.github_checkout()
    held = {f.repo for f in files if f.holdout}
    if checkout is not None:
        paths = [checkout / f.repo.replace("/", "__") / f.path for f in files]
        parse_s += timed_parse(paths)
        start = time.process_time()
        found = corpus.lint_github(checkout, files)
        lint_s += time.process_time() - start
        for part in (False, True):
            mine = [f for f in files if f.holdout == part]
            add(
                "GitHub, hold-out" if part else "GitHub, tuned",
                [checkout / f.repo.replace("/", "__") / f.path for f in mine],
                [f for f in found if (f["repo"] in held) == part],
                lambda f: getattr(
                    gh.get((f["repo"], f["path"], f["line"], f["code"])), "verdict", None
                ),
            )
    print(
        "| real-world corpus, findings now | files | lines | findings | true | false | precision |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    total = [0, 0, 0, 0, 0]
    for label, row in rows.items():
        total = [a + b for a, b in zip(total, row, strict=True)]
        print(_row(label, row))
    print(_row("all", total))
    lines_all = total[1]
    if checkout is None:
        print(f"(GitHub-only files not linted: set {corpus.GITHUB_CHECKOUT} to a local copy)")
    print()
    print("| as judged when first linted, before any rule change | findings | true | precision |")
    print("|---|---:|---:|---:|")
    first = [v for v in corpus.verdicts() if v.judged == "before"]
    print(_judged("registry packages", [v.verdict for v in first]))
    for part, label in ((False, "GitHub, tuned"), (True, "GitHub, hold-out")):
        mine = [v.verdict for v in gh_verdicts if v.judged == "before" and (v.repo in held) == part]
        print(_judged(label, mine))
    print(
        _judged(
            "all",
            [v.verdict for v in first] + [v.verdict for v in gh_verdicts if v.judged == "before"],
        )
    )
    print()
    print("| real-world speed | CPU s | lines/s |")
    print("|---|---:|---:|")
    print(f"| read + ast.parse (baseline) | {parse_s:.3f} | {lines_all / parse_s:,.0f} |")
    print(f"| fsdp-skill lint, project-wide | {lint_s:.3f} | {lines_all / lint_s:,.0f} |")
    print()


def _row(label: str, row: list) -> str:
    files, lines, found, true, false = row
    precision = f"{true / found:.0%}" if found else "n/a"
    return f"| {label} | {files} | {lines:,} | {found} | {true} | {false} | {precision} |"


def _judged(label: str, verdicts: list[bool]) -> str:
    true = sum(verdicts)
    precision = f"{true / len(verdicts):.0%}" if verdicts else "n/a"
    return f"| {label} | {len(verdicts)} | {true} | {precision} |"


def planted() -> None:
    """Recall on the planted positives and silence on near misses and clean scripts."""
    from fsdp_skill.lint import lint_paths

    hits = positives = misses = near = 0
    for path in sorted(FIXTURES.glob("FSDP*/*.py")):
        codes = {f["code"] for f in lint_paths([str(path)])["findings"]}
        if path.name.startswith("pos_"):
            positives += 1
            hits += path.parent.name in codes
        else:
            near += 1
            misses += path.parent.name in codes
    clean = sorted((FIXTURES / "clean").glob("*.py"))
    clean_findings = sum(len(lint_paths([str(p)])["findings"]) for p in clean)
    print("| planted corpus | n | result |")
    print("|---|---:|---:|")
    print(f"| positives found (recall) | {positives} | {hits / positives:.0%} |")
    print(f"| near misses flagged | {near} | {misses} |")
    print(f"| findings on clean training scripts | {len(clean)} | {clean_findings} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--per-file", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-real-world", action="store_true", help="skip the fetched corpus")
    args = parser.parse_args()

    if not args.no_real_world:
        real_world()
    planted()
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
    from fsdp_skill.lint.rules import CODES

    print(
        f"| fsdp-skill lint (all {len(CODES)} rules) | {lint_s:.3f} | {lines / lint_s:,.0f} | "
        f"{lint_s / parse_s:.2f} |"
    )


if __name__ == "__main__":
    main()
