"""Which module classes a model has, from its ``config.json``, without loading the model.

The config gives the model type (and those of its sub-models: a vision tower, a text model);
the mined table gives each type's classes. A model whose code is not in transformers
(``auto_map``: remote code) or whose type this transformers does not know has no answer:
the checks then stay silent. A model named by id is looked up in a local folder or in the
local Hugging Face cache only; nothing is downloaded. With the MCP server's roots, a folder
or cache outside them is not looked at.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from fsdp_skill.lint.hfconfig import data
from fsdp_skill.roots import Roots, readable


@dataclass(frozen=True)
class ModelInfo:
    """What the checks know about the model a configuration trains."""

    label: str
    """How findings name it: ``qwen2 (from config.json)``."""
    classes: frozenset[str]
    no_split: tuple[str, ...]


_MODEL_SETTINGS = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads")
"""A nested mapping with one of these describes a sub-model (a vision tower, a text model);
others (``quantization_config``, ``rope_scaling``) do not."""


def _model_types(config: dict) -> list[str] | None:
    """The ``model_type`` of the config and of every sub-model's config; None if one of them
    names none, so that its classes are unknown."""
    found = []
    for value in config.values():
        if isinstance(value, dict) and any(k in value for k in _MODEL_SETTINGS):
            nested = _model_types(value)
            if nested is None:
                return None
            found += nested
    own = config.get("model_type")
    if isinstance(own, str):
        return [own, *found]
    return None


def _module_for_architecture(name: str) -> str | None:
    for module, entry in data.model_classes()["modules"].items():
        if name in entry["classes"]:
            return module
    return None


def from_config(config: dict, label: str) -> ModelInfo | None:
    """The model a ``config.json`` describes, or None when its classes cannot be known."""
    if not isinstance(config, dict) or "auto_map" in config:
        return None
    table = data.model_classes()
    types = _model_types(config)
    modules: list[str] = []
    if types:
        for model_type in types:
            module = table["model_types"].get(model_type)
            if module is None:
                return None
            modules.append(module)
    else:
        architectures = config.get("architectures") or []
        module = _module_for_architecture(architectures[0]) if architectures else None
        if module is None:
            return None
        modules = [module]
        types = [module]
    classes = set(table["torch_nn"]) | set(table["transformers_common"])
    no_split: list[str] = []
    for module in modules:
        classes |= set(table["modules"][module]["classes"])
        no_split += [n for n in table["modules"][module]["no_split"] if n not in no_split]
    return ModelInfo(f"{types[0]} (from {label})", frozenset(classes), tuple(no_split))


def read_config(path: Path) -> dict:
    """A ``config.json`` as a dict; raises ValueError with a one-line reason."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: not a model config (a JSON object)")
    return value


def _hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "huggingface"
    )
    return Path(home) / "hub"


def find_config(name: str, base: Path, confine: Roots | None = None) -> Path | None:
    """The ``config.json`` of a model named by path or hub id, if it is on this machine (and
    inside ``confine``, if given)."""

    # under roots, a relative name is not looked up from the working directory (which may
    # lie anywhere), only beside the configuration that names it
    folders = [base / name] if confine is not None else [Path(name), base / name]
    for folder in folders:
        candidate = folder / "config.json"
        if readable(candidate, confine) and candidate.is_file():
            return candidate
    if name.count("/") != 1:
        return None
    repo = _hub_cache() / ("models--" + name.replace("/", "--"))
    if not readable(repo, confine):
        return None
    ref = repo / "refs" / "main"
    try:
        snapshot = (
            ref.read_text(encoding="utf-8").strip()
            if readable(ref, confine) and ref.is_file()
            else ""
        )
    except OSError:
        snapshot = ""
    candidates = [repo / "snapshots" / snapshot / "config.json"] if snapshot else []
    candidates += sorted((repo / "snapshots").glob("*/config.json"))
    return next((c for c in candidates if readable(c, confine) and c.is_file()), None)


def from_name(name: str, base: Path, confine: Roots | None = None) -> ModelInfo | None:
    """The model a configuration names (``model_name_or_path``), if its config is local (and
    inside ``confine``, if given)."""
    path = find_config(name, base, confine)
    if path is None:
        return None
    try:
        return from_config(read_config(path), name)
    except ValueError:
        return None
