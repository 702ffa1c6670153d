"""How often `fsdp-skill explain` names the right cause, on real error texts and on reproduced ones.

Corpus: ``tests/corpus/errors/*.toml`` (tuned) and ``tests/corpus/errors/holdout/*.toml`` (never
tuned on): error texts users posted, each labelled with the pitfall that is the right answer and
the keywords that answer must contain, before ``explain`` ran on it. The hold-out is a fifth of
the first collection (by a hash of the file name) and all of the latest collection, which no
signature was written from and which was first looked at when it was measured: its figures are
the estimate for texts outside this repository. Reproduced set: what the failing gloo programs of
``tests/diagnose/repro`` print under torch 2.13 (the saved fixtures), each with its expected pitfall.

Each text is judged on the answer as a whole:

- right: the first known error is the label (or an accepted alternative) and its cause/fix
  contains every keyword ("label first" counts the first known error alone, keywords aside);
- partial: not right, but the label is among the first three known errors or related sections;
- wrong: known errors were found, none of them the label in the first three;
- none: no known error and no related section names the label.

Texts whose cause no pitfall describes (``pitfall = ""``: a library bug, a cluster's
configuration) are counted apart: there the right answer is to name no known error, and each
text for which ``explain`` names one is a wrong claim.

Labels whose pitfall does not exist yet (written by another branch) are counted apart as
"pending". The baseline, measured in the same run, is a plain `fsdp-skill search` of the
text's exception line: right when its first result is the label's section.

    python benchmarks/explain_bench.py [--show-misses] [--markdown]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fsdp_skill import knowledge  # noqa: E402
from fsdp_skill.diagnose import explain  # noqa: E402
from fsdp_skill.diagnose.fallback import exception_line  # noqa: E402
from fsdp_skill.search import search  # noqa: E402

CORPUS = REPO / "tests" / "corpus" / "errors"
VERDICTS = ("right", "partial", "wrong", "none")


@dataclass
class Item:
    name: str
    text: str
    labels: tuple[str, ...]
    keywords: tuple[str, ...] = ()
    source: str = ""


@dataclass
class Tally:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    pending: int = 0
    baseline_right: int = 0
    label_first: int = 0
    misses: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def judged(self) -> int:
        return sum(self.counts.values())


def load_corpus(folder: Path) -> list[Item]:
    """The labelled items of one corpus folder (not its subfolders)."""
    items = []
    for path in sorted(folder.glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        items.append(
            Item(
                path.stem,
                data["text"],
                (data["pitfall"], *data.get("also", ())),
                tuple(data.get("keywords", ())),
                data["source"],
            )
        )
    return items


def load_reproduced() -> list[Item]:
    """The texts the repro programs printed, as saved by tests/diagnose/capture.py."""
    from tests.diagnose.capture import (
        BATCH_EXPECTED,
        CASE_EXPECTED,
        ERROR_FIXTURES,
        FIXTURES,
        RENDEZVOUS_EXPECTED,
        split_batch,
    )

    batch = split_batch((ERROR_FIXTURES / "batch.log").read_text(encoding="utf-8"))
    items = [Item(f"batch:{name}", batch[name], (pid,)) for name, pid in BATCH_EXPECTED.items()]
    items += [
        Item(f"case:{case}", (FIXTURES / case / "torchrun.log").read_text(encoding="utf-8"), (pid,))
        for case, pid in CASE_EXPECTED.items()
    ]
    text = (ERROR_FIXTURES / "rendezvous_timeout.log").read_text(encoding="utf-8")
    items.append(Item("rendezvous_timeout", text, (RENDEZVOUS_EXPECTED,)))
    return items


def _words(text: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "", text.lower())


def has_keywords(pitfall_id: str, keywords: tuple[str, ...]) -> bool:
    """Whether the pitfall's title, cause and fix mention every keyword (case and punctuation aside)."""
    p = knowledge.pitfall(pitfall_id)
    if p is None:
        return False
    body = _words(" ".join((p.title, p.symptom, p.cause, p.fix)))
    return all(_words(k) in body for k in keywords)


