"""Which training script runs with which accelerate config: the ``accelerate launch
--config_file CONFIG script.py`` lines of the project's shell scripts, and how that script
saves the final model.

A config alone does not say what the script does with the state-dict type; the launch line
ties the two together, so that a check may say "this config makes that script's
``trainer.save_model`` write nothing". Only the shell scripts under the folders being linted
are read, and only Python's ``ast`` looks at the training script. With the MCP server's roots,
a shell script, config or training script outside them is neither read nor looked at.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fsdp_skill.roots import Roots, readable

SHELL_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
MAX_SHELL_FILES = 2000
MAX_SHELL_BYTES = 1 << 20
_CONFIG_OPTIONS = ("--config_file", "--config-file")


@dataclass(frozen=True)
class Launch:
    """One ``accelerate launch`` line: the config it passes, the script it runs, and where."""

    config: Path
    script: Path
    where: str


@dataclass(frozen=True)
class ScriptSaves:
    """How a training script saves its final model."""

    trainer_save_lines: tuple[int, ...]
    """Lines of ``<trainer>.save_model(...)`` calls of a transformers or TRL Trainer."""
    forces_full_state_dict: bool
    """The script switches the plugin to ``FULL_STATE_DICT`` itself (``set_state_dict_type``)."""


def _shell_files(roots: list[Path], confine: Roots | None) -> list[Path]:
    from fsdp_skill.lint.files import DEFAULT_EXCLUDES

    found: list[Path] = []
    for root in roots:
        for folder, dirs, names in os.walk(root):  # folder links are not followed
            dirs[:] = sorted(d for d in dirs if d not in DEFAULT_EXCLUDES and not d.startswith("."))
            found += [
                Path(folder) / n
                for n in sorted(names)
                if n.endswith(SHELL_SUFFIXES) and readable(Path(folder) / n, confine)
            ]
            if len(found) >= MAX_SHELL_FILES:
                return found[:MAX_SHELL_FILES]
    return found


def _commands(text: str) -> list[tuple[int, str]]:
    """Logical command lines (backslash continuations joined) that run ``accelerate launch``."""
    out = []
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command, pending = pending + line, ""
        if re.search(r"\baccelerate\s+launch\b", command):
            out.append((start, command))
    return out


def _parse_launch(command: str) -> tuple[str | None, str | None]:
    """(config path, script path) of one ``accelerate launch`` command, as written."""
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError:
        return None, None
    try:
        index = next(
            i
            for i, t in enumerate(tokens)
            if t == "launch" and tokens[i - 1].endswith("accelerate")
        )
    except StopIteration:
        return None, None
    config = script = None
    rest = tokens[index + 1 :]
    for position, token in enumerate(rest):
        if token in _CONFIG_OPTIONS and position + 1 < len(rest):
            config = rest[position + 1]
        elif token.startswith(tuple(o + "=" for o in _CONFIG_OPTIONS)):
            config = token.split("=", 1)[1]
        elif token.endswith(".py") and not token.startswith("-"):
            script = token
            break
    return config, script


def _resolve(written: str, bases: list[Path], confine: Roots | None) -> Path | None:
    for base in bases:
        candidate = (base / written).resolve() if not os.path.isabs(written) else Path(written)
        if readable(candidate, confine) and candidate.is_file():
            return candidate.resolve()
    return None


def find_launches(roots: list[Path], confine: Roots | None = None) -> list[Launch]:
    """Every ``accelerate launch --config_file X script.py`` found under ``roots`` whose config
    and script both exist (relative paths tried from the shell file's folder, then each root);
    with ``confine``, only shell files, configs and scripts inside it count."""
    launches = []
    for shell in _shell_files(roots, confine):
        try:
            if shell.stat().st_size > MAX_SHELL_BYTES:
                continue
            text = shell.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        bases = [shell.parent, *roots]
        for line, command in _commands(text):
            config, script = _parse_launch(command)
            if not config or not script:
                continue
            config_path = _resolve(config, bases, confine)
            script_path = _resolve(script, bases, confine)
            if config_path and script_path:
                launches.append(Launch(config_path, script_path, f"{shell}:{line}"))
    return launches


def _imports_hf_trainer(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in ("transformers", "trl") and any(
                a.name.endswith("Trainer") for a in node.names
            ):
                return True
    return False


def script_saves(script: Path) -> ScriptSaves | None:
    """How ``script`` saves its model; None when it cannot be read or parsed."""
    try:
        info = script.stat()
    except OSError:
        return None
    # keyed by the file's size and time too: the MCP server lints the same files again later
    return _script_saves(script, info.st_size, info.st_mtime_ns)


@cache
def _script_saves(script: Path, size: int, mtime_ns: int) -> ScriptSaves | None:
    try:
        tree = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    saves, forces_full = [], False
    uses_trainer = _imports_hf_trainer(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr == "set_state_dict_type" and any(
            isinstance(a, ast.Constant) and "FULL_STATE_DICT" in str(a.value)
            for a in [*node.args, *(k.value for k in node.keywords)]
        ):
            forces_full = True
        receiver = ast.unparse(node.func.value).lower()
        if uses_trainer and node.func.attr == "save_model" and "accelerator" not in receiver:
            saves.append(node.lineno)
    return ScriptSaves(tuple(sorted(saves)), forces_full)
