"""Render the project templates with the chosen options and write them atomically."""

from __future__ import annotations

import json
import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsdp_skill import atomic
from fsdp_skill.bundle_files import BUNDLE_DIR
from fsdp_skill.errors import UsageError

TEMPLATE_DIR = BUNDLE_DIR / "assets" / "fsdp2-project"
"""The project as shipped in the skill bundle: valid files with the default options."""

CONFIG_FILE = "train_config.json"
MODEL_CONFIG_FILE = "model_config.json"
README_FILE = "README.md"
OPTIONS_START = "<!-- project-options:start -->"
OPTIONS_END = "<!-- project-options:end -->"
PRECISIONS = ("bf16", "fp16", "fp32")
FSDP_VERSIONS = (2, 1)
OPTION_NAMES = (
    "model_config",
    "model",
    "cpu_offload",
    "activation_checkpointing",
    "precision",
    "fsdp_version",
    "force",
)
REQUIRES = {"torch": ">=2.6", "transformers": ">=5"}
"""What the written project needs to run: ``fully_shard`` and its policies are public in
``torch.distributed.fsdp`` since 2.6 (symbols.toml); model.py refuses transformers < 5, whose
weight initialisation leaves meta-device rotary buffers empty. The tests derive both from
train.py."""
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_EXECUTABLE = (".sh", ".sbatch")
_SKIPPED = {"__pycache__", ".DS_Store"}


@dataclass(frozen=True)
class Options:
    """The choices that make one project differ from the shipped templates."""

    model_config: dict | None = None  # the Hugging Face config to train from random init
    model: str | None = None  # or a local checkpoint folder / hub name to load
    cpu_offload: bool = False
    activation_checkpointing: bool = False
    precision: str = "bf16"
    fsdp_version: int = 2


def new_project(dest: str | os.PathLike, **options: Any) -> dict:
    """Write the training project into ``dest``; returns ``{"path", "files", "options",
    "requires", "installed"}`` (what the project needs to run, and what this Python has).

    Options: ``model_config`` (path of a Hugging Face config JSON), ``model`` (local
    checkpoint folder or hub name), ``cpu_offload``, ``activation_checkpointing``,
    ``precision`` (bf16|fp16|fp32), ``fsdp_version`` (2|1), ``force`` (write into a non-empty
    folder, replacing the project's files and leaving other files alone).
    """
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise UsageError(f"unknown option(s) for new: {', '.join(unknown)}")
    force = bool(options.pop("force", False))
    chosen = parse_options(**options)
    target = Path(dest).expanduser().resolve()
    files = render(chosen)
    write_project(target, files, force)
    return {
        "path": str(target.resolve()),
        "files": sorted(files),
        "options": {
            "model_config": options.get("model_config") and str(options["model_config"]),
            "model": chosen.model,
            "cpu_offload": chosen.cpu_offload,
            "activation_checkpointing": chosen.activation_checkpointing,
            "precision": chosen.precision,
            "fsdp_version": chosen.fsdp_version,
        },
        "requires": dict(REQUIRES),
        "installed": installed_versions(),
    }


def installed_versions() -> dict[str, str | None]:
    """The versions of the packages in ``REQUIRES`` that this Python has (None: missing),
    from their metadata: importing torch would take seconds."""
    from importlib import metadata

    found: dict[str, str | None] = {}
    for name in REQUIRES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def parse_options(
    model_config: str | os.PathLike | None = None,
    model: str | None = None,
    cpu_offload: bool = False,
    activation_checkpointing: bool = False,
    precision: str = "bf16",
    fsdp_version: int | str = 2,
) -> Options:
    """Check the options and read the model config; bad values raise UsageError."""
    if model_config is not None and model is not None:
        raise UsageError("give either --model-config or --model, not both")
    if precision not in PRECISIONS:
        raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    try:
        version = int(fsdp_version)
    except (TypeError, ValueError):
        version = 0
    if version not in FSDP_VERSIONS:
        raise UsageError(f"--fsdp-version must be 2 or 1, not {fsdp_version!r}")
    return Options(
        model_config=read_model_config(Path(model_config)) if model_config is not None else None,
        model=check_model(model) if model is not None else None,
        cpu_offload=bool(cpu_offload),
        activation_checkpointing=bool(activation_checkpointing),
        precision=precision,
        fsdp_version=version,
    )


