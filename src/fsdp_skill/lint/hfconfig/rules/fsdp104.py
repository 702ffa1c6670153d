"""FSDP104: a value accelerate or the Trainer refuses (not one of the names, not a boolean,
not a number, a version that does not exist)."""

from __future__ import annotations

from collections.abc import Iterator

from fsdp_skill.lint.hfconfig import data
from fsdp_skill.lint.hfconfig.context import Context, as_text
from fsdp_skill.lint.hfconfig.rules import at, did_you_mean

CODE = "FSDP104"
PITFALL = "hf-config-invalid-value"
SEVERITY = "error"
SUMMARY = "FSDP setting with a value accelerate or the Trainer refuses when the job starts"


def fix(version: tuple[int, int]) -> str:
    return "use one of the values the message lists (names in upper case, booleans as true/false)"


def _is_bool(value: object) -> bool:
    return isinstance(value, bool) or as_text(value).strip().lower() in data.bool_words()


def _is_int(value: object) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, str) and value.strip().isdigit()
    )


def _named_ok(text: str, accepted: list[str], case_insensitive: bool) -> bool:
    if case_insensitive:
        return text.upper() in {a.upper() for a in accepted}
    return text in accepted


def _choices(accepted: list[str]) -> str:
    names = [a for a in accepted if not a.isdigit() and a.isupper()] or accepted
    return ", ".join(names)


def _check_value(ctx: Context, key: str, entry, row: dict, case_insensitive: bool):
    value = entry.value
    accepted = [a for a in row.get(f"accepted_v{ctx.version}", [])]
    honoured = (
        row.get(f"effect_v{ctx.version}", "honoured") == "honoured"
        if ctx.doc.is_accelerate
        else row["only"] in ("", f"fsdp{ctx.version}")
    )
    if not honoured or value is None:
        return None
    if accepted == ["false", "true"]:
        if not _is_bool(value):
            return f"`{entry.key}: {value}` is not a boolean: with FSDP{ctx.version} it takes true or false"
        return None
    if accepted:
        text = as_text(value).strip()
        if not _named_ok(text, accepted, case_insensitive):
            hint = did_you_mean(text.upper(), _choices(accepted).split(", "), 0.6)
            return (
                f"`{entry.key}: {value}` is refused with FSDP{ctx.version} (a KeyError or "
                f"ValueError when the plugin is built); the choices are {_choices(accepted)}{hint}"
            )
        return None
    kind = row.get("type") or row.get("doc_type") or ""
    if kind == "bool" and not _is_bool(value):
        return f"`{entry.key}: {value}` is not a boolean (true or false)"
    if kind == "int" and key not in ("fsdp_version", "version") and not _is_int(value):
        return f"`{entry.key}: {value}` is not a whole number (write 100000000, not 1e8)"
    return None


def _version(ctx: Context) -> Iterator[tuple[int, int, str]]:
    entry = ctx.version_entry
    if entry is None:
        return
    if ctx.doc.is_accelerate:
        allowed = data.accelerate_keys()["fsdp_version"]["choices"] or ["1", "2"]
    else:
        allowed = ["1", "2"]
    if as_text(entry.value).strip() not in allowed:
        yield at(
            entry,
            f"`{entry.key}: {entry.value}` is not an FSDP version: use {' or '.join(allowed)}",
            True,
        )


def _trainer_fsdp_words(ctx: Context) -> Iterator[tuple[int, int, str]]:
    entry = ctx.doc.top.get("fsdp")
    if entry is None or isinstance(entry.value, bool) or ctx.version not in (1, 2):
        return
    words = entry.value.split() if isinstance(entry.value, str) else entry.value
    if not isinstance(words, list):
        return
    allowed = data.trainer_fsdp_words(ctx.version)
    everything = set(data.trainer_fsdp_words(1)) | set(allowed)
    for word in words:
        if str(word) in allowed:
            continue
        if str(word) in everything:
            why = (
                f"is FSDP1-only and TrainingArguments raises a ValueError with {ctx.version_note()}"
            )
        else:
            why = "is not an `fsdp` option: TrainingArguments raises a ValueError" + did_you_mean(
                str(word), everything
            )
        yield at(entry, f"`fsdp: {entry.value}`: `{word}` {why}", True)


def check(ctx: Context) -> Iterator[tuple[int, int, str]]:
    yield from _version(ctx)
    if ctx.version not in (1, 2):
        return
    case_insensitive = data.case_insensitive_keys()
    for key, entry in ctx.doc.fsdp.items():
        row = ctx.row(key)
        if row is None or key in ("fsdp_version", "version"):
            continue
        message = _check_value(ctx, key, entry, row, key in case_insensitive)
        if message:
            yield at(entry, message, True)
    if ctx.doc.kind == "trainer-arguments":
        yield from _trainer_fsdp_words(ctx)
