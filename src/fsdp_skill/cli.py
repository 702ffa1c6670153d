"""The ``fsdp-skill`` command line: a thin shell over each module's public functions.

Each command imports its module inside the function, so ``fsdp-skill --help`` and the
fast-path commands load neither torch nor the other tools.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from fsdp_skill import __version__
from fsdp_skill.errors import UsageError
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
    """


# --- install / uninstall / verify / render -------------------------------------------------

_client_option = click.option(
    "--client",
    "clients",
    multiple=True,
    metavar="NAME",
    help="Client to install for (repeatable): claude-code, codex, cursor, opencode, gemini, "
    "copilot, kiro, agents. Default: every client found on this machine.",
)
_project_option = click.option(
    "--project",
    type=click.Path(path_type=Path, file_okay=False),
    help="Install into this project's skill folders instead of your home's.",
)
_dest_option = click.option(
    "--dest",
    type=click.Path(path_type=Path),
    help="Install into DEST/pytorch-fsdp, whatever the client.",
)
_dry_run_option = click.option("--dry-run", is_flag=True, help="Print the plan, write nothing.")


def _print_report(report, as_json: bool, keys: tuple[str, ...]) -> None:
    if as_json:
        emit_json({k: getattr(report, k) for k in keys})
        return
    for line in report.actions:
        echo(line)


@cli.command(context_settings=CONTEXT)
@_client_option
@_project_option
@_dest_option
@click.option("--force", is_flag=True, help="Overwrite files you edited since install.")
@_dry_run_option
@json_option
def install(clients, project, dest, force, dry_run, as_json) -> int:
    """Install the pytorch-fsdp skill for your agent clients (idempotent)."""
    from fsdp_skill.install import install as run_install

    report = run_install(list(clients) or None, project, dest, force=force, dry_run=dry_run)
    _print_report(report, as_json, ("installed", "skipped"))
    return 0


@cli.command(context_settings=CONTEXT)
@_client_option
@_project_option
@_dest_option
@_dry_run_option
@json_option
def uninstall(clients, project, dest, dry_run, as_json) -> int:
    """Remove what install wrote (files you edited or added stay)."""
    from fsdp_skill.install import uninstall as run_uninstall

    report = run_uninstall(list(clients) or None, project, dest, dry_run=dry_run)
    if not report.removed and not as_json:
        echo("nothing to remove: no bundle installed by fsdp-skill was found")
    _print_report(report, as_json, ("removed",))
    return 0


@cli.command(context_settings=CONTEXT)
@click.argument("bundle_dir", required=False, type=click.Path(path_type=Path))
@click.option("--no-torch", is_flag=True, help="Skip resolving torch names.")
@json_option
def verify(bundle_dir, no_torch, as_json) -> int:
    """Check a skill bundle (default: the shipped one)."""
    from fsdp_skill.bundle_files import BUNDLE_DIR
    from fsdp_skill.verify import verify as run_verify

    bundle = bundle_dir or BUNDLE_DIR
    if not bundle.exists():
        raise UsageError(f"{bundle} does not exist")
    problems = run_verify(bundle, check_torch=not no_torch)
    if as_json:
        emit_json({"ok": not problems, "problems": [p.as_dict() for p in problems]})
    else:
        for p in problems:
            echo(f"{p.path}:{p.line}: {p.message}")
        echo(f"{bundle}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
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


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: run the CLI, turn usage errors into one line and exit 2."""
    try:
        code = cli.main(args=argv, prog_name="fsdp-skill", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.Abort:
        echo("fsdp-skill: aborted", err=True)
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
    except BrokenPipeError:
        code = 0
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
