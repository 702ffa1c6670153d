"""The class names a config asks to wrap, split the way the tool that reads it splits them."""

from __future__ import annotations

from fsdp_skill.lint.hfconfig.context import Context


def wrap_key(ctx: Context) -> str:
    return (
        "fsdp_transformer_layer_cls_to_wrap"
        if ctx.doc.is_accelerate
        else "transformer_layer_cls_to_wrap"
    )


def wrap_names(ctx: Context) -> list[str] | None:
    """The names as accelerate will look them up (None: the key is absent or empty).

    An accelerate file's value reaches the plugin as ``str(value)`` split on commas; the
    Trainer takes a list (or one string) and joins it with commas, which the plugin splits
    again. Names keep any spaces around them: accelerate does not strip them.
    """
    value = ctx.value_of(wrap_key(ctx))
    if value is None or value == "" or value == []:
        return None
    if ctx.doc.is_accelerate:
        return str(value).split(",")
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        return [str(items)]
    return ",".join(str(i) for i in items).split(",")
