"""The plan as text: a table per strategy (rich on a terminal, plain otherwise)."""

from __future__ import annotations

from typing import Any

from fsdp_skill.plan.units import format_bytes, format_count, format_seconds

COLUMNS = (
    "strategy",
    "fits",
    "params",
    "grads",
    "optim",
    "acts",
    "buffers",
    "total",
    "peak at",
    "cpu/node",
    "comm/step",
    "comm time",
    "step time",
    "tokens/s",
)


PHASES = {
    "loss_backward": "loss bwd",
    "layer_backward": "layer bwd",
    "optimizer_step": "opt step",
}


def _fits(row: dict[str, Any]) -> str:
    """yes; thin (fits, but with less than the margin free); no."""
    if not row["fits"]:
        return "no"
    return "yes" if row.get("fits_with_margin", True) else "thin"


def rows(result: dict[str, Any]) -> list[list[str]]:
    """One list of cell texts per strategy, in COLUMNS order."""
    out = []
    for s in result["strategies"]:
        b = s["per_gpu_bytes"]
        out.append(
            [
                s["name"],
                _fits(s),
                format_bytes(b["params"]),
                format_bytes(b["grads"]),
                format_bytes(b["optimizer"]),
                format_bytes(b["activations"]),
                format_bytes(b["buffers"]),
                format_bytes(b["total"]),
                PHASES.get(s.get("peak_phase", ""), "-"),
                format_bytes(s["cpu_bytes"]) if s["cpu_bytes"] else "-",
                format_bytes(s["comm_bytes_per_step"]),
                format_seconds(s["comm_seconds_per_step"]),
                format_seconds(s["step_seconds"]),
                f"{s['tokens_per_second']:,.0f}",
            ]
        )
    return out


def header(result: dict[str, Any]) -> str:
    m, s = result["model"], result["setup"]
    if m["exact"]:
        what = f"{m['name']}: {format_count(m['params'])} parameters"
    else:
        what = f"{format_count(m['params'])} parameters (Llama-style shapes assumed)"
    return (
        f"{what}; {s['gpus']} GPU(s) on "
        f"{s['nodes']} node(s), {format_bytes(s['gpu_memory'])} each "
        f"({format_bytes(s['usable_gpu_memory'])} usable); seq {s['seq_len']} x micro-batch "
        f"{s['micro_batch']}, {s['precision']}, {s['optimizer']}, {s['attention']} attention"
    )


def render_text(result: dict[str, Any], rich: bool) -> str:
    """The whole report: header, table, recommendation, snippet, notes."""
    table = _rich_table(result) if rich else _plain_table(result)
    rec = result["recommendation"]
    parts = [header(result), "", table, ""]
    if rec["strategy"]:
        parts += [f"Recommendation: {rec['strategy']}", rec["why"], "", rec["snippet"].rstrip()]
    else:
        parts += ["Recommendation: none", rec["why"]]
    if rec.get("alternatives"):
        parts += ["", "Alternatives:"]
        parts += [f"- {a['change']}: {a['effect']}" for a in rec["alternatives"]]
    notes = list(result["notes"])
    chosen = next((s for s in result["strategies"] if s["name"] == rec["strategy"]), None)
    if chosen:
        notes += chosen["notes"]
    if notes:
        parts += ["", "Notes:", *(f"- {n}" for n in notes)]
    return "\n".join(parts)


def _plain_table(result: dict[str, Any]) -> str:
    body = [list(COLUMNS), *rows(result)]
    widths = [max(len(r[i]) for r in body) for i in range(len(COLUMNS))]
    lines = []
    for n, r in enumerate(body):
        lines.append(
            "  ".join(
                cell.ljust(w) if i < 2 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(r, widths, strict=True))
            )
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _rich_table(result: dict[str, Any]) -> str:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="per GPU, at the peak of one step", title_justify="left")
    for i, name in enumerate(COLUMNS):
        table.add_column(name, justify="left" if i < 2 else "right", no_wrap=True)
    chosen = result["recommendation"]["strategy"]
    for r in rows(result):
        style = "bold green" if r[0] == chosen else ("dim" if r[1] == "no" else None)
        table.add_row(*r, style=style)
    console = Console(width=200, record=True, force_terminal=True)
    with console.capture() as capture:
        console.print(table)
    return capture.get().rstrip()
