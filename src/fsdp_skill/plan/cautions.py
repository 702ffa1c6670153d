"""Which of the skill's pitfalls a planned snippet does what they warn against.

A pitfall's ``bad`` and ``good`` code differ in a few call arguments (``fully_shard(...,
reshard_after_forward=False)`` against the default, ``CPUOffloadPolicy()`` against
``CPUOffloadPolicy(pin_memory=False)``). Those differences are read from the pitfalls
themselves, so a new pitfall is checked without a change here; a snippet that has all of a
pitfall's bad arguments does what it warns against, and the recommendation must say why.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache

from fsdp_skill.knowledge import Pitfall, pitfalls, torch_spec_allows
from fsdp_skill.lint.nodes import last_name

DEFAULT = "<default>"  # the argument is not passed
EXPR = "<expr>"  # passed, but not as a literal

Feature = tuple[str, str, str]  # (called name, keyword, value)


def _calls(code: str) -> dict[str, list[dict[str, str]]]:
    """Keyword arguments of every call in ``code``, by the called name (literals as repr)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    found: dict[str, list[dict[str, str]]] = defaultdict(list)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not (name := last_name(node.func)):
            continue
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is not None:
                value = kw.value
                kwargs[kw.arg] = repr(value.value) if isinstance(value, ast.Constant) else EXPR
        found[name].append(kwargs)
    return found


def _values(calls: list[dict[str, str]], keyword: str) -> set[str]:
    return {c.get(keyword, DEFAULT) for c in calls}


@cache
def bad_features(pitfall: Pitfall) -> frozenset[Feature]:
    """Arguments the pitfall's bad code passes (or leaves out) that its good code never does."""
    bad, good = _calls(pitfall.bad), _calls(pitfall.good)
    out = set()
    for name in bad.keys() & good.keys():
        keywords = {k for c in bad[name] + good[name] for k in c}
        for keyword in keywords:
            good_values = _values(good[name], keyword)
            # leaving an argument out is the mistake only where the good code sets it to a
            # literal (pin_memory=False); a computed value says nothing by itself
            set_literally = bool(good_values - {DEFAULT, EXPR})
            for value in _values(bad[name], keyword) - good_values:
                if value == EXPR or (value == DEFAULT and not set_literally):
                    continue
                out.add((name, keyword, value))
    return frozenset(out)


def matching(snippet: str, torch_version: str | None) -> list[Pitfall]:
    """The pitfalls whose bad arguments all appear in ``snippet`` (for that torch version)."""
    calls = _calls(snippet)
    found = []
    for pitfall in pitfalls():
        if not any(name in pitfall.bad for name in calls):
            continue  # cheap: most pitfalls call nothing the snippet calls
        features = bad_features(pitfall)
        if not features:
            continue
        if torch_version and not torch_spec_allows(pitfall.torch, torch_version):
            continue
        if all(
            name in calls and value in _values(calls[name], keyword)
            for name, keyword, value in features
        ):
            found.append(pitfall)
    return found
