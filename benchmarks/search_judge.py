"""Blind re-judgement of the search corpus's labels (``search_corpus.toml``).

A label can be wrong or too strict (a pitfall written after the question was labelled answers
it exactly). Labels change only through this protocol, applied to every question of the
corpus, tuned and hold-out alike:

1. ``pool`` lists, for each question, its candidate sections: the labelled ones, the top 3 of
   the shipped search and the top 3 of plain BM25, shuffled, each with its title and what it
   says (its summary and sub-headings). Nothing says which ranker returned which, or which
   were labelled; questions come in an order that mixes tuned and hold-out. Candidates that
   were judged before for the same question are left out, so a later pass (after the ranking
   changed) only shows the new ones.
2. The judge marks, from the question and the section texts alone, which candidates answer
   the question, with a reason, in a verdict file (TOML: ``[[verdict]]`` with ``key``,
   ``answers`` = the letters that answer, ``reason``).
3. ``apply`` turns verdicts into ``search_relabel.toml``: for each question, the old label,
   the new label (the candidates judged to answer; old labels that were not shown again keep
   their earlier verdict) and the reason, every candidate judged kept with its verdict.

``search_bench.py`` reports the figures with the original labels and with the re-judged ones
side by side, so that label changes are never mixed up with ranking gains.

    python benchmarks/search_judge.py pool --out POOL.md --key KEY.toml [--bundle DIR]
    python benchmarks/search_judge.py apply --key KEY.toml --verdicts VERDICTS.toml
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from search_bench import (
    CORPUS,
    GUIDE,
    RELABEL,
    PlainBM25,
    question_key,
    questions_of,
    toml_string,
)

from fsdp_skill import atomic
from fsdp_skill.search import bundle_dir, index, search, sections, summary

TOP = 3
EXCERPT_CHARS = 450
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def load_relabel() -> dict[str, dict]:
    """``{question key: entry}`` of the re-judgements recorded so far."""
    if not RELABEL.exists():
        return {}
    entries = tomllib.loads(RELABEL.read_text(encoding="utf-8")).get("rejudged", [])
    return {e["key"]: e for e in entries}


def _excerpt(db, sid: str, bundle: Path) -> tuple[str, str]:
    """(title, what the section says) for a candidate id, ``guide:<id>`` included."""
    if sid.startswith(GUIDE):
        page = sid[len(GUIDE) :]
        found = index.section(db, page)
        heads = [s.title for s in sections.bundle_sections(bundle) if s.id.startswith(page + "#")]
        text = summary.section_summary(found["text"], "guide") if found else ""
        return (found or {}).get("title", page) + " (any section of the guide)", (
            text + " Sections: " + "; ".join(heads)
        )
    found = index.section(db, sid)
    if found is None:
        return sid, "(no such section)"
    kind = "pitfall" if sid.startswith("pitfall:") else "env" if sid.startswith("env:") else ""
    said = summary.section_summary(found["text"], kind)
    if kind != "pitfall":
        body = summary.plain(found["text"])
        said = said if len(said) >= EXCERPT_CHARS // 2 else body[:EXCERPT_CHARS]
    return found["title"], said[:EXCERPT_CHARS]


def pool(out: Path, key_file: Path, bundle: Path) -> None:
    found = sections.bundle_sections(bundle)
    baseline = PlainBM25(found)
    judged = load_relabel()
    db = index.connect(bundle)
    asked = questions_of(CORPUS)
    order = sorted(asked, key=lambda q: question_key(q.source, q.text))
    catalogue: dict[str, tuple[str, str]] = {}
    lines = []
    keys = []
    shown = 0
    for q in order:
        key = question_key(q.source, q.text)
        ours = [r["id"] for r in search(q.text, k=TOP, bundle=bundle)["results"]]
        plain = baseline.ids(q.text, TOP)
        seen = set(judged.get(key, {}).get("judged", {}))
        candidates = sorted({*q.answers, *ours, *plain} - seen)
        if not candidates:
            continue
        random.Random(key).shuffle(candidates)
        lines += [f"## {key}", "", f"Q: {q.text}", ""]
        for letter, sid in zip(LETTERS, candidates, strict=False):
            if sid not in catalogue:
                catalogue[sid] = _excerpt(db, sid, bundle)
            lines.append(f"- ({letter}) `{sid}` — {catalogue[sid][0]}")
        lines.append("")
        keys.append({"key": key, "candidates": candidates})
        shown += len(candidates)
    head = ["# Blind judging pool: which candidates answer the question?", "", "# Sections", ""]
    for sid in sorted(catalogue):
        title, said = catalogue[sid]
        head.append(f"- `{sid}` — {title}: {said}")
    lines = [*head, "", "# Questions", "", *lines]
    out.write_text("\n".join(lines), encoding="utf-8")
    key_file.write_text(
        "".join(
            f'[[q]]\nkey = "{k["key"]}"\ncandidates = {k["candidates"]!r}\n\n'.replace("'", '"')
            for k in keys
        ),
        encoding="utf-8",
    )
    print(f"{len(keys)} questions, {shown} candidates to judge -> {out}", file=sys.stderr)


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(toml_string(i) for i in items) + "]"


def apply(key_file: Path, verdict_file: Path) -> None:
    keys = {k["key"]: k["candidates"] for k in tomllib.loads(key_file.read_text())["q"]}
    verdicts = tomllib.loads(verdict_file.read_text(encoding="utf-8"))["verdict"]
    recorded = load_relabel()
    by_key = {question_key(q.source, q.text): q for q in questions_of(CORPUS)}
    for v in verdicts:
        key = v["key"]
        q = by_key[key]
        candidates = keys[key]
        if any(LETTERS.index(c) >= len(candidates) for c in v["answers"]):
            raise SystemExit(
                f"{key}: a verdict names a letter beyond its {len(candidates)} candidates"
            )
        yes = {candidates[LETTERS.index(c)] for c in v["answers"]}
        entry = recorded.get(key) or {
            "key": key,
            "q": q.text,
            "source": q.source,
            "old": sorted(q.answers),
            "judged": {},
            "reason": "",
        }
        for sid in candidates:
            entry["judged"][sid] = sid in yes
        entry["new"] = sorted(s for s, ok in entry["judged"].items() if ok)
        reason = v.get("reason", "").strip()
        if reason:
            entry["reason"] = f"{entry['reason']}; {reason}" if entry["reason"] else reason
        recorded[key] = entry
    write_relabel(recorded)


def write_relabel(recorded: dict[str, dict]) -> None:
    header = (
        "# Re-judged labels of search_corpus.toml (see benchmarks/search_judge.py): every\n"
        "# question of the corpus, tuned and hold-out alike. `old` is the label as first\n"
        "# written, `new` the candidates judged to answer, `judged` every candidate shown\n"
        "# (labelled, top 3 of the shipped search, top 3 of plain BM25; shuffled, unattributed)\n"
        "# with its verdict. search_bench.py reports figures with both labels.\n\n"
    )
    order = sorted(recorded.values(), key=lambda e: e["key"])
    parts = [header]
    for e in order:
        judged = ", ".join(
            f"{toml_string(s)} = {'true' if ok else 'false'}"
            for s, ok in sorted(e["judged"].items())
        )
        parts.append(
            "[[rejudged]]\n"
            f"key = {toml_string(e['key'])}\n"
            f"q = {toml_string(e['q'])}\n"
            f"source = {toml_string(e['source'])}\n"
            f"old = {_toml_list(e['old'])}\n"
            f"new = {_toml_list(e['new'])}\n"
            f"reason = {toml_string(e['reason'])}\n"
            f"judged = {{ {judged} }}\n\n"
        )
    atomic.write_text(RELABEL, "".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pool", help="write the blind judging pool")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--key", type=Path, required=True)
    p.add_argument("--bundle", type=Path)
    a = sub.add_parser("apply", help="record verdicts in search_relabel.toml")
    a.add_argument("--key", type=Path, required=True)
    a.add_argument("--verdicts", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "pool":
        pool(args.out, args.key, args.bundle or bundle_dir())
    else:
        apply(args.key, args.verdicts)


if __name__ == "__main__":
    main()
