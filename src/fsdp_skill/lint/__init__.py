"""``fsdp-skill lint``: static checks of FSDP and torch.distributed training code.

Public API (the CLI and the MCP server call these): ``lint_paths`` and ``lint_source``, both
returning ``{"findings": [...], "files": int, "errors": [...]}``. Importing this package is
cheap: the rules, the walker and the file discovery load on first use, and torch never does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fsdp_skill.roots import Roots

__all__ = ["lint_paths", "lint_source"]


def lint_source(
    code: str,
    filename: str = "<input>",
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    torch_version: str | None = None,
) -> dict:
    """Lint one source text; a syntax error is reported in ``errors`` (``files`` is then 0)."""
    from fsdp_skill.lint import engine

    codes = engine.chosen_codes(select, ignore)
    version = engine.resolve_version(torch_version)
    try:
        tree = engine.parse(code, filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return {"findings": [], "files": 0, "errors": [_parse_error(filename, exc)]}
    findings, problems = engine.lint_tree(tree, code, filename, codes, version)
    errors = [{"path": filename, "message": p} for p in problems]
    return {"findings": [f.as_dict() for f in findings], "files": 1, "errors": errors}


def lint_paths(
    paths: list[str],
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    torch_version: str | None = None,
    on_file: Callable[[int, int], None] | None = None,
    roots: Roots | None = None,
) -> dict:
    """Lint files and folders (folders: ``*.py`` below, minus ``.gitignore`` and excludes).

    Configuration comes from ``[tool.fsdp-skill.lint]`` of each file's nearest
    ``pyproject.toml``; ``select`` replaces its select list, ``ignore`` adds to its ignores,
    ``torch_version`` overrides its torch-version. Unreadable paths land in ``errors`` while
    the other files are still checked. ``on_file(done, total)`` is called after each file
    (for a progress bar). With ``roots`` (the MCP server's), no file outside them is read:
    not a file found in a folder, nor a configuration file above one.
    """
    from fsdp_skill.lint import config, engine, files

    engine.chosen_codes(select, ignore)  # reject unknown codes before any work
    explicit_version = engine.resolve_version(torch_version) if torch_version else None
    targets, problems = files.discover(list(paths) or ["."], roots)
    findings: list[dict] = []
    errors = [p.as_dict() for p in problems]
    checked = 0
    resolved: dict = {}  # folder -> its configuration (one lookup per folder)
    for done, path in enumerate(targets, start=1):
        if on_file is not None:
            on_file(done, len(targets))
        source = files.read_source(path)
        if isinstance(source, files.Problem):
            errors.append(source.as_dict())
            continue
        shown = str(path)
        try:
            tree = engine.parse(source, shown)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            errors.append(_parse_error(shown, exc))
            continue
        folder = path.parent
        if folder not in resolved:
            resolved[folder] = config.for_folder(folder.resolve(), roots)
        cfg = resolved[folder]
        codes = engine.chosen_codes(
            select if select is not None else (list(cfg.select) if cfg.select else None),
            [*cfg.ignores_for(path), *(ignore or [])],
        )
        version = explicit_version or engine.resolve_version(cfg.torch_version)
        checked += 1
        found, problems = engine.lint_tree(tree, source, shown, codes, version)
        findings += [f.as_dict() for f in found]
        errors += [{"path": shown, "message": p} for p in problems]
    return {"findings": findings, "files": checked, "errors": errors}


def _parse_error(path: str, exc: Exception) -> dict:
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return {"path": path, "message": f"syntax error: {exc.msg}{where}"}
    if isinstance(exc, (RecursionError, MemoryError)):
        return {"path": path, "message": "too deeply nested to parse"}
    return {"path": path, "message": f"cannot parse: {exc}"}
