"""FSDP107: a setting that the chosen auto-wrap policy ignores (class names without
TRANSFORMER_BASED_WRAP, min_num_params without SIZE_BASED_WRAP)."""

from __future__ import annotations

from collections.abc import Iterator

from fsdp_skill.lint.hfconfig.context import Context
from fsdp_skill.lint.hfconfig.rules import at
from fsdp_skill.lint.hfconfig.rules._needs import unmet

CODE = "FSDP107"
PITFALL = "hf-config-key-ignored-by-wrap-policy"
SEVERITY = "warning"
SUMMARY = "wrap setting that the auto-wrap policy in use ignores (the model may be one unit)"


def fix(version: tuple[int, int]) -> str:
    return (
        "set fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP with class names, or SIZE_BASED_WRAP "
        "with fsdp_min_num_params"
    )


def check(ctx: Context) -> Iterator[tuple[int, int, str]]:
    for key, other, wanted, have in unmet(ctx, "ignored"):
        entry = ctx.doc.fsdp[key]
        written = other in ctx.doc.fsdp
        source = f"`{other}: {have}`" if written else f"no `{other}`, so {have}"
        consequence = (
            " — the whole model becomes one FSDP unit, gathered at once"
            if have == "NO_WRAP"
            else ""
        )
        yield at(
            entry,
            f"`{entry.key}` is ignored: it takes effect only with {other} {wanted}, and this file "
            f"has {source}{consequence}",
        )
