"""FSDP103: an FSDP key that the configured FSDP version ignores or rejects."""

from __future__ import annotations

from collections.abc import Iterator

from fsdp_skill.lint.hfconfig import data
from fsdp_skill.lint.hfconfig.context import Context, as_text, truthy
from fsdp_skill.lint.hfconfig.rules import at

CODE = "FSDP103"
PITFALL = "hf-config-key-wrong-fsdp-version"
SEVERITY = "warning"
SUMMARY = "FSDP key that the configured fsdp_version ignores or rejects (FSDP1 key with FSDP2)"


def fix(version: tuple[int, int]) -> str:
    return (
        "delete the key, or use what this FSDP version reads instead (FSDP2: "
        "fsdp_reshard_after_forward true/false instead of fsdp_sharding_strategy; FSDP1: "
        "fsdp_sharding_strategy)"
    )


_INSTEAD = {
    "fsdp_sharding_strategy": "fsdp_reshard_after_forward (true = FULL_SHARD, false = SHARD_GRAD_OP)",
    "fsdp_reshard_after_forward": "fsdp_sharding_strategy",
    "fsdp_use_orig_params": "nothing: FSDP2 always keeps the original parameters",
    "fsdp_sync_module_states": "nothing: FSDP2 loads and broadcasts with fsdp_cpu_ram_efficient_loading",
    "fsdp_backward_prefetch": "nothing: FSDP2 prefetches the next unit in backward by itself",
    "fsdp_forward_prefetch": "FSDP2's explicit prefetching (set_modules_to_forward_prefetch) in the script",
}


def _checked_by_launcher() -> set[str]:
    """Keys the launcher checks whatever the version (another key needs them): FSDP108."""
    return {
        row["needs"].split("=", 1)[0]
        for row in data.accelerate_keys().values()
        if row["without_needs"] == "rejected"
    }


def _same_as_what_counts(ctx: Context, key: str, value: object) -> bool:
    """True when another key that the version honours sets the same torch argument to this
    value (FSDP1's ``fsdp_reshard_after_forward: FULL_SHARD`` with the sharding strategy
    FULL_SHARD, as `accelerate config` writes it): ignored, but harmless."""
    from fsdp_skill.lint.hfconfig.rules._needs import effective

    fields = data.plugin_fields()
    column = f"fsdp{ctx.version}"
    target = fields[ctx.row(key)["field"]][column]
    for other_key, other in data.accelerate_keys().items():
        if other_key == key or not other["field"] or other[f"effect_v{ctx.version}"] != "honoured":
            continue
        if fields[other["field"]][column] == target:
            return as_text(value).upper() == effective(ctx, other_key)
    return False


def _accelerate(ctx: Context) -> Iterator[tuple[int, int, str]]:
    launcher_checked = _checked_by_launcher()
    for key, entry in ctx.doc.fsdp.items():
        row = ctx.row(key)
        if row is None or key == "fsdp_version" or key in launcher_checked:
            continue
        effect = row.get(f"effect_v{ctx.version}", "")
        if effect == "ignored" and not _same_as_what_counts(ctx, key, entry.value):
            instead = _INSTEAD.get(key)
            yield at(
                entry,
                f"`{entry.key}` does nothing with {ctx.version_note()}: accelerate "
                f"{data.versions()['accelerate']} never reads it for FSDP{ctx.version}"
                + (f"; use {instead}" if instead else ""),
            )
        elif effect == "rejected" and truthy(entry.value):
            other = 2 if ctx.version == 1 else 1
            yield at(
                entry,
                f"`{entry.key}` needs FSDP{other}: with {ctx.version_note()} accelerate stops "
                "with a ValueError when it builds the plugin",
            )


def _trainer(ctx: Context) -> Iterator[tuple[int, int, str]]:
    for key, entry in ctx.doc.fsdp.items():
        row = ctx.row(key)
        if row is None or not row["only"] or row["only"] == f"fsdp{ctx.version}":
            continue
        yield at(
            entry,
            f"`{entry.key}` applies to {row['only'].upper()} only and TrainingArguments "
            f"(transformers {data.versions()['transformers']}) skips it with "
            f"{ctx.version_note()}",
        )


def check(ctx: Context) -> Iterator[tuple[int, int, str]]:
    if ctx.version not in (1, 2):
        return
    yield from _accelerate(ctx) if ctx.doc.is_accelerate else _trainer(ctx)
