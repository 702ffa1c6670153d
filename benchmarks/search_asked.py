"""Write ``knowledge/asked.toml``: the tuned part of the question corpus, for search to learn from.

Takes every question of ``search_corpus.toml`` outside the hold-out that some section answers,
with its labels as re-judged (``search_relabel.toml``), and writes them with their sources.
The hold-out is never written: its figures stay an estimate for questions search has not
seen. Run it after changing the corpus or its labels; a test fails while the file is stale.

    python benchmarks/search_asked.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from search_bench import CORPUS, is_holdout, questions_of, rejudged, toml_string  # noqa: E402

from fsdp_skill import atomic  # noqa: E402
from fsdp_skill.search.asked import ASKED_FILE  # noqa: E402

HEADER = """\
# Questions people asked in public (GitHub issues and forums) and the sections that answer
# them: search lifts the answers of earlier questions that read like a new one.
# Written by benchmarks/search_asked.py from the tuned part of benchmarks/search_corpus.toml
# (labels as re-judged); the hold-out part is never here. Do not edit by hand.
"""


def render() -> str:
    """The file's text, from the corpus and its re-judged labels."""
    parts = [HEADER]
    for question in rejudged(questions_of(CORPUS)):
        if is_holdout(question.source) or not question.answers:
            continue
        ids = ", ".join(toml_string(a) for a in sorted(question.answers))
        parts.append(
            f"\n[[asked]]\nq = {toml_string(question.text)}\n"
            f"source = {toml_string(question.source)}\nids = [{ids}]\n"
        )
    return "".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args()
    text = render()
    current = ASKED_FILE.read_text(encoding="utf-8") if ASKED_FILE.exists() else ""
    if args.check:
        if text != current:
            print(f"{ASKED_FILE.name} is stale: run benchmarks/search_asked.py", file=sys.stderr)
            return 1
        return 0
    atomic.write_text(ASKED_FILE, text)
    print(f"wrote {ASKED_FILE} ({text.count('[[asked]]')} questions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
