"""The recommendation: the strategy to use, why (with its trade-off in one sentence), the
host memory offload needs, the pitfalls its code touches and why they do not apply, and what
else would fit when nothing does without offload or the margin is thin."""

from __future__ import annotations

from typing import Any

from fsdp_skill.knowledge import Pitfall
from fsdp_skill.plan import alternatives, cautions, evaluate, snippet
from fsdp_skill.plan.setup import Setup
from fsdp_skill.plan.strategies import Strategy
from fsdp_skill.plan.units import format_bytes, format_seconds


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "0%"


def _usable(setup: Setup) -> str:
    return (
        f"{format_bytes(setup.usable_gpu_memory)} usable per GPU "
        f"({format_bytes(setup.gpu_memory)} less {setup.headroom:.0%} headroom)"
    )


def _cost(row: dict[str, Any]) -> str:
    """What a strategy spends beyond its compute to fit."""
    step = row["step"]
    parts = []
    if row["activation_checkpointing"]:
        parts.append(f"{format_seconds(step['recompute_seconds'])} of recomputation")
    if row["cpu_offload"]:
        parts.append(f"{format_seconds(step['optimizer_seconds'])} of CPU optimizer step")
    if step["comm_exposed_seconds"] >= 0.01 * row["step_seconds"]:
        parts.append(f"{format_seconds(step['comm_exposed_seconds'])} of exposed communication")
    if len(parts) < 2:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _why_not(row: dict[str, Any], setup: Setup) -> str:
    total = row["per_gpu_bytes"]["total"]
    if total > setup.usable_gpu_memory:
        return f"needs {format_bytes(total)} per GPU"
    if total > evaluate.margin_limit(setup):
        free = setup.usable_gpu_memory - total
        return (
            f"would leave only {format_bytes(free)} ({_pct(free, setup.usable_gpu_memory)}) "
            f"free, under the {evaluate.MARGIN:.0%} margin an activation estimate needs"
        )
    return (
        f"needs {format_bytes(row['cpu_bytes'])} of host memory per node, more than the "
        f"{format_bytes(setup.cpu_memory or 0)} there"
    )


def _tradeoff(chosen: dict[str, Any], rows: list[dict[str, Any]], setup: Setup) -> str:
    """One sentence: what the chosen strategy pays, and the faster one it beat on memory."""
    faster = [
        r
        for r in rows
        if not r["fits_with_margin"]
        and r["step_seconds"] < chosen["step_seconds"] / (1 + evaluate.TIE)
    ]
    cost = _cost(chosen)
    pays = f"it spends {cost} per step" if cost else "it hides its communication behind compute"
    if not faster:
        return f"Trade-off: {pays}, and no strategy compared is faster."
    fastest = min(r["step_seconds"] for r in faster)
    near = [r for r in faster if r["step_seconds"] <= fastest * (1 + evaluate.TIE)]
    best = min(near, key=lambda r: r["per_gpu_bytes"]["total"])
    return (
        f"Trade-off: {pays}; the faster {best['name']} "
        f"(est. {format_seconds(best['step_seconds'])}/step) {_why_not(best, setup)}."
    )


def host_memory(chosen: dict[str, Any], setup: Setup) -> dict | None:
    """What offload needs per node, whether that was checked, and against what."""
    if not chosen["cpu_offload"]:
        return None
    return {
        "needed_per_node": chosen["cpu_bytes"],
        "available_per_node": setup.cpu_memory,
        "source": setup.cpu_memory_source,
        "checked": setup.cpu_memory is not None,
    }


def _host_sentence(chosen: dict[str, Any], rows: list[dict], setup: Setup) -> str:
    need = format_bytes(chosen["cpu_bytes"])
    if setup.cpu_memory is not None:
        where = "given" if setup.cpu_memory_source == "given" else "on this machine"
        return (
            f"It needs {need} of host memory per node ({format_bytes(setup.cpu_memory)} {where})."
        )
    leaner = [
        r
        for r in rows
        if r["cpu_offload"] and r["fits_with_margin"] and r["cpu_bytes"] < chosen["cpu_bytes"]
    ]
    text = (
        f"It needs {need} of pinned host memory per node, which was not checked: pass "
        "--cpu-memory (per node)"
    )
    if leaner:
        other = min(leaner, key=lambda r: r["step_seconds"])
        text += (
            f"; with less, {other['name']} needs {format_bytes(other['cpu_bytes'])} "
            f"(est. {format_seconds(other['step_seconds'])}/step)"
        )
    return text + "."


