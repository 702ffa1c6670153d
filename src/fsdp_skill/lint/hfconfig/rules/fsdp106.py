"""FSDP106: a wrap-class list that can match no class (a YAML list, spaces, a dotted path)."""

from __future__ import annotations

from collections.abc import Iterator

from fsdp_skill.lint.hfconfig.context import Context
from fsdp_skill.lint.hfconfig.rules import at
from fsdp_skill.lint.hfconfig.rules._wrap import wrap_key, wrap_names

CODE = "FSDP106"
PITFALL = "hf-wrap-class-list-malformed"
SEVERITY = "error"
SUMMARY = "transformer layer class list written so that no name can match a class"


def fix(version: tuple[int, int]) -> str:
    return (
        "write the class names as accelerate compares them: `type(module).__name__`, "
        "comma-separated with no spaces in an accelerate file (LlamaDecoderLayer,LlamaMLP)"
    )


def check(ctx: Context) -> Iterator[tuple[int, int, str]]:
    names = wrap_names(ctx)
    if not names:
        return
    entry = ctx.doc.fsdp[wrap_key(ctx)]
    if ctx.doc.is_accelerate and isinstance(entry.value, list):
        shown = str(entry.value)
        yield at(
            entry,
            f"`{entry.key}` is a YAML list: accelerate passes it on as the text {shown!r} and "
            f"looks for classes named {names[0]!r}... — none exists; write one "
            f"comma-separated string: {','.join(str(v) for v in entry.value)}",
            True,
        )
        return
    for name in names:
        if name.isidentifier():
            continue
        if name.strip().isidentifier():
            why = "has spaces around it, which accelerate keeps, so no class name matches"
        elif "." in name.strip() and name.strip().rsplit(".", 1)[-1].isidentifier():
            why = (
                "is a dotted path; accelerate compares bare class names "
                f"(write {name.strip().rsplit('.', 1)[-1]})"
            )
        else:
            why = "is not a Python class name"
        yield at(entry, f"wrap class {name!r} {why}", True)
