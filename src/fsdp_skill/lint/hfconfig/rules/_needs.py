"""Keys that matter only with another key's value (mined: ``needs`` / ``without_needs``)."""

from __future__ import annotations

from collections.abc import Iterator

from fsdp_skill.lint.hfconfig import data
from fsdp_skill.lint.hfconfig.context import Context, as_text, truthy


def effective(ctx: Context, key: str) -> str:
    """The value a key has for the tool, written or defaulted (upper case, booleans lower)."""
    if key in ("fsdp_auto_wrap_policy", "auto_wrap_policy"):
        return ctx.wrap_policy()
    value = ctx.value_of(key)
    if value is None:
        row = ctx.row(key) or {}
        value = row.get("launch_default", row.get("default", ""))
    if isinstance(value, bool) or as_text(value).lower() in data.bool_words():
        return "true" if truthy(value) else "false"
    return as_text(value).upper()


def unmet(ctx: Context, otherwise: str) -> Iterator[tuple[str, str, str, str]]:
    """``(key, other key, value it needs, value it has)`` for each key in effect whose needed
    key does not have the value, where going without it is ``otherwise`` (ignored/rejected)."""
    for key, row in (
        data.accelerate_keys() if ctx.doc.is_accelerate else data.trainer_keys()
    ).items():
        if not row.get("needs") or row.get("without_needs") != otherwise:
            continue
        other, wanted = row["needs"].split("=", 1)
        if otherwise == "ignored" and key not in ctx.doc.fsdp:
            continue  # a default nobody asked for is not a mistake
        if otherwise == "rejected" and effective(ctx, key) in ("false", "", "NONE", "0"):
            continue
        have = effective(ctx, other)
        if have != (wanted.lower() if wanted.lower() in ("true", "false") else wanted.upper()):
            yield key, other, wanted, have
