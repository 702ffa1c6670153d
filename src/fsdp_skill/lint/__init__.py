"""``fsdp-skill lint``: static checks of FSDP and torch.distributed training code, and of
Hugging Face FSDP configs (accelerate config YAMLs, ``fsdp_config`` JSONs: ``lint.hfconfig``).

Public API (the CLI and the MCP server call these): ``lint_paths`` and ``lint_source``, both
returning ``{"findings": [...], "files": int, "errors": [...]}``, and ``fix_paths`` for
``--diff`` / ``--fix``. Importing this package is
cheap: the rules, the walker and the file discovery load on first use, and torch never does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fsdp_skill.roots import Roots

__all__ = ["fix_paths", "lint_paths", "lint_source"]


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
    project_root: str | None = None,
    roots: Roots | None = None,
    model_config: str | None = None,
) -> dict:
    """Lint files and folders (folders: ``*.py`` below, minus ``.gitignore`` and excludes,
    and the ``*.yaml``/``*.yml``/``*.json`` files that are Hugging Face FSDP configs).

    The files are linted as one project: imports between them, and into the other modules
    of their packages (found from each file's top package folder, and from ``project_root``
    if given), are followed. Configuration comes from ``[tool.fsdp-skill.lint]`` of each
    file's nearest ``pyproject.toml``; ``select`` replaces its select list, ``ignore`` adds to
    its ignores, ``torch_version`` overrides its torch-version. Unreadable paths land in
    ``errors`` while the other files are still checked. ``on_file(done, total)`` is called
    after each file (for a progress bar). ``model_config`` is the ``config.json`` of the
    model the configs train (checks the layer classes they name). With ``roots`` (the MCP
    server's), no file outside them is read: not a file found in a folder, a configuration
    file above one, a model config, nor a shell script or training script a config pairs with.
    """
    from fsdp_skill.lint import engine

    engine.chosen_codes(select, ignore)  # reject unknown codes before any work
    with engine.collector_paused():
        return _lint_paths(
            paths, select, ignore, torch_version, on_file, project_root, roots, None, model_config
        )


def fix_paths(
    paths: list[str],
    write: bool,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    torch_version: str | None = None,
    project_root: str | None = None,
    model_config: str | None = None,
) -> dict:
    """The mechanical fixes of ``lint_paths``'s findings: ``{"fixes": [{"path", "line",
    "code", "description"}], "diff": str, "errors": [...], "findings": [...], "files"}``.

    ``write=False`` (``--diff``): nothing is written, ``findings`` are today's. ``write=True``
    (``--fix``): each changed file is written aside and renamed into place (mode bits kept;
    a symlink's target is written); a file that changed on disk meanwhile, or that does not
    parse, is never touched; ``findings`` are those left after the fixes. Only Python files
    are fixed: the findings of Hugging Face configs are reported, never rewritten."""
    from fsdp_skill.lint import engine, fixes

    engine.chosen_codes(select, ignore)
    plans: list = []

    def planner(model, source, shown, path, codes) -> None:
        found = fixes.plan(model, source, shown, codes)
        found.file = path
        plans.append(found)

    with engine.collector_paused():
        result = _lint_paths(
            paths,
            select,
            ignore,
            torch_version,
            None,
            project_root,
            planner=planner,
            model_config=model_config,
        )
    errors = list(result["errors"])
    applied, diff = [], []
    for item in plans:
        if item.problem:
            errors.append({"path": item.path, "message": item.problem})
        if item.fixed is None:
            continue
        diff.append(item.diff())
        if write:
            problem = _write_fixed(item)
            if problem:
                errors.append({"path": item.path, "message": problem})
                continue
        applied += item.applied
    if write and applied:
        result = lint_paths(
            paths,
            select,
            ignore,
            torch_version,
            project_root=project_root,
            model_config=model_config,
        )
        errors = [e for e in errors if e not in result["errors"]] + result["errors"]
    return {
        "findings": result["findings"],
        "files": result["files"],
        "errors": errors,
        "fixes": applied,
        "diff": "".join(diff),
    }


def _write_fixed(item) -> str | None:
    """Write a fixed file atomically; the reason it was not written, or None."""
    from fsdp_skill.atomic import write_bytes

    target = Path(item.file).resolve()  # a symlink stays a link: its target gets the fix
    try:
        data = target.read_bytes()
    except OSError as exc:
        return f"not fixed: cannot read it again ({exc.strerror or exc})"
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        current = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return "not fixed: only UTF-8 files are rewritten"
    if current != item.source:
        return "not fixed: the file changed while it was being linted"
    try:
        write_bytes(target, item.fixed.encode("utf-8-sig" if bom else "utf-8"))
    except OSError as exc:
        return f"not fixed: cannot write it ({exc.strerror or exc})"
    return None


def _lint_paths(
    paths,
    select,
    ignore,
    torch_version,
    on_file,
    project_root,
    roots=None,
    planner=None,
    model_config=None,
) -> dict:
    from fsdp_skill.lint import config, engine, files, hfconfig
    from fsdp_skill.lint.project import Project

    explicit_version = engine.resolve_version(torch_version) if torch_version else None
    folders = [Path(raw) for raw in paths or ["."] if Path(raw).is_dir()]
    configs = hfconfig.Project(model_config=model_config, roots=folders, confine=roots)
    configs.model()  # an unreadable --model-config is bad usage, before any work
    targets, problems = files.discover(list(paths) or ["."], roots)
    errors = [p.as_dict() for p in problems]
    project = Project([Path(project_root)] if project_root else [], confine=roots)
    for folder in folders:
        project.add_root(folder)
    prepared = []  # (path, shown, source, file model or None, is a config)
    checked = 0
    for path in targets:
        is_config = hfconfig.is_config_name(path.name)
        if is_config and _too_big_for_a_config(path):
            continue  # a data file, not a configuration
        source = files.read_source(path)
        if isinstance(source, files.Problem):
            if not is_config:  # other YAML/JSON (binary, not UTF-8) is not a configuration
                errors.append(source.as_dict())
            continue
        shown = str(path)
        if is_config:
            prepared.append((path, shown, source, None, True))
            continue
        try:
            tree = engine.parse(source, shown)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            errors.append(_parse_error(shown, exc))
            continue
        model = None
        if engine.triggered(source):
            model = _model(project, path, tree)
            if model is None:
                errors.append({"path": shown, "message": "too deeply nested to analyse"})
                continue
        prepared.append((path, shown, source, model, False))
        checked += 1
    findings: list[dict] = []
    resolved: dict = {}  # folder -> its configuration (one lookup per folder)
    try:
        for done, (path, shown, source, model, is_config) in enumerate(prepared, start=1):
            if on_file is not None:
                on_file(done, len(prepared))
            folder = path.parent
            if folder not in resolved:
                resolved[folder] = config.for_folder(folder.resolve(), roots)
            cfg = resolved[folder]
            if model is None and not is_config:
                continue
            codes = engine.chosen_codes(
                select if select is not None else (list(cfg.select) if cfg.select else None),
                [*cfg.ignores_for(path), *(ignore or [])],
            )
            if is_config:
                outcome = hfconfig.lint_text(source, shown, codes, configs)
                if outcome is not None:  # None: YAML/JSON that is no configuration
                    checked += 1
                    findings += [f.as_dict() for f in outcome[0]]
                    errors += [{"path": shown, "message": p} for p in outcome[1]]
                continue
            version = explicit_version or engine.resolve_version(cfg.torch_version)
            found, problems = engine.lint_model(model, source, shown, codes, version)
            findings += [f.as_dict() for f in found]
            errors += [{"path": shown, "message": p} for p in problems]
            if planner is not None:
                planner(model, source, shown, path, codes)
    finally:
        project.release()
    return {"findings": findings, "files": checked, "errors": errors}


def _model(project, path: Path, tree):
    """The file model of a linted file, registered in the project (None: too deep)."""
    from fsdp_skill.lint.core import FileModel
    from fsdp_skill.lint.project import locate, package_of

    root, name = locate(path, project.packages)
    project.add_root(root)
    try:
        model = FileModel(tree, package_of(name, path.name == "__init__.py"), name or None)
    except RecursionError:
        return None
    project.add_target(path, model)
    return model


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
