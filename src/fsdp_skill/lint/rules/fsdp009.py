"""FSDP009: a DataLoader in a distributed script with no DistributedSampler or per-rank split."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, has_splat, key_of
from fsdp_skill.lint.records import Call
from fsdp_skill.lint.rules._api import is_distributed

CODE = "FSDP009"
PITFALL = "dataloader-without-distributed-sampler"
SEVERITY = "warning"
SUMMARY = "DataLoader without a per-rank split in a distributed script"

_EVAL_WORDS = re.compile(
    r"(?:^|[._])(?:val|valid|validation|eval|evaluation|test|dev)(?:$|[._])|_(?:val|eval|test)\b|^(?:val|eval|test)",
    re.I,
)
_SPLITTERS = {"split_dataset_by_node", "shard", "DistributedSampler", "get_worker_info"}


def fix(version: tuple[int, int]) -> str:
    return (
        "pass sampler=DistributedSampler(dataset) (and call set_epoch each epoch), or split "
        "the data by rank yourself"
    )


def _per_rank(m: FileModel, expr: ast.expr | None, call: Call, depth: int = 0) -> bool:
    """True if the dataset expression (or what it was built from) depends on the rank."""
    if expr is None or depth > 3:
        return True  # unknown dataset: stay silent
    if m.mentions_rank(expr, call.func):
        return True
    for node in ast.walk(expr):
        name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
        if name in _SPLITTERS:
            return True
        if isinstance(node, ast.Call):
            callee = m.local_callee(m.call_of[id(node)]) if id(node) in m.call_of else None
            if callee is not None and callee.name != "__init__":
                return True  # a local factory: it may split by rank inside
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if name and name in m.classes and _class_mentions_rank(m, m.classes[name]):
                return True
        if isinstance(node, ast.Name):
            for a in m.values_of(node.id, call.func):
                if a.value is not None and a.value is not expr:
                    if _per_rank(m, a.value, call, depth + 1):
                        return True
    return False


_MAP_STYLE_SOURCES = ("torchvision.datasets.", "torchaudio.datasets.", "torchtext.datasets.")
_TORCH_DATASETS = {"TensorDataset", "ConcatDataset", "Subset", "StackDataset"}


def _known_whole_dataset(m: FileModel, expr: ast.expr | None, call: Call) -> bool:
    """True only when the dataset is certainly an ordinary indexable dataset that yields every
    sample on every rank: a torch TensorDataset, a torchvision/torchaudio/torchtext dataset, a
    Hugging Face ``load_dataset(...)`` (not streaming), a list, or a map-style Dataset class of
    this file. Anything else (a streaming or library dataset may split by rank itself): unsure."""
    values = m.resolve(expr, call.func) if expr is not None else []
    if not values:
        return False
    return all(_whole(m, value) for value in values)


def _whole(m: FileModel, value: ast.expr) -> bool:
    if isinstance(value, (ast.List, ast.ListComp, ast.Tuple)):
        return True
    if not isinstance(value, ast.Call):
        return False
    name = m.call_name(value) or ""
    tail = name.rsplit(".", 1)[-1]
    if name.startswith(_MAP_STYLE_SOURCES) or (
        name.startswith("torch.utils.data") and tail in _TORCH_DATASETS
    ):
        return True
    if name.startswith("datasets.") and tail == "load_dataset":
        return not any(kw.arg == "streaming" for kw in value.keywords)
    cls = m.classes.get(value.func.id) if isinstance(value.func, ast.Name) else None
    if cls is not None:
        bases = [m.qualname(b) or "" for b in cls.bases]
        return any(b.endswith("data.Dataset") for b in bases) and not any(
            "Iterable" in b for b in bases
        )
    return False


def _class_mentions_rank(m: FileModel, cls) -> bool:
    """True if a dataset class defined in the file looks at the rank or the worker split."""
    for node in ast.walk(cls.node):
        name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
        if name and (name in _SPLITTERS or "rank" in name.lower() or "world" in name.lower()):
            return True
    return False


def _evaluation(m: FileModel, loader: Call, dataset: ast.expr | None) -> bool:
    """True for a validation/test loader: evaluating the whole set on every rank wastes time
    but gives the right numbers, so it is not this rule's business."""
    names = [key_of(dataset) or ""] + [a.key for a in m.bound_to(loader.node)]
    return any(_EVAL_WORDS.search(name) for name in names)


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not is_distributed(m):
        return
    for loader in m.calls_to("DataLoader", module="torch.utils.data"):
        node = loader.node
        if loader.branch is not None or has_splat(node):
            continue  # a rank-0-only loader (evaluation) or unknown arguments
        if call_arg(node, 2, "sampler") is not None or call_arg(node, 3, "batch_sampler"):
            continue
        dataset = call_arg(node, 0, "dataset")
        if _per_rank(m, dataset, loader) or _evaluation(m, loader, dataset):
            continue
        if not _known_whole_dataset(m, dataset, loader):
            continue  # a library or streaming dataset may already split by rank
        label = key_of(dataset) or "the dataset"
        yield (
            node,
            (
                f"DataLoader over `{label}` has no DistributedSampler: every rank trains on the "
                "same batches"
            ),
        )