def _pitfall_reason(pitfall: Pitfall, chosen: dict, rows: list[dict], setup: Setup) -> str:
    """Why the chosen code may do what ``pitfall`` warns against."""
    if pitfall.id == "reshard-after-forward-false-everywhere":
        spec = setup.spec
        gathered = setup.compute_bytes * spec.layer_params * spec.num_layers
        twin = next(
            (r for r in rows if r["name"] == chosen["name"].replace("no-reshard", "full-shard")),
            None,
        )
        saved = (
            f", and it saves {format_seconds(twin['step_seconds'] - chosen['step_seconds'])} "
            f"per step over {twin['name']} (one all-gather per layer fewer)"
            if twin
            else ""
        )
        return (
            f"Pitfall {pitfall.id} warns that this keeps every layer gathered: those "
            f"{format_bytes(gathered)} are counted in the total above, which still leaves "
            f"{format_bytes(chosen['free_bytes'])} free{saved}."
        )
    if pitfall.id == "cpu-offload-pinned-host-memory":
        checked = (
            "that fits the host memory"
            if setup.cpu_memory is not None
            else "check the nodes have it"
        )
        return (
            f"Pitfall {pitfall.id}: CPUOffloadPolicy() pins {format_bytes(chosen['cpu_bytes'])} "
            f"per node ({checked}); CPUOffloadPolicy(pin_memory=False) keeps it pageable, "
            "with slower copies."
        )
    return (
        f"The code does what pitfall {pitfall.id} warns against ({pitfall.title}); "
        "check whether it applies here."
    )


def _thin(chosen: dict | None, rows: list[dict], setup: Setup) -> bool:
    """Whether the margin is thin: the pick leaves under twice the margin, or a faster
    strategy fits only without it."""
    if chosen is None or chosen["cpu_offload"]:
        return True
    if chosen["free_bytes"] < 2 * evaluate.MARGIN * setup.usable_gpu_memory:
        return True
    return any(
        r["fits"] and not r["fits_with_margin"] and r["step_seconds"] < chosen["step_seconds"]
        for r in rows
    )


def recommend(
    setup: Setup,
    rows: list[dict[str, Any]],
    strategies: dict[str, Strategy],
    torch_version: str | None,
    checkpointing_only: bool = False,
) -> dict[str, Any]:
    """The ``recommendation`` object of the plan."""
    chosen = evaluate.pick(rows)
    found = (
        alternatives.suggest(setup, chosen, torch_version, checkpointing_only)
        if _thin(chosen, rows, setup)
        else []
    )
    if chosen is None:
        return _nothing_fits(setup, rows, found)
    strategy = strategies[chosen["name"]]
    code = snippet.render(setup, strategy, torch_version)
    touched = cautions.matching(code, torch_version)
    why = [
        f"{chosen['name']}: est. {format_seconds(chosen['step_seconds'])}/step "
        f"({chosen['tokens_per_second']:,.0f} tokens/s on {setup.gpus} GPUs) at "
        f"{format_bytes(chosen['per_gpu_bytes']['total'])} of {_usable(setup)}; the fastest "
        f"of the strategies that keep at least {evaluate.MARGIN:.0%} of it free (or within "
        f"{evaluate.TIE:.0%} of the fastest with less memory).",
        _tradeoff(chosen, rows, setup),
    ]
    if chosen["cpu_offload"]:
        why.append(_host_sentence(chosen, rows, setup))
    reasons = [_pitfall_reason(p, chosen, rows, setup) for p in touched]
    why += reasons
    under = [
        f"{r['name']} ({format_bytes(r['per_gpu_bytes']['total'])})"
        for r in rows
        if r["fits"] and not r["fits_with_margin"]
    ]
    if under:
        why.append(f"Fits, but under the margin: {', '.join(under)}.")
    too_big = [r["name"] for r in rows if not r["fits"] and not r["cpu_offload"]]
    if too_big:
        why.append(f"Does not fit: {', '.join(too_big)}.")
    if found:
        why.append("See alternatives for what else would fit.")
    return {
        "strategy": chosen["name"],
        "why": " ".join(why),
        "snippet": code,
        "torch_version": torch_version,
        "alternatives": found,
        "pitfalls": [
            {"id": p.id, "title": p.title, "why": reason}
            for p, reason in zip(touched, reasons, strict=True)
        ],
        "host_memory": host_memory(chosen, setup),
    }


def _nothing_fits(setup: Setup, rows: list[dict], found: list[dict]) -> dict[str, Any]:
    best = min(rows, key=lambda r: r["per_gpu_bytes"]["total"])
    why = (
        f"nothing fits in {_usable(setup)} with {evaluate.MARGIN:.0%} of it kept free; the "
        f"smallest is {best['name']} at {format_bytes(best['per_gpu_bytes']['total'])}."
    )
    thin = [r for r in rows if r["fits"]]
    if thin:
        close = min(thin, key=lambda r: r["step_seconds"])
        why += (
            f" {close['name']} fits without the margin ({format_bytes(close['free_bytes'])} "
            "free): try it only if a measured peak confirms it."
        )
    why += " See alternatives for what would fit." if found else ""
    return {
        "strategy": None,
        "why": why,
        "snippet": "",
        "alternatives": found,
        "pitfalls": [],
        "host_memory": None,
    }
