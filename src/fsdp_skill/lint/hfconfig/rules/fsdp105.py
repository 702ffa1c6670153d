"""FSDP105: the transformer layer class to wrap is not a class of the model."""

from __future__ import annotations

from collections.abc import Iterator

from fsdp_skill.lint.hfconfig.context import Context
from fsdp_skill.lint.hfconfig.rules import at, did_you_mean
from fsdp_skill.lint.hfconfig.rules._wrap import wrap_key, wrap_names

CODE = "FSDP105"
PITFALL = "hf-wrap-class-not-found"
SEVERITY = "error"
SUMMARY = "transformer layer class to wrap that the model does not have"


def fix(version: tuple[int, int]) -> str:
    return (
        "name the model's decoder-layer class (its _no_split_modules), or leave the key out "
        "and let accelerate use _no_split_modules"
    )


def check(ctx: Context) -> Iterator[tuple[int, int, str]]:
    names = wrap_names(ctx)
    if ctx.model is None or not names or ctx.wrap_policy() != "TRANSFORMER_BASED_WRAP":
        return
    entry = ctx.doc.fsdp[wrap_key(ctx)]
    for name in names:
        if not name.isidentifier() or name in ctx.model.classes:
            continue  # FSDP106 reports names that can match no class at all
        suggestion = ", ".join(ctx.model.no_split) or "its decoder-layer class"
        hint = did_you_mean(name, ctx.model.no_split, 0.6)
        yield at(
            entry,
            f"`{name}` is not a module class of the model {ctx.model.label}: accelerate stops "
            f'with "Could not find the transformer layer class {name} in the model"{hint}; '
            f"its _no_split_modules: {suggestion}",
            True,
        )
