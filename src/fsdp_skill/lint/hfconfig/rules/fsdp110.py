"""FSDP110: a sharded state dict with a script whose ``trainer.save_model`` then writes no
model (transformers writes the final model under FSDP only for a full state dict)."""

from __future__ import annotations

from collections.abc import Iterator

from fsdp_skill.lint.hfconfig import data
from fsdp_skill.lint.hfconfig.context import Context, as_text
from fsdp_skill.lint.hfconfig.rules import at

CODE = "FSDP110"
PITFALL = "trainer-save-model-sharded-state-dict"
SEVERITY = "error"
SUMMARY = "SHARDED_STATE_DICT while the launched script's trainer.save_model writes only full ones"


def fix(version: tuple[int, int]) -> str:
    return (
        'call trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT") '
        "before trainer.save_model, or set fsdp_state_dict_type: FULL_STATE_DICT"
    )


def _state_dict_type(ctx: Context) -> tuple[str, bool]:
    """The state-dict type the plugin gets, and whether the file writes it."""
    value = ctx.value_of("fsdp_state_dict_type")
    if value is not None:
        return as_text(value).upper(), True
    return data.plugin_default("state_dict_type", ctx.version).upper(), False


def check(ctx: Context) -> Iterator[tuple[int, int, str]]:
    if not ctx.doc.is_accelerate or not ctx.launches:
        return
    from fsdp_skill.lint.hfconfig.launches import script_saves

    state_dict_type, written = _state_dict_type(ctx)
    if state_dict_type in data.trainer_save_model_writes():
        return
    entry = ctx.doc.fsdp.get("fsdp_state_dict_type") or ctx.doc.anchor()
    if entry is None:
        return
    for launch in ctx.launches:
        saves = script_saves(launch.script)
        if saves is None or not saves.trainer_save_lines or saves.forces_full_state_dict:
            continue
        how = "" if written else f" (no fsdp_state_dict_type: FSDP{ctx.version} defaults to it)"
        yield at(
            entry,
            f"{state_dict_type}{how}, and {launch.script.name} (launched by {launch.where}) calls "
            f"trainer.save_model at line {saves.trainer_save_lines[0]}: transformers "
            f"{data.versions()['transformers']} writes the final model under FSDP only for "
            f"{' or '.join(data.trainer_save_model_writes())}, so nothing is saved",
        )
        return
