"""The ``fsdp-skill`` command line: a thin shell over each module's public functions.

Each command imports its module inside the function, so ``fsdp-skill --help`` and the
fast-path commands load neither torch nor the other tools.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from fsdp_skill import __version__
from fsdp_skill.errors import Terminated, UsageError
from fsdp_skill.output import echo, emit_json

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, prog_name="fsdp-skill")
def cli() -> None:
    """Expert PyTorch FSDP help for people and coding agents.

    Search the skill's references, lint training scripts, plan memory, explain errors,
    find where hung ranks diverged, check the environment, start a project, and install
    the skill into every agent client.

    Every command but mcp and render takes --json (one JSON document on stdout). Exit
    status: 0 success, 1 problems found, 2 bad usage or unreadable input.
    """


# --- install / uninstall / verify / render -------------------------------------------------


def _client_option(text: str):
    return click.option("--client", "clients", multiple=True, metavar="NAME", help=text)


def _project_option(text: str):
    return click.option("--project", type=click.Path(path_type=Path, file_okay=False), help=text)


def _dest_option(text: str):
    return click.option("--dest", type=click.Path(path_type=Path), help=text)


def _mcp_option(text: str):
    return click.option("--mcp/--no-mcp", default=True, show_default=True, help=text)


_dry_run_option = click.option("--dry-run", is_flag=True, help="Print the plan, write nothing.")


def _print_report(report, as_json: bool, keys: tuple[str, ...]) -> None:
    if as_json:
        emit_json({k: getattr(report, k) for k in keys})
        return
    for line in report.actions:
        echo(line)


@cli.command(context_settings=CONTEXT)
@_client_option(
    "Client to install for (repeatable): claude-code, codex, cursor, opencode, gemini, "
    "copilot, kiro, agents; MCP only: claude-desktop, vscode, windsurf. Default: every client "
    "found on this machine."
)
@_project_option("Install into this project's skill folders instead of your home's.")
@_dest_option("Install into DEST/pytorch-fsdp, whatever the client.")
@click.option(
    "--force",
    is_flag=True,
    help="Overwrite files you edited since install; move aside a bundle whose manifest is "
    "corrupted, and install a fresh one.",
)
@_dry_run_option
@_mcp_option(
    "Also register the MCP server in Claude Desktop, Cursor, VS Code and Windsurf: the named "
    "ones, or those whose MCP config file exists."
)
@click.option(
    "--api-refs/--no-api-refs",
    default=True,
    help="Rebuild the API references for the installed torch when its version differs "
    "from the shipped ones (default: on).",
)
@json_option
def install(clients, project, dest, force, dry_run, mcp, api_refs, as_json) -> int:
    """Install the pytorch-fsdp skill for your agent clients (idempotent)."""
    from fsdp_skill.install import install as run_install

    report = run_install(
        list(clients) or None,
        project,
        dest,
        force=force,
        dry_run=dry_run,
        mcp=mcp,
        api_refs=api_refs,
    )
    _print_report(report, as_json, ("installed", "skipped", "mcp"))
    return 0


@cli.command(context_settings=CONTEXT)
@_client_option(
    "Client to remove the skill (or MCP entry) from (repeatable), named as for install. "
    "Default: every client's folders are looked at."
)
@_project_option("Remove from this project's skill folders instead of your home's.")
@_dest_option("Remove DEST/pytorch-fsdp, installed there with install --dest.")
@_dry_run_option
@_mcp_option(
    "Also remove the MCP server entry (and nothing else) from the MCP config files of "
    "Claude Desktop, Cursor, VS Code and Windsurf."
)
@json_option
def uninstall(clients, project, dest, dry_run, mcp, as_json) -> int:
    """Remove what install wrote (files you edited or added stay)."""
    from fsdp_skill.install import uninstall as run_uninstall

    report = run_uninstall(list(clients) or None, project, dest, dry_run=dry_run, mcp=mcp)
    if not report.removed and not report.mcp and not as_json:
        echo("nothing to remove: no bundle installed by fsdp-skill was found")
    _print_report(report, as_json, ("removed", "mcp"))
    return 0


@cli.command(context_settings=CONTEXT)
@click.argument("bundle_dir", required=False, type=click.Path(path_type=Path))
@click.option("--no-torch", is_flag=True, help="Skip resolving torch names.")
@json_option
def verify(bundle_dir, no_torch, as_json) -> int:
    """Check a skill bundle (default: the shipped one)."""
    from fsdp_skill.bundle_files import BUNDLE_DIR
    from fsdp_skill.verify import skipped_checks
    from fsdp_skill.verify import verify as run_verify

    bundle = bundle_dir or BUNDLE_DIR
    if not bundle.exists():
        raise UsageError(f"{bundle} does not exist")
    problems = run_verify(bundle, check_torch=not no_torch)
    skipped = skipped_checks(check_torch=not no_torch)
    if as_json:
        emit_json(
            {"ok": not problems, "problems": [p.as_dict() for p in problems], "skipped": skipped}
        )
    else:
        for p in problems:
            echo(f"{p.path}:{p.line}: {p.message}")
        verdict = "ok" if not problems else f"{len(problems)} problem(s)"
        for check in skipped:
            what, _, why = check.partition(": ")
            hint = "" if no_torch else "; install the [torch] extra to check them"
            verdict += f"; skipped the check of {what} ({why}{hint})"
        echo(f"{bundle}: {verdict}")
    return 1 if problems else 0


@cli.command(context_settings=CONTEXT)
@click.option("--check", is_flag=True, help="Exit 1 if the bundle is stale; write nothing.")
def render(check) -> int:
    """Regenerate the bundle's references/ from the knowledge (for contributors)."""
    from fsdp_skill.skill.render import render as run_render

    stale = run_render(check=check)
    for path in stale:
        echo(f"{'stale' if check else 'wrote'}: {path}")
    if check and stale:
        echo("the bundle is stale: run `fsdp-skill render`", err=True)
        return 1
    return 0


