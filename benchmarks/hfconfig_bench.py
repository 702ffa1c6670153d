"""The Hugging Face config checks on the real config files, next to what accelerate and
transformers themselves report for the same files.

Every real file (tests/lint/hfconfig/real/, each with its source URL) was judged by hand
before the linter ran on it (labels.toml). This prints, per file kind, how many judged
problems there are, what ``fsdp-skill lint`` finds (true and false positives, misses), and,
as the baseline, how many of the files the installed tools refuse at start-up: each
accelerate file goes through ``accelerate launch``'s argument handling and
``FullyShardedDataParallelPlugin``, each Trainer file through ``TrainingArguments`` and the
plugin it builds. It also times the linter against a plain ``yaml.safe_load`` of the files.

    python benchmarks/hfconfig_bench.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "lint" / "hfconfig" / "real"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _kind(text: str, name: str) -> str | None:
    from fsdp_skill.lint.hfconfig import document

    try:
        return document.load(text, name).kind
    except (document.NotAConfig, document.BadConfig):
        return None


def _tools_refuse(text: str, kind: str) -> bool:
    """Whether accelerate (or the Trainer) stops on this file before training starts."""
    from fsdp_skill.references import hf_probe

    value = yaml.safe_load(text)
    if kind == "accelerate":
        top = {k: v for k, v in value.items() if k != "fsdp_config"}
        outcome = hf_probe.accelerate_outcome(dict(value.get("fsdp_config") or {}), top)
    else:
        section = value.get("fsdp_config", value) if kind == "trainer-arguments" else value
        outcome = hf_probe.trainer_outcome(section)
    return outcome[0] != "ok"


def measure(repeat: int) -> dict:
    from fsdp_skill.lint import lint_paths

    labels = {f["name"]: f for f in tomllib.loads((REAL / "labels.toml").read_text())["file"]}
    result = lint_paths([str(REAL)])
    found: dict[str, set] = {}
    for f in result["findings"]:
        found.setdefault(Path(f["path"]).name, set()).add((f["code"], f["line"]))
    rows: dict[str, dict] = {}
    for name, label in sorted(labels.items()):
        text = (REAL / name).read_text(encoding="utf-8")
        kind = _kind(text, name) or "not a config"
        row = rows.setdefault(
            kind,
            {"files": 0, "judged": 0, "tp": 0, "fp": 0, "missed": 0, "flagged": 0, "refused": 0},
        )
        row["files"] += 1
        judged = {(x["code"], x["line"]): x["true_positive"] for x in label.get("finding", [])}
        truth = {k for k, v in judged.items() if v}
        hits = found.get(name, set())
        row["judged"] += len(truth)
        row["tp"] += len(hits & truth)
        row["fp"] += len(hits - truth)
        row["missed"] += len(truth - hits)
        row["flagged"] += bool(hits)
        if kind != "not a config":
            row["refused"] += _tools_refuse(text, kind)
    paths = [str(p) for p in sorted(REAL.iterdir()) if p.name != "labels.toml"]
    lint_times, load_times = [], []
    for _ in range(repeat):
        start = time.process_time()
        lint_paths(paths)
        lint_times.append(time.process_time() - start)
        start = time.process_time()
        for p in paths:
            yaml.safe_load(Path(p).read_text(encoding="utf-8"))
        load_times.append(time.process_time() - start)
    return {
        "rows": rows,
        "files": len(paths),
        "lint_ms": 1000 * min(lint_times),
        "yaml_ms": 1000 * min(load_times),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import logging

    logging.disable(logging.WARNING)
    data = measure(args.repeat)
    if args.json:
        print(json.dumps(data, indent=1))
        return 0
    print(
        "| files | n | judged problems | lint: true | lint: false | lint: missed | "
        "lint precision | files lint flags | files accelerate/transformers refuse |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    total = {k: 0 for k in ("files", "judged", "tp", "fp", "missed", "flagged", "refused")}
    for row in data["rows"].values():
        for k in total:
            total[k] += row[k]
    for kind, row in [*sorted(data["rows"].items()), ("all", total)]:
        found = row["tp"] + row["fp"]
        precision = f"{row['tp'] / found:.2f}" if found else "–"
        print(
            f"| {kind} | {row['files']} | {row['judged']} | {row['tp']} | {row['fp']} | "
            f"{row['missed']} | {precision} | {row['flagged']} | {row['refused']} |"
        )
    print()
    print("| speed (CPU ms, best of runs) | all files |")
    print("|---|---:|")
    print(f"| yaml.safe_load of each file (baseline) | {data['yaml_ms']:.1f} |")
    print(f"| fsdp-skill lint (all checks, in-process) | {data['lint_ms']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
