"""Speed of `fsdp-skill env` and of the MCP server, next to baselines measured in the same run.

env: a cold ``fsdp-skill env --json`` process, beside ``python -c pass`` (interpreter start)
and ``python -c "import torch.distributed"`` (what any doctor that imports torch pays before
it can say anything), and ``env --deep`` (which does import torch, in a child process).

MCP: the time from spawning ``fsdp-skill mcp`` to a listed tool set, then the median latency
of tool calls over the stdio connection beside the same library call made in-process.

    python benchmarks/env_mcp_bench.py [--runs 5] [--calls 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any


def median_seconds(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def process(*args: str) -> Callable[[], None]:
    def run() -> None:
        subprocess.run([sys.executable, *args], check=True, capture_output=True)

    return run


def env_rows(runs: int) -> list[tuple[str, float]]:
    rows = [
        ("python -c pass (interpreter start)", median_seconds(process("-c", "pass"), runs)),
        (
            "python -c 'import torch.distributed' (baseline doctor)",
            median_seconds(process("-c", "import torch.distributed"), runs),
        ),
        (
            "fsdp-skill env --json",
            median_seconds(process("-m", "fsdp_skill", "env", "--json"), runs),
        ),
        (
            "fsdp-skill env --json --deep",
            median_seconds(process("-m", "fsdp_skill", "env", "--json", "--deep"), runs),
        ),
    ]
    from fsdp_skill.doctor import env

    rows.append(("env() in-process, warm", median_seconds(env, runs)))
    return rows


CODE = "import torch\nmodel = torch.nn.Linear(4, 4)\n"
CALLS: list[tuple[str, dict]] = [
    ("env", {}),
    ("lint", {"code": CODE}),
    ("search", {"query": "fully_shard mixed precision"}),
]


def direct(name: str, args: dict) -> Any:
    if name == "env":
        from fsdp_skill.doctor import env

        return env()
    if name == "lint":
        from fsdp_skill.lint import lint_source

        return lint_source(args["code"])
    from fsdp_skill.search import search

    return search(args["query"])


def mcp_rows(calls: int) -> list[tuple[str, float, float | None]]:
    import anyio
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "fsdp_skill", "mcp"])
    rows: list[tuple[str, float, float | None]] = []

    async def session() -> None:
        start = time.perf_counter()
        async with Client(params) as client:
            await client.list_tools()
            rows.append(("spawn + initialize + tools/list", time.perf_counter() - start, None))
            for name, args in CALLS:
                times = []
                for _ in range(calls):
                    t = time.perf_counter()
                    result = await client.call_tool(name, args)
                    times.append(time.perf_counter() - t)
                    if result.is_error:
                        raise SystemExit(f"{name} failed: {result.content}")
                baseline = median_seconds(lambda n=name, a=args: direct(n, a), calls)
                rows.append((f"tools/call {name}", statistics.median(times), baseline))

    anyio.run(session)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="processes per env row")
    parser.add_argument("--calls", type=int, default=20, help="calls per MCP tool row")
    args = parser.parse_args()

    print("| env | median s |")
    print("|---|---:|")
    for label, seconds in env_rows(args.runs):
        print(f"| {label} | {seconds:.3f} |")
    print()
    print("| MCP over stdio | median s | same call in-process (baseline) |")
    print("|---|---:|---:|")
    for label, seconds, baseline in mcp_rows(args.calls):
        base = f"{baseline:.4f}" if baseline is not None else "-"
        print(f"| {label} | {seconds:.4f} | {base} |")


if __name__ == "__main__":
    main()
