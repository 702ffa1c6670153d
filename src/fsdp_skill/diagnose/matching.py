"""``explain``: find every known error in a text and say what it means and what to do.

The knowledge's pitfalls carry the error signatures (regular expressions); this module only
matches them, against the normalised text (see ``normalize``), case-insensitively. A signature
is tried only when its longest literal occurs in the text, so a big log costs one substring
search per signature. Errors rank by how telling they are: a specific cause above the generic
family it is reported through (``generic`` pitfalls: NCCL's error codes, timeouts), and those
above the aftermath of another failure (``consequence`` pitfalls: a launcher's summary, a peer
that hung up); then by where they first appear.
"""

from __future__ import annotations

import re
from functools import lru_cache

from fsdp_skill import knowledge
from fsdp_skill.diagnose import catalog, details
from fsdp_skill.diagnose.normalize import Normalized, normalize
from fsdp_skill.diagnose.signatures import (
    CONSEQUENCE_TAG,
    FLAGS,
    GENERIC_TAG,
    Hit,
    Named,
    Signature,
    anchored,
    confidence,
    ranked,
    required_literal,
    scan,
)
from fsdp_skill.errors import UsageError

__all__ = ["CONSEQUENCE_TAG", "GENERIC_TAG", "explain", "required_literal", "signature_matches"]

MATCHED_CHARS = 300
"""How much of a matched line is shown."""

PITFALLS_REF = "references/pitfalls.md#{id}"
SHOW = "pitfall:{id}"


def signature_matches(signature: str, text: str) -> bool:
    """Whether ``signature`` finds ``text`` as ``explain`` matches it (normalised, any case)."""
    norm = normalize(text)
    view = norm.by_line if anchored(signature) else norm.joined
    return re.compile(signature, FLAGS).search(view) is not None


@lru_cache(maxsize=1)
def _signatures() -> tuple[tuple[Named, tuple[Signature, ...]], ...]:
    """Each pitfall with signatures, by id and tags (the rest is read when it matched)."""
    return tuple((Named(pid, tags), sigs) for pid, tags, sigs in catalog.table())


def _hits(norm: Normalized) -> list[Hit]:
    return scan(norm, _signatures())


def _shown(line: str) -> str:
    line = line.strip()
    return line if len(line) <= MATCHED_CHARS else line[: MATCHED_CHARS - 1] + "…"


def _version_note(spec: str, installed: str | None) -> str:
    """A warning when the installed torch is outside the torch range the pitfall is for."""
    if not installed or knowledge.torch_spec_allows(spec, installed):
        return ""
    return (
        f"this cause is for torch {spec}, and the installed torch is {installed}: if the text "
        "comes from this environment, the cause is probably another one"
    )


def explain(text: str) -> dict:
    """Every pitfall whose signature occurs in ``text``, most telling first.

    With no known error, ``related`` holds the reference sections closest to the text's
    exception line (``searched``). A log with several ranks' collectives also gets ``hang``:
    where the ranks diverged, as ``fsdp-skill hang`` says it.
    """
    if not text or not text.strip():
        raise UsageError("empty input: give an error message, --file LOG, or pipe a log into stdin")
    norm = normalize(text)
    hits = _hits(norm)
    later = {h.pitfall.id: details.aftermath(h.pitfall.id, norm) for h in hits}
    for h in hits:
        h.aftermath = bool(later[h.pitfall.id])
    hits = ranked(hits)
    installed = knowledge.installed_torch_version() if hits else None
    matches = []
    for h in hits:
        p = knowledge.pitfall_alone(h.pitfall.id)
        if p is None:  # the cached table names a pitfall whose file is gone
            continue
        match = {
            "id": p.id,
            "title": p.title,
            "category": p.category,
            "severity": p.severity,
            "symptom": p.symptom.strip(),
            "cause": p.cause.strip(),
            "fix": p.fix.strip(),
            "refs": [*p.links, PITFALLS_REF.format(id=p.id)],
            "show": SHOW.format(id=p.id),
            "confidence": confidence(h),
            "matched": _shown(norm.lines[h.line]),
            "line": h.line + 1,
            "occurrences": h.count,
            "ranks": sorted(h.ranks),
        }
        detail = later[p.id] or details.detail(p.id, norm)
        if detail:
            match["detail"] = detail
        note = _version_note(p.torch, installed)
        if note:
            match["version_note"] = note
        matches.append(match)
    result: dict = {"matches": matches, "related": [], "searched": None, "hang": None}
    if not matches:
        from fsdp_skill.diagnose.fallback import related

        result["related"], result["searched"] = related(text)
    from fsdp_skill.diagnose.divergence import analyse_text

    result["hang"] = analyse_text(text)
    return result
