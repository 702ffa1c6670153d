"""Mine, from the installed transformers, which module classes each model type can contain.

``fsdp_transformer_layer_cls_to_wrap`` names classes; accelerate looks each one up among
``type(module).__name__`` of the model's modules and stops with "Could not find the
transformer layer class ... in the model" when one is missing. Lint checks the names against
this table without importing transformers: for every model type (``config.json``'s
``model_type``), the classes its modeling module defines or imports (a superset of what an
instance holds, so a name missing from it is surely missing from the model) and its
``_no_split_modules`` (the classes to suggest). torch.nn's module classes and the classes of
transformers' shared modules (activations, layers, integrations) are listed apart: every
model may hold them.

The result is ``knowledge/hf_model_classes.json``, written by ``scripts/mine_hf_keys.py``;
``tests/knowledge/test_hf_models.py`` re-mines and fails when it is stale.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from fsdp_skill import atomic
from fsdp_skill.knowledge import KNOWLEDGE_DIR

DATA_FILE = KNOWLEDGE_DIR / "hf_model_classes.json"


def _module_classes(folder: Path) -> tuple[set[str], set[str]]:
    """Class names the ``modeling_*.py`` files of a model folder define or import, and the
    names their ``_no_split_modules`` lists hold."""
    classes: set[str] = set()
    no_split: set[str] = set()
    for path in sorted(folder.glob("modeling_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes.add(node.name)
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                classes |= {a.asname or a.name for a in node.names if a.name[:1].isupper()}
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(getattr(t, "id", "") == "_no_split_modules" for t in targets):
                    try:
                        value = ast.literal_eval(node.value)
                    except (ValueError, TypeError, SyntaxError):
                        continue
                    if isinstance(value, (list, tuple, set)):
                        no_split |= {v for v in value if isinstance(v, str)}
    return classes, no_split


def mine() -> dict:
    """``{"versions", "torch_nn", "model_types": {type: module}, "modules": {module:
    {"classes", "no_split"}}}`` for the installed transformers and torch."""
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import (
        CONFIG_MAPPING_NAMES,
        model_type_to_module_name,
    )

    models_dir = Path(transformers.__file__).parent / "models"
    model_types: dict[str, str] = {}
    modules: dict[str, dict[str, list[str]]] = {}
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        module = model_type_to_module_name(model_type)
        folder = models_dir / module
        if not any(folder.glob("modeling_*.py")):
            continue  # a config without a PyTorch model in this release
        model_types[model_type] = module
        if module not in modules:
            classes, no_split = _module_classes(folder)
            modules[module] = {"classes": sorted(classes), "no_split": sorted(no_split)}
    common: set[str] = set()
    package = Path(transformers.__file__).parent
    for path in [*package.glob("*.py"), *(package / "integrations").glob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        common |= {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    torch_nn = sorted(
        name
        for name in dir(torch.nn)
        if isinstance(getattr(torch.nn, name), type)
        and issubclass(getattr(torch.nn, name), torch.nn.Module)
    )
    return {
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
        "source": "transformers/models/<module>/modeling_*.py (ast), CONFIG_MAPPING_NAMES",
        "torch_nn": torch_nn,
        "transformers_common": sorted(common),
        "model_types": model_types,
        "modules": modules,
    }


def render(data: dict) -> str:
    """The data file's text (deterministic, one module per line)."""
    lines = ["{"]
    for key in ("versions", "source", "torch_nn", "transformers_common", "model_types"):
        lines.append(f"{json.dumps(key)}: {json.dumps(data[key], sort_keys=True)},")
    lines.append('"modules": {')
    items = sorted(data["modules"].items())
    for index, (module, entry) in enumerate(items):
        comma = "," if index < len(items) - 1 else ""
        lines.append(f"{json.dumps(module)}: {json.dumps(entry, sort_keys=True)}{comma}")
    lines += ["}", "}"]
    return "\n".join(lines) + "\n"


def write(path: Path = DATA_FILE) -> Path:
    """Mine and write the data file atomically; return its path."""
    atomic.write_text(path, render(mine()))
    return path
