"""Render a lint result: ruff-style text, or SARIF 2.1.0 for code-scanning tools."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning"}


def text(result: dict, show_fix: bool = True) -> list[str]:
    """``path:line:col: CODE message`` lines (each with its fix), errors, then a summary."""
    lines = []
    for f in result["findings"]:
        lines.append(f"{f['path']}:{f['line']}:{f['col']}: {f['code']} {f['message']}")
        if show_fix:
            lines.append(f"  fix: {f['fix']}  [{f['ref']}]")
    for e in result["errors"]:
        lines.append(f"{e['path']}: error: {e['message']}")
    found, files, errors = len(result["findings"]), result["files"], len(result["errors"])
    summary = f"{found} finding{'s' * (found != 1)} in {files} file{'s' * (files != 1)}"
    if errors:
        summary += f", {errors} unreadable"
    lines.append(summary)
    return lines


def statistics(result: dict) -> list[dict]:
    """``[{"code", "count", "summary"}]``: findings per code, most frequent first."""
    from fsdp_skill.lint.engine import find_rule

    counts: dict[str, int] = {}
    for f in result["findings"]:
        counts[f["code"]] = counts.get(f["code"], 0) + 1
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [{"code": c, "count": n, "summary": find_rule(c).summary} for c, n in ordered]


def statistics_text(stats: list[dict]) -> list[str]:
    """Ruff-style ``count  CODE  summary`` lines, then the total."""
    width = max((len(str(s["count"])) for s in stats), default=1)
    lines = [f"{s['count']:>{width}}  {s['code']}  {s['summary']}" for s in stats]
    total = sum(s["count"] for s in stats)
    lines.append(f"{total} finding{'s' * (total != 1)}")
    return lines


def _uri(path: str) -> str:
    """A relative or ``file:`` URI for a path (spaces and the like percent-encoded)."""
    p = Path(path)
    return p.as_uri() if p.is_absolute() else quote(p.as_posix())


def sarif(result: dict, version: str) -> dict:
    """The result as a SARIF 2.1.0 log with one run (rules carry their pitfall's docs)."""
    from fsdp_skill import knowledge
    from fsdp_skill.lint.hfconfig.rules import config_rules
    from fsdp_skill.lint.rules import all_rules

    rules = all_rules() + config_rules()
    index = {r.code: i for i, r in enumerate(rules)}
    descriptors = []
    for r in rules:
        pitfall = knowledge.pitfall(r.pitfall)
        descriptor = {
            "id": r.code,
            "name": r.pitfall,
            "shortDescription": {"text": r.summary},
            "defaultConfiguration": {"level": _LEVEL[r.severity]},
            "properties": {"tags": ["fsdp", "pytorch"]},
        }
        if pitfall is not None:
            descriptor["fullDescription"] = {"text": " ".join(pitfall.cause.split())}
            descriptor["help"] = {"text": " ".join(pitfall.fix.split())}
            if pitfall.links:
                descriptor["helpUri"] = pitfall.links[0]
        descriptors.append(descriptor)
    results = []
    for f in result["findings"]:
        results.append(
            {
                "ruleId": f["code"],
                "ruleIndex": index[f["code"]],
                "level": _LEVEL[f["severity"]],
                "message": {"text": f"{f['message']}. Fix: {f['fix']}"},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": _uri(f["path"])},
                            "region": {"startLine": f["line"], "startColumn": f["col"]},
                        }
                    }
                ],
            }
        )
    notifications = [
        {
            "level": "error",
            "message": {"text": e["message"]},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(e["path"])}}}],
        }
        for e in result["errors"]
    ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "fsdp-skill",
                        "version": version,
                        "informationUri": "https://docs.pytorch.org/docs/stable/distributed.fsdp.fully_shard.html",
                        "rules": descriptors,
                    }
                },
                "invocations": [
                    {
                        "executionSuccessful": result["files"] > 0 or not result["errors"],
                        "toolExecutionNotifications": notifications,
                    }
                ],
                "results": results,
            }
        ],
    }