def judge(item: Item, result: dict) -> str:
    known = [m["id"] for m in result["matches"]]
    related = [r["id"].removeprefix("pitfall:") for r in result.get("related", [])]
    if known and known[0] in item.labels and has_keywords(known[0], item.keywords):
        return "right"
    if any(x in item.labels for x in (known + related)[:3]):
        return "partial"
    return "wrong" if known else "none"


def baseline(item: Item) -> bool:
    """A plain search of the text's exception line: is the first result the label's section?"""
    line = exception_line(item.text)
    if not line:
        return False
    try:
        results = search(line, k=1)["results"]
    except Exception:  # an unsearchable line is a miss for the baseline
        return False
    return bool(results) and results[0]["id"].removeprefix("pitfall:") in item.labels


def run(items: list[Item]) -> Tally:
    tally = Tally()
    start = time.perf_counter()
    for item in items:
        if not item.labels[0]:
            continue  # no pitfall is the cause: counted by ``unexplained``
        if knowledge.pitfall(item.labels[0]) is None:
            tally.pending += 1
            continue
        result = explain(item.text)
        verdict = judge(item, result)
        tally.counts[verdict] += 1
        tally.label_first += bool(result["matches"]) and result["matches"][0]["id"] in item.labels
        tally.baseline_right += baseline(item)
        if verdict != "right":
            got = [m["id"] for m in result["matches"]][:3] or [
                "related:" + r["id"] for r in result.get("related", [])[:3]
            ]
            tally.misses.append(f"{verdict:7} {item.name}: want {item.labels[0]}, got {got}")
    tally.seconds = time.perf_counter() - start
    return tally


def unexplained(items: list[Item]) -> tuple[int, list[str]]:
    """Of the texts whose cause no pitfall describes (``pitfall = ""``), the ones for which
    ``explain`` still names a known error: each such claim is a wrong answer."""
    claimed = []
    for item in items:
        if item.labels[0]:
            continue
        ids = [m["id"] for m in explain(item.text)["matches"]]
        if ids:
            claimed.append(f"claimed {item.name}: {ids[:2]}")
    return sum(not i.labels[0] for i in items), claimed


def _pct(n: int, total: int) -> str:
    return f"{100 * n / total:.0f}%" if total else "-"


def table(rows: list[tuple[str, Tally]]) -> list[str]:
    head = (
        "| set | texts | right | label first | partial | wrong | none | right in top 3 | pending "
        "| baseline: search right | ms/text |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, t in rows:
        n = t.judged
        c = t.counts
        ms = 1000 * t.seconds / n if n else 0.0
        lines.append(
            f"| {name} | {n} | {c['right']} ({_pct(c['right'], n)}) | "
            f"{t.label_first} ({_pct(t.label_first, n)}) | {c['partial']} | "
            f"{c['wrong']} | {c['none']} ({_pct(c['none'], n)}) | "
            f"{_pct(c['right'] + c['partial'], n)} | {t.pending} | "
            f"{t.baseline_right} ({_pct(t.baseline_right, n)}) | {ms:.1f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-misses", action="store_true", help="list every text not right")
    args = parser.parse_args(argv)
    sets = [
        ("real-world, tuned", load_corpus(CORPUS)),
        ("real-world, hold-out", load_corpus(CORPUS / "holdout")),
        ("reproduced (torch 2.13)", load_reproduced()),
    ]
    rows = [(name, run(items)) for name, items in sets]
    print("\n".join(table(rows)))
    print()
    print("| texts no pitfall explains | texts | no known error named | a known error named |")
    print("|---|---:|---:|---:|")
    claims = []
    for name, items in sets[:2]:
        n, claimed = unexplained(items)
        claims += claimed
        print(f"| {name} | {n} | {n - len(claimed)} | {len(claimed)} |")
    if args.show_misses:
        for name, t in rows:
            print(f"\n{name}:")
            print("\n".join(f"  {m}" for m in t.misses) or "  (none)")
        print("\ntexts no pitfall explains:")
        print("\n".join(f"  {c}" for c in claims) or "  (none)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
