"""Plain-text reports of ``explain`` and ``hang`` results, and reading ``explain``'s input."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from fsdp_skill.diagnose.tail import Tail, read_tail
from fsdp_skill.errors import UsageError


def read_explain_input(text: str | None, file: str | None) -> str:
    """The text to explain: an argument, a file, or stdin (``-`` or nothing on a pipe)."""
    return read_explain_tail(text, file).text


def read_explain_tail(text: str | None, file: str | None) -> Tail:
    """The text to explain and what was cut from it: an argument, or the last
    ``tail.MAX_BYTES`` of a file or of stdin (``-`` or nothing on a pipe), read to its end."""
    if file and text and text != "-":
        raise UsageError("give either TEXT or --file, not both")
    if file:
        try:
            with Path(file).open("rb") as fh:
                return read_tail(fh)
        except OSError as exc:
            raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
    if text and text != "-":
        return Tail(text, len(text.encode()), 0, 0)
    if sys.stdin is None or (sys.stdin.isatty() and text != "-"):
        raise UsageError("give an error message, --file LOG, or pipe a log into stdin")
    return read_tail(sys.stdin.buffer)


def _wrap(label: str, text: str) -> list[str]:
    return textwrap.wrap(
        " ".join(text.split()), width=96, initial_indent=f"  {label}", subsequent_indent="    "
    )


def explain_text(result: dict) -> list[str]:
    """The plain-text report of ``explain``: known errors, or the possibly related sections."""
    matches = result["matches"]
    lines: list[str] = []
    if matches:
        lines += [f"{len(matches)} known error(s) found, most telling first:", ""]
    for n, m in enumerate(matches, 1):
        plural = "s" if len(m["ranks"]) > 1 else ""
        ranks = f" on rank{plural} {_ranks(m['ranks'])}" if m["ranks"] else ""
        lines.append(f"{n}. {m['title']}  [{m['id']}, confidence {m['confidence']}]")
        lines.append(f"  matched (line {m['line']}{ranks}): {m['matched']}")
        if m.get("version_note"):
            lines += _wrap("note: ", m["version_note"])
        if m.get("detail"):
            lines += _wrap("detail: ", m["detail"])
        lines += _wrap("cause: ", m["cause"])
        lines += _wrap("fix: ", m["fix"])
        docs = [ref for ref in m["refs"] if ref.startswith("http")]
        if docs:
            lines.append(f"  docs: {' '.join(docs)}")
        lines.append(f"  more: fsdp-skill show {m['show']}")
        lines.append("")
    if not matches:
        lines.append("no known error found in the input.")
        if result.get("related"):
            lines.append(f"possibly related sections (searched for: {result['searched']}):")
            for r in result["related"]:
                lines.append(f"  fsdp-skill show {r['id']}  - {r['title']}")
        else:
            lines.append(
                "Try `fsdp-skill search` with the error's key words, or `fsdp-skill hang` for "
                "the logs of every rank of a stuck job."
            )
        lines.append("")
    hang = result.get("hang")
    if hang:
        culprits = _ranks(hang["culprit_ranks"]) if hang["culprit_ranks"] else "none"
        lines.append(
            f"ranks' collectives ({hang['ranks']} ranks): {hang['verdict']} - {hang['summary']}"
        )
        lines.append(
            f"  culprit ranks: {culprits}  (fsdp-skill hang on the log gives the full report)"
        )
    while lines and not lines[-1]:
        lines.pop()
    return lines


def hang_text(result: dict) -> list[str]:
    lines = [
        f"ranks analysed: {result['ranks']}",
        f"verdict: {result['verdict']} - {result['summary']}",
    ]
    d = result["first_divergence"]
    if d:
        where = f"process group {d['process_group']}" + (
            f", collective #{d['seq']}" if d["seq"] is not None else ""
        )
        lines.append(f"first divergence: {where}")
        if "last_completed" in d:
            lines.append(
                f"  last completed: #{d['last_completed']}"
                + (f", last enqueued: #{d['last_enqueued']}" if "last_enqueued" in d else "")
            )
        for side in [d["majority"], *d["others"]]:
            plural = "s" if len(side["ranks"]) > 1 else ""
            lines.append(f"  rank{plural} {_ranks(side['ranks'])}: {side['state']}")
            for rank, failure in side.get("failures", {}).items():
                lines.append(f"    rank {rank}: {failure}")
    culprits = result["culprit_ranks"]
    lines.append(f"culprit ranks: {_ranks(culprits) if culprits else 'none'}")
    lines.append("")
    lines += [line for a in result["advice"] for line in _wrap("- ", a)]
    if result["pitfalls"]:
        lines.append(f"  pitfalls: {', '.join(result['pitfalls'])} (fsdp-skill show <id>)")
    if result["next_run_env"]:
        lines.append("")
        lines.append("for the next run, set:")
        for env in result["next_run_env"]:
            lines.append(f"  {env['name']}={env['value']}  # {env['why']}")
    lines.append("")
    lines.append("inputs:")
    for item in result["inputs"]:
        ranks = _ranks(item["ranks"]) if item["ranks"] else "-"
        lines.append(f"  {item['path']}: {item['kind']}, ranks {ranks}")
    for warning in result["warnings"]:
        lines.append(f"warning: {warning}")
    return lines


def _ranks(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2, 5``."""
    if not ranks:
        return "-"
    out, start, prev = [], ranks[0], ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ", ".join(out)
