"""``lint --explain FSDPnnn``: a rule's pitfall as readable text (what, why, bad, good, links)."""

from __future__ import annotations

from fsdp_skill.errors import UsageError


def explain_rule(code: str, torch_version: str | None = None) -> dict:
    """``{"code", "pitfall", "title", "severity", "summary", "fix", "links", "text"}``."""
    from fsdp_skill import knowledge
    from fsdp_skill.lint import engine

    found = engine.find_rule(code.strip().upper())
    if found is None:
        raise UsageError(f"unknown rule code {code!r} ({engine.code_ranges()})")
    version = engine.resolve_version(torch_version)
    pitfall = knowledge.pitfall(found.pitfall)
    if pitfall is None:
        raise UsageError(f"{found.code}: its pitfall {found.pitfall!r} is missing")
    hint = found.fix(version)
    text = "\n".join(
        [
            f"{found.code} {pitfall.title}  ({pitfall.severity}, {pitfall.category}; "
            f"torch {pitfall.torch})",
            "",
            "What you see:",
            _indent(pitfall.symptom),
            "",
            "Why:",
            _indent(pitfall.cause),
            "",
            "Fix:",
            _indent(pitfall.fix),
            f"  For torch {version[0]}.{version[1]}: {hint}"
            if found.code.startswith("FSDP0")
            else f"  In short: {hint}",
            "",
            f"Bad{_language(pitfall)}:",
            _indent(pitfall.bad, "    "),
            "",
            f"Good{_language(pitfall)}:",
            _indent(pitfall.good, "    "),
            "",
            "Docs: " + ", ".join(pitfall.links),
        ]
    )
    return {
        "code": found.code,
        "pitfall": pitfall.id,
        "title": pitfall.title,
        "severity": pitfall.severity,
        "summary": found.summary,
        "fix": hint,
        "links": list(pitfall.links),
        "text": text,
    }


def _language(pitfall) -> str:
    """`` (YAML)`` for a pitfall whose code is a config file, else nothing."""
    return "" if pitfall.code_lang == "python" else f" ({pitfall.code_lang.upper()})"


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line if line else "" for line in text.strip("\n").splitlines())