# --- tools: each section below belongs to one module; keep edits inside your section ------


# --- tools: lint (static checks of training code) -------------------------------------------


@cli.command("lint", context_settings=CONTEXT)
@click.argument("paths", nargs=-1, type=str)
@click.option("--select", multiple=True, metavar="CODES", help="Only these codes (FSDP001,...).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Skip these codes.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option("--torch-version", metavar="X.Y", help="Fit the advice to this torch version.")
@click.option("--explain", "explain_code", metavar="FSDPnnn", help="Print a rule's pitfall.")
@click.option("--no-fix", is_flag=True, help="Text output: omit the fix line.")
@click.option("--statistics", is_flag=True, help="Print the number of findings per code.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the mechanical fixes as a diff.")
@click.option("--fix", "apply_fix", is_flag=True, help="Apply the mechanical fixes in place.")
@click.option("--stdin-filename", default="<stdin>", help="Name to report for code read from -.")
@click.option(
    "--model-config",
    metavar="FILE",
    help="The model's config.json: check the layer classes HF FSDP configs name against it.",
)
@json_option
def lint_command(
    paths,
    select,
    ignore,
    fmt,
    torch_version,
    explain_code,
    no_fix,
    statistics,
    show_diff,
    apply_fix,
    stdin_filename,
    model_config,
    as_json,
) -> int:
    """Check training scripts and Hugging Face FSDP configs for mistakes (exit 1 on findings).

    PATHS are files or folders (default: .); folders are searched for *.py and for the
    *.yaml/*.yml/*.json files that are accelerate or fsdp_config configs, honouring
    .gitignore and [tool.fsdp-skill.lint] exclude; - reads code from stdin (a
    --stdin-filename ending in .yaml or .json reads a config). Silence one line with
    # noqa: FSDPnnn. --diff prints the mechanical fixes (FSDP007 reduce_dtype, FSDP013
    launch lines, FSDP014 destroy_process_group) as a diff; --fix writes them (Python
    files only: config findings are reported, not rewritten).
    """
    from fsdp_skill.lint import formats, lint_paths, lint_source
    from fsdp_skill.lint.explain import explain_rule

    if explain_code:
        doc = explain_rule(explain_code, torch_version)
        if as_json or fmt == "json":
            emit_json(doc)
        else:
            echo(doc["text"])
        return 0
    options = {
        "select": list(select) or None,
        "ignore": list(ignore) or None,
        "torch_version": torch_version,
        "model_config": model_config,
    }
    if show_diff or apply_fix:
        return _lint_fixes(list(paths), show_diff, apply_fix, fmt, as_json, no_fix, options)
    if list(paths) == ["-"]:
        from fsdp_skill.lint.files import Problem, read_stream

        source = read_stream(sys.stdin.buffer, stdin_filename)
        if isinstance(source, Problem):
            raise UsageError(f"{source.path}: {source.message}")
        result = lint_source(source, stdin_filename, **options)
    else:
        from fsdp_skill.lint.progress import bar

        with bar(enabled=fmt == "text" and not as_json) as on_file:
            result = lint_paths(list(paths) or ["."], on_file=on_file, **options)
    if result["files"] == 0 and result["errors"]:
        for e in result["errors"]:
            echo(f"{e['path']}: error: {e['message']}", err=True)
        first = result["errors"][0]
        raise UsageError(f"nothing could be read ({first['path']}: {first['message']})")
    if statistics:
        result["statistics"] = formats.statistics(result)
    if as_json or fmt == "json":
        emit_json(result)
    elif fmt == "sarif":
        emit_json(formats.sarif(result, __version__))
    elif statistics:
        for line in formats.statistics_text(result["statistics"]):
            echo(line)
    else:
        for line in formats.text(result, show_fix=not no_fix):
            echo(line)
    return 1 if result["findings"] or result["errors"] else 0


def _lint_fixes(paths, show_diff, apply_fix, fmt, as_json, no_fix, options) -> int:
    """``lint --diff`` (print the fixes, write nothing) and ``lint --fix`` (apply them)."""
    from fsdp_skill.lint import fix_paths, formats

    if show_diff and apply_fix:
        raise UsageError("--diff and --fix: choose one (--diff shows what --fix would write)")
    if paths == ["-"]:
        raise UsageError("--diff/--fix need files: code read from stdin has nowhere to go back")
    if fmt == "sarif":
        raise UsageError("--diff/--fix print text or --json, not SARIF")
    result = fix_paths(paths or ["."], write=apply_fix, **options)
    if result["files"] == 0 and result["errors"]:
        for e in result["errors"]:
            echo(f"{e['path']}: error: {e['message']}", err=True)
        first = result["errors"][0]
        raise UsageError(f"nothing could be read ({first['path']}: {first['message']})")
    if as_json or fmt == "json":
        emit_json(result)
    else:
        fixes = result["fixes"]
        files = len({f["path"] for f in fixes})
        counted = f"{len(fixes)} fix{'es' * (len(fixes) != 1)} in {files} file{'s' * (files != 1)}"
        if show_diff:
            if result["diff"]:
                sys.stdout.write(result["diff"])
            echo(f"would apply {counted} (run with --fix to write them)", err=True)
        else:
            for f in fixes:
                echo(f"fixed: {f['path']}:{f['line']}: {f['code']} {f['description']}")
            for line in formats.text(result, show_fix=not no_fix):
                echo(line)
            echo(f"applied {counted}", err=True)
    return 1 if result["findings"] or result["errors"] else 0


# --- tools: search / show / refresh (references and the search index) ---------------------


@cli.command(context_settings=CONTEXT)
@click.argument("query", nargs=-1, required=True)
@click.option("-k", "k", default=5, show_default=True, help="How many sections to return.")
@json_option
def search(query, k, as_json) -> int:
    """Find the reference sections that answer QUERY (English or Chinese)."""
    from fsdp_skill.search import search as run_search

    found = run_search(" ".join(query), k=k)
    if as_json:
        emit_json(found)
        return 0
    from fsdp_skill.search.summary import plain

    if not found["results"]:
        echo(f"no section matches {found['query']!r}")
    for rank, hit in enumerate(found["results"], start=1):
        echo(f"{rank}. {hit['id']}  {plain(hit['title'])}  ({hit['path']})")
        echo(f"   {plain(hit['summary'] or hit['snippet'])}")
    return 0


@cli.command(context_settings=CONTEXT)
@click.argument("section_id", metavar="ID")
@click.option(
    "--with-pitfalls", is_flag=True, help="Also list the pitfalls it links, one line each."
)
@json_option
def show(section_id, with_pitfalls, as_json) -> int:
    """Print one whole reference section (an ID that search returned)."""
    from fsdp_skill.search import show as run_show

    section = run_show(section_id, with_pitfalls=with_pitfalls)
    if as_json:
        emit_json(section)
        return 0
    echo(section["text"].rstrip("\n"))
    echo("")
    if with_pitfalls:
        echo("Pitfalls it links:" if section["pitfalls"] else "Pitfalls it links: none")
        for pitfall in section["pitfalls"]:
            echo(f"- {pitfall['id']}: {pitfall['summary']}")
        echo("")
    if section.get("sections"):
        from fsdp_skill.search.summary import plain

        echo("Sections of this page:")
        for part in section["sections"]:
            echo(f"  fsdp-skill show {part['id']}  - {plain(part['title'])}")
        echo("")
    where = " · ".join(part for part in (section["id"], section["path"], section["url"]) if part)
    echo(f"[{where}]")
    return 0


@cli.command(context_settings=CONTEXT)
@click.option(
    "--source",
    type=click.Choice(["installed", "web"]),
    default="installed",
    show_default=True,
    help="installed: API references from the torch this Python imports; web: crawl the docs.",
)
@click.option(
    "--url",
    "urls",
    metavar="URL",
    multiple=True,
    help="With --source web: crawl from this page (repeatable) instead of the official list.",
)
@click.option(
    "--base",
    metavar="URL",
    help="With --source web: read the official pages from this mirror (same paths).",
)
@click.option(
    "--version",
    "docs_version",
    metavar="X.Y",
    help="With --source web: the docs version to read (default: the installed torch's "
    "when published, else stable).",
)
@click.option(
    "--prune",
    is_flag=True,
    help="With --source web: also remove crawled pages not fetched this time.",
)
@click.option(
    "--dest",
    type=click.Path(path_type=Path, file_okay=False),
    help="Bundle folder to refresh (default: the one the toolkit ships).",
)
@json_option
def refresh(source, urls, base, docs_version, prune, dest, as_json) -> int:
    """Rebuild the API references and the search index atomically; report what changed."""
    from fsdp_skill.references import refresh as run_refresh
    from fsdp_skill.search import bundle_dir

    report = run_refresh(
        dest or bundle_dir(),
        source=source,
        urls=urls,
        base=base,
        version=docs_version,
        prune=prune,
        progress=not as_json,
    )
    if as_json:
        emit_json(report)
        return 0
    for key, mark in (("added", "+"), ("removed", "-"), ("changed", "~")):
        for sid in report[key]:
            echo(f"{mark} {sid}")
    for failure in report.get("failures", []):
        echo(f"! {failure['url']}: {failure['reason']}", err=True)
    echo(
        f"{report['sections']} sections ({report['source']}, torch {report['torch_version']}): "
        f"{len(report['added'])} added, {len(report['removed'])} removed, "
        f"{len(report['changed'])} changed"
    )
    return 0


# --- tools: plan (memory and communication planner) ---------------------------------------


@cli.command("plan", context_settings=CONTEXT)
@click.option("--params", metavar="N", help="Parameter count: 7b, 70B, 1.3e9, 350M.")
@click.option(
    "--model-config",
    metavar="FILE",
    help="A Hugging Face config.json (Llama, Mistral, Qwen2/3, GPT-2, GPT-NeoX, Mixtral).",
)
@click.option(
    "--model",
    "model_id",
    metavar="ID",
    help="A bundled name (llama-3-8b, mixtral-8x7b...) or a hub id read with AutoConfig.",
)
@click.option("--gpus", type=int, required=True, help="GPUs in total, over all nodes.")
@click.option("--nodes", type=int, default=1, show_default=True, help="Machines.")
@click.option("--gpu-memory", required=True, metavar="SIZE", help="Per GPU: 80GB, 80GiB, 24G.")
@click.option("--seq-len", type=int, default=4096, show_default=True)
@click.option("--micro-batch", type=int, default=1, show_default=True, help="Sequences per GPU.")
@click.option(
    "--precision", type=click.Choice(["bf16", "fp16", "fp32"]), default="bf16", show_default=True
)
@click.option(
    "--reduce-dtype",
    type=click.Choice(["fp32", "bf16", "fp16"]),
    default="fp32",
    show_default=True,
    help="Gradient reduce-scatter dtype (MixedPrecisionPolicy.reduce_dtype).",
)
@click.option(
    "--optimizer",
    type=click.Choice(["adamw", "adam", "sgd", "sgd-nomomentum"]),
    default="adamw",
    show_default=True,
)
@click.option(
    "--activation-checkpointing", is_flag=True, help="Compare only checkpointed strategies."
)
@click.option(
    "--attention", type=click.Choice(["sdpa", "eager"]), default="sdpa", show_default=True
)
@click.option("--headroom", type=float, default=0.10, show_default=True, help="Fraction kept free.")
@click.option("--bandwidth", metavar="RATE", help="Bus bandwidth within a node: 150GB/s.")
@click.option("--inter-node-bandwidth", metavar="RATE", help="Between nodes: 400Gbps, 25GB/s.")
@click.option(
    "--interconnect",
    type=click.Choice(["nvlink", "pcie"]),
    default="nvlink",
    show_default=True,
    help="Default intra-node bandwidth when --bandwidth is not given.",
)
@click.option(
    "--network",
    type=click.Choice(["infiniband", "ethernet"]),
    default="infiniband",
    show_default=True,
    help="Default inter-node bandwidth when --inter-node-bandwidth is not given.",
)
@click.option("--cpu-memory", metavar="SIZE", help="CPU memory per node, to check offloading.")
@click.option("--mfu", type=float, help="Fraction of peak FLOP/s compute reaches [0.4].")
@click.option("--gpu-flops", metavar="RATE", help="Peak per GPU: 989TFLOPS [H100 SXM].")
@click.option(
    "--cpu-adam-rate",
    metavar="N",
    help="CPU AdamW parameters/s per rank with offload (benchmarks/cpu_adam.py measures it).",
)
@click.option(
    "--lora-rank", type=int, metavar="R", help="Plan LoRA adapters of rank R on a frozen base."
)
@click.option("--torch-version", metavar="X.Y", help="Write the snippet for this torch.")
@json_option
def plan_command(
    params,
    model_config,
    model_id,
    gpus,
    nodes,
    gpu_memory,
    seq_len,
    micro_batch,
    precision,
    reduce_dtype,
    optimizer,
    activation_checkpointing,
    attention,
    headroom,
    bandwidth,
    inter_node_bandwidth,
    interconnect,
    network,
    cpu_memory,
    mfu,
    gpu_flops,
    cpu_adam_rate,
    lora_rank,
    torch_version,
    as_json,
) -> int:
    """Will it fit, which strategy, what will it cost: memory, communication and step time."""
    from fsdp_skill.plan import plan as run_plan

    result = run_plan(
        params=params,
        model_config=model_config,
        model=model_id,
        gpus=gpus,
        nodes=nodes,
        gpu_memory=gpu_memory,
        seq_len=seq_len,
        micro_batch=micro_batch,
        precision=precision,
        optimizer=optimizer,
        activation_checkpointing=activation_checkpointing,
        reduce_dtype=reduce_dtype,
        attention=attention,
        headroom=headroom,
        bandwidth=bandwidth,
        inter_node_bandwidth=inter_node_bandwidth,
        interconnect=interconnect,
        network=network,
        cpu_memory=cpu_memory,
        mfu=mfu,
        gpu_flops=gpu_flops,
        cpu_adam_rate=cpu_adam_rate,
        lora_rank=lora_rank,
        torch_version=torch_version,
    )
    if as_json:
        emit_json(result)
    else:
        from fsdp_skill.plan.report import render_text

        echo(render_text(result, rich=sys.stdout.isatty()))
    return 0 if result["recommendation"]["strategy"] else 1


# --- tools: env / mcp (the environment doctor and the MCP server) -------------------------


@cli.command("env", context_settings=CONTEXT)
@click.option(
    "--for",
    "for_topic",
    type=click.Choice(["hang", "init", "perf", "topology"]),
    help="Also print the variables to export for this investigation, and what each shows.",
)
@click.option(
    "--deep",
    is_flag=True,
    help="Also import torch in a child process to ask which backends and devices it can use.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1, max=600),
    default=60,
    show_default=True,
    help="With --deep: give up on importing torch after this many seconds.",
)
@json_option
def env_command(for_topic, deep, timeout, as_json) -> int:
    """Check the distributed environment: torch, GPUs, links, networks, variables, backend."""
    from fsdp_skill.doctor import env as run_env

    report = run_env(for_topic, deep=deep, deep_timeout=timeout)
    if as_json:
        emit_json(report)
        return 0
    from fsdp_skill.doctor.text import format_report

    echo(format_report(report))
    return 0


@cli.command(context_settings=CONTEXT)
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Folder the path arguments may point into, besides the roots the client declares "
    "(repeatable).",
)
def mcp(roots) -> int:
    """Serve the same tools over the Model Context Protocol (stdio), for MCP clients."""
    from fsdp_skill.mcp_server import serve

    serve(list(roots))
    return 0


