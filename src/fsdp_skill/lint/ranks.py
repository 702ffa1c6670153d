"""Which expressions are this process's rank, and which ``if`` tests select some ranks only."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from fsdp_skill.lint.nodes import FOLLOW_DEPTH, constant, last_name

if TYPE_CHECKING:
    from fsdp_skill.lint.records import Func

_RANK_WORD = re.compile(r"^(?:[a-z0-9]+_)*rank(?:_?id|_?idx|_?\d+)?$", re.IGNORECASE)
_NOT_PROCESS_RANK = re.compile(r"^(?:lora|low|max|min|matrix|tensor|svd|adapter|target)_", re.I)
"""Ranks that are not a process's rank (LoRA rank, matrix rank)."""
_RANK_ENV = {"RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "ROLE_RANK", "SLURM_PROCID"}
_RANK_CALLS = {"get_rank", "get_local_rank", "get_node_local_rank", "get_global_rank"}
_RANK_FLAGS = {
    "is_main_process",
    "is_local_main_process",
    "is_main",
    "is_master",
    "is_local_master",
    "master_process",
    "main_process",
    "is_rank_zero",
    "is_rank0",
    "rank0",
    "rank_zero",
    "is_global_zero",
    "is_world_process_zero",
    "is_local_process_zero",
    "is_leader",
}


class RankQueries:
    """Rank questions the file model answers (mixed into ``FileModel``)."""

    def is_rank_expr(self, expr: ast.AST, func: Func, depth: int = 0) -> bool:
        """True if ``expr`` evaluates to this process's rank (or a function of it)."""
        if isinstance(expr, (ast.Name, ast.Attribute)):
            name = last_name(expr)
            if (
                name
                and _RANK_WORD.match(name)
                and not _NOT_PROCESS_RANK.match(name)
                and self.qualname(expr) is None
            ):
                return True
            if isinstance(expr, ast.Name) and depth < 2:
                return any(
                    a.value is not None and self.is_rank_expr(a.value, a.func, depth + 1)
                    for a in self.values_of(expr.id, func)
                )
            return False
        if isinstance(expr, ast.Call):
            name = last_name(expr.func)
            if name in _RANK_CALLS:
                return True
            if name in ("int", "str") and expr.args:
                return self.is_rank_expr(expr.args[0], func, depth)
            if name in ("get", "getenv") and expr.args:
                return constant(expr.args[0]) in _RANK_ENV
            return False
        if isinstance(expr, ast.Subscript):
            return constant(expr.slice) in _RANK_ENV
        if isinstance(expr, ast.BinOp):
            return self.is_rank_expr(expr.left, func, depth) or self.is_rank_expr(
                expr.right, func, depth
            )
        return False

    def is_rank_test(self, test: ast.AST, func: Func, depth: int = 0) -> bool:
        """True if an ``if`` test selects some ranks only (``rank == 0``, ``is_main_process``)."""
        if isinstance(test, ast.Compare):
            return any(self.is_rank_expr(e, func) for e in [test.left, *test.comparators])
        if isinstance(test, ast.BoolOp):
            return any(self.is_rank_test(v, func, depth) for v in test.values)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.is_rank_test(test.operand, func, depth)
        if isinstance(test, ast.Call):
            name = last_name(test.func)
            return name in _RANK_FLAGS
        if isinstance(test, (ast.Name, ast.Attribute)):
            name = last_name(test)
            if name and name.lower() in _RANK_FLAGS:
                return True
            if isinstance(test, ast.Name) and depth < 2:
                return any(
                    a.value is not None and self.is_rank_test(a.value, a.func, depth + 1)
                    for a in self.values_of(test.id, func)
                )
            if isinstance(test, ast.Name) or isinstance(test, ast.Attribute):
                return self.is_rank_expr(test, func)
        return False

    def mentions_rank(self, expr: ast.AST, func: Func, depth: int = 0) -> bool:
        """True if anything inside ``expr`` (following simple assignments) depends on the rank."""
        for node in ast.walk(expr):
            if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
                if self.is_rank_expr(node, func):
                    return True
            if isinstance(node, ast.IfExp) and self.is_rank_test(node.test, func):
                return True
            if isinstance(node, ast.Name) and depth < FOLLOW_DEPTH:
                for a in self.values_of(node.id, func):
                    if a.branch is not None:
                        return True
                    if a.value is not None and a.value is not expr:
                        if self.mentions_rank(a.value, a.func, depth + 1):
                            return True
        return False
