"""FSDP101: an fsdp_config key that accelerate or the Trainer does not read."""

from __future__ import annotations

from collections.abc import Iterator

from fsdp_skill.lint.hfconfig import data
from fsdp_skill.lint.hfconfig.context import Context
from fsdp_skill.lint.hfconfig.rules import at, did_you_mean

CODE = "FSDP101"
PITFALL = "hf-config-unknown-key"
SEVERITY = "warning"
SUMMARY = "fsdp_config key that accelerate or the Trainer does not read (misspelt or removed)"


def fix(version: tuple[int, int]) -> str:
    return "spell the key as the installed accelerate/transformers name it, or delete it"


def _trainer_equivalent(key: str) -> str:
    """The Trainer key for an accelerate-style name (``offload_params`` -> ``cpu_offload``)."""
    row = data.accelerate_keys().get("fsdp_" + key)
    if row is None or not row["field"]:
        return ""
    for trainer_key, trainer_row in data.trainer_keys().items():
        if trainer_row["field"] == row["field"]:
            return f" (the Trainer's name for it is `{trainer_key}`)"
    return ""


def check(ctx: Context) -> Iterator[tuple[int, int, str]]:
    doc = ctx.doc
    if doc.is_accelerate:
        known = data.accelerate_keys()
        reader = f"`accelerate launch` (accelerate {data.versions()['accelerate']}) accepts it"
    else:
        known = data.trainer_keys()
        reader = f"TrainingArguments (transformers {data.versions()['transformers']}) skips it"
    for key, entry in doc.fsdp.items():
        if key in known:
            continue
        hint = did_you_mean(key, known) or ("" if doc.is_accelerate else _trainer_equivalent(key))
        yield at(
            entry,
            f"`{entry.key}` is not an FSDP setting: {reader} without a word and nothing reads "
            f"it{hint}",
        )