# --- tools: new (scaffold a training project) ---------------------------------------------


@cli.command("new", context_settings=CONTEXT)
@click.argument("dest", metavar="DIR", type=click.Path(path_type=Path))
@click.option(
    "--model-config",
    type=click.Path(path_type=Path, dir_okay=False),
    help="A Hugging Face config JSON: train that model from random init.",
)
@click.option(
    "--model", metavar="NAME_OR_PATH", help="A local checkpoint folder or hub id to start from."
)
@click.option("--cpu-offload", is_flag=True, help="Keep sharded state in CPU memory.")
@click.option("--activation-checkpointing", is_flag=True, help="Recompute activations in backward.")
@click.option(
    "--precision",
    type=click.Choice(["bf16", "fp16", "fp32"]),
    default="bf16",
    show_default=True,
    help="Compute precision (fp16 adds a gradient scaler).",
)
@click.option(
    "--fsdp-version",
    type=click.Choice(["2", "1"]),
    default="2",
    show_default=True,
    help="2: fully_shard; 1: FullyShardedDataParallel.",
)
@click.option("--force", is_flag=True, help="Write into a non-empty folder (other files stay).")
@json_option
def new_command(
    dest,
    model_config,
    model,
    cpu_offload,
    activation_checkpointing,
    precision,
    fsdp_version,
    force,
    as_json,
) -> int:
    """Write a runnable, resumable FSDP2 training project into DIR.

    The project needs torch>=2.6 and transformers>=5 to run (not to be written).
    """
    from fsdp_skill.scaffold import new_project

    result = new_project(
        dest,
        model_config=model_config,
        model=model,
        cpu_offload=cpu_offload,
        activation_checkpointing=activation_checkpointing,
        precision=precision,
        fsdp_version=int(fsdp_version),
        force=force,
    )
    if as_json:
        emit_json(result)
        return 0
    needs = " and ".join(f"{name}{spec}" for name, spec in result["requires"].items())
    has = ", ".join(f"{n} {v}" if v else f"no {n}" for n, v in result["installed"].items())
    echo(f"the project needs {needs} to run (this Python has {has})")
    echo(f"wrote {len(result['files'])} files to {result['path']}:")
    for rel in result["files"]:
        echo(f"  {rel}")
    echo(f"next: cd {result['path']} && NPROC=2 launch/torchrun.sh --device cpu --max-steps 50")
    return 0


