"""``fsdp-skill lint``: static checks of FSDP and torch.distributed training code, and of
Hugging Face FSDP configs (accelerate config YAMLs, ``fsdp_config`` JSONs: ``lint.hfconfig``).

Public API (the CLI and the MCP server call these): ``lint_paths`` and ``lint_source``, both
returning ``{"findings": [...], "files": int, "errors": [...]}``. Importing this package is
cheap: the rules, the walker and the file discovery load on first use, and torch never does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["lint_paths", "lint_source"]


def lint_source(
    code: str,
    filename: str = "<input>",
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    torch_version: str | None = None,
    model_config: str | None = None,
) -> dict:
    """Lint one source text; a syntax error is reported in ``errors`` (``files`` is then 0).
    A ``filename`` ending in .yaml/.yml/.json is read as a Hugging Face FSDP config."""
    from fsdp_skill.lint import engine, hfconfig

    codes = engine.chosen_codes(select, ignore)
    if hfconfig.is_config_name(filename):
        project = hfconfig.Project(model_config=model_config)
        return _config_result(filename, hfconfig.lint_text(code, filename, codes, project))
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
    model_config: str | None = None,
) -> dict:
    """Lint files and folders (folders: ``*.py`` below, minus ``.gitignore`` and excludes,
    and the ``*.yaml``/``*.yml``/``*.json`` files that are Hugging Face FSDP configs).

    Configuration comes from ``[tool.fsdp-skill.lint]`` of each file's nearest
    ``pyproject.toml``; ``select`` replaces its select list, ``ignore`` adds to its ignores,
    ``torch_version`` overrides its torch-version. Unreadable paths land in ``errors`` while
    the other files are still checked. ``on_file(done, total)`` is called after each file
    (for a progress bar). ``model_config`` is the ``config.json`` of the model the configs
    train (checks the layer classes they name).
    """
    from fsdp_skill.lint import config, engine, files, hfconfig

    engine.chosen_codes(select, ignore)  # reject unknown codes before any work
    explicit_version = engine.resolve_version(torch_version) if torch_version else None
    targets, problems = files.discover(list(paths) or ["."])
    project = hfconfig.Project(
        model_config=model_config, roots=[Path(p) for p in paths or ["."] if Path(p).is_dir()]
    )
    project.model()  # an unreadable --model-config is bad usage, before any work
    findings: list[dict] = []
    errors = [p.as_dict() for p in problems]
    checked = 0
    resolved: dict = {}  # folder -> its configuration (one lookup per folder)
    for done, path in enumerate(targets, start=1):
        if on_file is not None:
            on_file(done, len(targets))
        is_config = hfconfig.is_config_name(path.name)
        if is_config and _too_big_for_a_config(path):
            continue  # a data file, not a configuration
        source = files.read_source(path)
        if isinstance(source, files.Problem):
            if not is_config:
                errors.append(source.as_dict())
            continue
        shown = str(path)
        folder = path.parent
        if folder not in resolved:
            resolved[folder] = config.for_folder(folder.resolve())
        cfg = resolved[folder]
        codes = engine.chosen_codes(
            select if select is not None else (list(cfg.select) if cfg.select else None),
            [*cfg.ignores_for(path), *(ignore or [])],
        )
        if is_config:
            outcome = hfconfig.lint_text(source, shown, codes, project)
            if outcome is not None:
                checked += 1
                findings += [f.as_dict() for f in outcome[0]]
                errors += [{"path": shown, "message": p} for p in outcome[1]]
            continue
        try:
            tree = engine.parse(source, shown)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            errors.append(_parse_error(shown, exc))
            continue
        version = explicit_version or engine.resolve_version(cfg.torch_version)
        checked += 1
        found, problems = engine.lint_tree(tree, source, shown, codes, version)
        findings += [f.as_dict() for f in found]
        errors += [{"path": shown, "message": p} for p in problems]
    return {"findings": findings, "files": checked, "errors": errors}


def _too_big_for_a_config(path: Path) -> bool:
    from fsdp_skill.lint import hfconfig

    try:
        return path.stat().st_size > hfconfig.MAX_BYTES
    except OSError:
        return False


def _config_result(filename: str, outcome: tuple | None) -> dict:
    """``lint_source``'s result for a config text (``files`` 0: not a configuration)."""
    if outcome is None:
        return {"findings": [], "files": 0, "errors": []}
    found, problems = outcome
    errors = [{"path": filename, "message": p} for p in problems]
    return {"findings": [f.as_dict() for f in found], "files": 1, "errors": errors}


def _parse_error(path: str, exc: Exception) -> dict:
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return {"path": path, "message": f"syntax error: {exc.msg}{where}"}
    if isinstance(exc, (RecursionError, MemoryError)):
        return {"path": path, "message": "too deeply nested to parse"}
    return {"path": path, "message": f"cannot parse: {exc}"}
