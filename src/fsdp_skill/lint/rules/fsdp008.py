"""FSDP008: DistributedSampler used but set_epoch never called."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, constant, key_of, last_name
from fsdp_skill.lint.records import Call
from fsdp_skill.lint.rules._api import last
from fsdp_skill.lint.rules.fsdp009 import _EVAL_WORDS

CODE = "FSDP008"
PITFALL = "distributed-sampler-without-set-epoch"
SEVERITY = "warning"
SUMMARY = "DistributedSampler without set_epoch"


def fix(version: tuple[int, int]) -> str:
    return "call sampler.set_epoch(epoch) at the start of every epoch, before iterating"


def _iterated_keys(m: FileModel) -> set[str]:
    """Keys that a loop iterates over (``for b in loader``, ``enumerate(loader)``, ``iter``)."""
    keys = set()
    for records in m.assigns.values():
        for a in records:
            if not a.loop or a.value is None:
                continue
            value = a.value
            while isinstance(value, ast.Call) and value.args:
                value = value.args[0]  # enumerate(loader), tqdm(loader), zip(loader, ...)
            if key_of(value):
                keys.add(key_of(value))
    for call in m.calls:
        if isinstance(call.node.func, ast.Name) and call.node.func.id in ("iter", "next"):
            if call.node.args and key_of(call.node.args[0]):
                keys.add(key_of(call.node.args[0]))
    return keys


def _loaders_using(m: FileModel, sampler: Call) -> list[str]:
    """Keys bound to a DataLoader that uses ``sampler`` (inline or through a name)."""
    sampler_keys = {a.key for a in m.bound_to(sampler.node)}
    out = []
    for loader in m.calls_to("DataLoader", module="torch.utils.data"):
        arg = call_arg(loader.node, 2, "sampler")
        if arg is None:
            continue
        if arg is sampler.node or key_of(arg) in sampler_keys:
            out += [a.key for a in m.bound_to(loader.node)]
    return out


def _has_epoch_loop(m: FileModel) -> bool:
    """True if the file trains for several epochs (``for epoch in range(...)``): the sampler it
    builds is then used across epochs, wherever the loader travels."""
    for key, records in m.assigns.items():
        if "epoch" in key.lower() and "." not in key:
            for a in records:
                if a.loop and isinstance(a.value, ast.Call) and last_name(a.value.func) == "range":
                    return True
    return False


def _evaluation_only(m: FileModel, sampler: Call) -> bool:
    """True if the sampler only feeds validation/test loaders: their order does not matter
    (the metrics are summed over the whole set)."""
    names = [a.key for a in m.bound_to(sampler.node)] + _loaders_using(m, sampler)
    return bool(names) and all(_EVAL_WORDS.search(name) for name in names)


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if "set_epoch" in m.identifiers:
        return
    project = m.project
    epochs_here = _has_epoch_loop(m)
    for sampler in m.calls_to("DistributedSampler", module="torch.utils.data"):
        if last(m.call_name(sampler)) != "DistributedSampler":
            continue
        shuffle = call_arg(sampler.node, 3, "shuffle")
        if shuffle is not None and constant(shuffle) is False:
            continue
        if _evaluation_only(m, sampler):
            continue
        around = project.ancestors(m, sampler.func)
        if any(project.reaches(am, af, "set_epoch", loose=True) for am, af in around):
            continue  # a helper (maybe in another module) calls set_epoch on it
        epochs = epochs_here or any(project.reaches(am, af, "epoch_loop") for am, af in around)
        if not epochs:
            continue  # one pass of N steps: the order never repeats
        yield (
            sampler.node,
            (
                "DistributedSampler shuffles but set_epoch is never called: every epoch "
                "repeats the same order"
            ),
        )
