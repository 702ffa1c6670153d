"""The API pages spell signatures as Python does: a call copied from a page must work.

Keyword-only parameters follow a ``*`` and positional-only ones precede a ``/``; without
them ``fully_shard(module, mesh, ...)`` or ``dcp.save(state_dict, checkpoint_id)`` read as
positional calls, which fail. Checked on small functions, on every documented name of the
installed torch, and on the shipped pages.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from fsdp_skill.bundle_files import BUNDLE_DIR
from fsdp_skill.references import api
from fsdp_skill.references.topics import API_TOPICS as TOPICS

torch = pytest.importorskip("torch")


def _flat(signature: str) -> str:
    """A one-line form of a (possibly one-parameter-per-line) signature."""
    inner = re.sub(r",\n\s*\)", ")", signature)
    return re.sub(r"\(\n\s*", "(", re.sub(r",\n\s*", ", ", inner))


def positional_only(a, /, b, *, c=1): ...


def star_args(a, *args, k, **kw): ...


def only_positional(a, b, /): ...


class Configured:
    def __init__(self, size: int, *, name: str = "x") -> None: ...


@pytest.mark.parametrize(
    "obj,expected",
    [
        (positional_only, "f(a, /, b, *, c=1)"),
        (star_args, "f(a, *args, k, **kw)"),  # *args already ends the positional ones
        (only_positional, "f(a, b, /)"),
        (Configured, "f(size: 'int', *, name: 'str' = 'x')"),  # no self; string annotations
    ],
)
def test_markers_as_python_writes_them(obj, expected):
    assert api._signature("f", obj) == expected


def _documented() -> list[tuple[str, object]]:
    found = []
    for topic in TOPICS:
        try:
            module = importlib.import_module(topic.module)
        except ImportError:
            continue
        found += api._members(topic, module)
    return found


def _python_spelling(obj: object) -> str | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if inspect.isclass(obj) and params[:1] and params[0].name == "self":
        sig = sig.replace(parameters=params[1:])
    return api._ADDRESS.sub("", str(sig.replace(return_annotation=inspect.Signature.empty)))


def test_every_documented_signature_matches_python():
    checked = 0
    for dotted, obj in _documented():
        if inspect.ismodule(obj) or isinstance(obj, property):
            continue
        page = api._signature(dotted, obj)
        expected = _python_spelling(obj)
        if page is None or expected is None:
            continue
        flat = _flat(page).split(" -> ")[0] if " -> " in _flat(page) else _flat(page)
        assert flat == dotted + expected, dotted
        checked += 1
    assert checked > 50


def test_the_shipped_pages_keep_the_markers():
    pages = {p.name: p.read_text(encoding="utf-8") for p in BUNDLE_DIR.glob("references/api-*.md")}
    fsdp2 = pages["api-fsdp2.md"]
    assert "torch.distributed.fsdp.fully_shard(\n    module,\n    *,\n    mesh:" in fsdp2
    checkpoint = pages["api-checkpoint.md"]
    assert re.search(r"save\(\n    state_dict[^\n]*,\n    \*,\n    checkpoint_id", checkpoint)
    signatures = re.findall(
        r"^## (\S+)\n\n```text\n(.*?)\n```", "\n".join(pages.values()), re.S | re.M
    )
    keyword_only = 0
    for dotted, signature in signatures:
        obj = _resolve(dotted)
        if obj is None or isinstance(obj, property):
            continue
        try:
            params = inspect.signature(obj).parameters.values()
        except (TypeError, ValueError):
            continue
        if any(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params):
            keyword_only += 1
            assert re.search(r"(?:\(|, |\n {4})\*(?:,|\n)|\*\w", signature), dotted
    assert keyword_only >= 10


def _resolve(dotted: str) -> object | None:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None