def read_model_config(path: Path) -> dict:
    """A Hugging Face model config: a JSON object that names its ``model_type``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--model-config {path}: cannot read it ({exc.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--model-config {path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise UsageError(
            f"--model-config {path}: expected a Hugging Face config (a JSON object with a "
            "'model_type' string, like a checkpoint's config.json)"
        )
    return data


def check_model(model: str) -> str:
    """A local checkpoint folder (made absolute) or a hub model id, as given."""
    local = Path(model).expanduser()
    if local.exists():
        if not (local / "config.json").is_file():
            raise UsageError(f"--model {model}: the folder has no config.json")
        return str(local.resolve())
    if not _HUB_ID.match(model):
        raise UsageError(f"--model {model}: neither a local folder nor a hub model id")
    return model


def template_files() -> dict[str, bytes]:
    """The shipped project, ``{relative posix path: content}``."""
    files = {}
    for path in sorted(TEMPLATE_DIR.rglob("*")):
        rel = path.relative_to(TEMPLATE_DIR)
        if path.is_file() and not _SKIPPED.intersection(rel.parts):
            files[rel.as_posix()] = path.read_bytes()
    return files


def render(options: Options) -> dict[str, bytes]:
    """Every file of the project for ``options``."""
    files = template_files()
    config = json.loads(files[CONFIG_FILE])
    config["fsdp"].update(
        version=options.fsdp_version,
        precision=options.precision,
        cpu_offload=options.cpu_offload,
        activation_checkpointing=options.activation_checkpointing,
    )
    if options.model is not None:
        config["model"].update(config=None, name_or_path=options.model)
        config["data"]["tokenizer"] = options.model
        del files[MODEL_CONFIG_FILE]
    elif options.model_config is not None:
        files[MODEL_CONFIG_FILE] = _json_bytes(options.model_config)
    files[CONFIG_FILE] = _json_bytes(config)
    files[README_FILE] = _render_readme(files[README_FILE].decode("utf-8"), options).encode()
    return files


def describe(options: Options) -> str:
    """One paragraph that says how this project differs from the defaults."""
    if options.model is not None:
        model = f"the model `{options.model}` (weights loaded from that checkpoint)"
    elif options.model_config is not None:
        kind = options.model_config["model_type"]
        model = f"a `{kind}` model from `{MODEL_CONFIG_FILE}` (random init)"
    else:
        model = f"a small Llama model from `{MODEL_CONFIG_FILE}` (random init)"
    api = (
        "FSDP2 (`fully_shard`)"
        if options.fsdp_version == 2
        else "FSDP1 (`FullyShardedDataParallel`)"
    )
    precision = {
        "bf16": "bf16 mixed precision",
        "fp16": "fp16 mixed precision with a gradient scaler",
        "fp32": "full fp32 precision",
    }[options.precision]
    offload = "CPU offload" if options.cpu_offload else "no CPU offload"
    ac = (
        "activation checkpointing"
        if options.activation_checkpointing
        else "no activation checkpointing"
    )
    return (
        f"This project trains {model} with {api}, {precision}, {offload} and {ac}. "
        f"Change any of these in `{CONFIG_FILE}`."
    )


def _render_readme(text: str, options: Options) -> str:
    start, end = text.find(OPTIONS_START), text.find(OPTIONS_END)
    if start < 0 or end < start:
        raise RuntimeError(f"the README template lacks the {OPTIONS_START} section")
    paragraph = textwrap.fill(describe(options), width=96, break_on_hyphens=False)
    return f"{text[: start + len(OPTIONS_START)]}\n{paragraph}\n{text[end:]}"


def _json_bytes(data: dict) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode("utf-8")


def _mode(rel: str) -> int:
    return 0o755 if rel.endswith(_EXECUTABLE) else 0o644


def write_project(target: Path, files: dict[str, bytes], force: bool) -> None:
    """Write ``files`` under ``target`` so that no reader ever sees half a project.

    A new (or empty) folder is built aside and renamed into place. With ``force``, an existing
    folder keeps its other files and each project file is replaced atomically.
    """
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} exists and is not a folder")
    non_empty = target.is_dir() and any(target.iterdir())
    if non_empty and not force:
        raise UsageError(f"{target} is not empty (use --force to write the project files into it)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if non_empty:
            for rel, data in files.items():
                path = target / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic.write_bytes(path, data, mode=_mode(rel))
            return
        with atomic.staging_dir(target.parent, target.name) as staging:
            for rel, data in files.items():
                path = staging / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic.write_bytes(path, data, mode=_mode(rel))
            staging.chmod(0o755)
            os.replace(staging, target)  # replaces an empty folder, if there was one
    except OSError as exc:
        raise UsageError(f"cannot write the project to {target}: {exc.strerror or exc}") from None