# --- tools: explain / hang (diagnose errors and hung jobs) --------------------------------


@cli.command("explain", context_settings=CONTEXT)
@click.argument("text", required=False)
@click.option("--file", "file", metavar="LOG", help="Read the error or log from this file.")
@json_option
def explain_command(text, file, as_json) -> int:
    """Say what an error message, traceback or whole log means and what to do.

    TEXT is the message; use --file LOG for a file, or `-` (or a pipe) for stdin. Exits 1
    when no known error is found.
    """
    from fsdp_skill.diagnose import explain as run_explain
    from fsdp_skill.diagnose.render import explain_text, read_explain_tail

    tail = read_explain_tail(text, file)
    result = tail.place(run_explain(tail.text))
    if as_json:
        emit_json(result)
    else:
        if tail.note():
            echo(tail.note())
        for line in explain_text(result):
            echo(line)
    return 0 if result["matches"] else 1


@cli.command("hang", context_settings=CONTEXT)
@click.argument("paths", nargs=-1, metavar="PATH...")
@json_option
def hang_command(paths, as_json) -> int:
    """Find where the ranks of a hung or failed job diverged.

    PATH: per-rank logs, torchrun output, NCCL_DEBUG=INFO logs, watchdog timeouts,
    TORCH_DISTRIBUTED_DEBUG=DETAIL reports, flight-recorder dumps, or folders of them.
    Exits 1 when a divergence or a hang is found (a single rank waiting in a collective
    counts: its report asks for the other ranks' logs), 0 when none is.
    """
    from fsdp_skill.diagnose import hang as run_hang
    from fsdp_skill.diagnose.render import hang_text

    result = run_hang(list(paths))
    if as_json:
        emit_json(result)
    else:
        for line in hang_text(result):
            echo(line)
    return 0 if result["verdict"] == "no-divergence" else 1


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: run the CLI, turn usage errors into one line and exit 2."""
    try:
        # click's own main() would print a blank line before its Abort on Ctrl-C
        args = list(sys.argv[1:] if argv is None else argv)
        with cli.make_context("fsdp-skill", args) as ctx:
            code = cli.invoke(ctx)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.Abort:
        echo("fsdp-skill: interrupted", err=True)  # click turns Ctrl-C into Abort
        code = 130
    except click.ClickException as exc:
        echo(f"fsdp-skill: error: {exc.format_message()}", err=True)
        code = 2
    except UsageError as exc:
        echo(f"fsdp-skill: error: {exc}", err=True)
        code = 2
    except KeyboardInterrupt:
        echo("fsdp-skill: interrupted", err=True)
        code = 130
    except Terminated:
        echo("fsdp-skill: terminated; nothing was left half-written", err=True)
        code = 143
    except BrokenPipeError:
        code = 0
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
