"""Project-wide analysis stays inside the MCP server's roots: an imported module that is a
link to a file outside them is never read, so nothing found there can reach a finding."""

from __future__ import annotations

from pathlib import Path

from fsdp_skill.lint import lint_paths
from fsdp_skill.roots import Roots

TRAIN = """\
import torch.distributed as dist
from helpers import report

dist.init_process_group("gloo")
if dist.get_rank() == 0:
    report()
dist.destroy_process_group()
"""
HELPERS = """\
import torch
import torch.distributed as dist


def report():
    dist.all_reduce(torch.ones(1))
"""


def _project(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "helpers.py").write_text(HELPERS)
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "train.py").write_text(TRAIN)
    (root / "helpers.py").symlink_to(outside / "helpers.py")
    return root, outside


def test_a_linked_module_is_followed_without_roots(tmp_path):
    root, _ = _project(tmp_path)
    found = lint_paths([str(root / "train.py")])["findings"]
    assert [f["code"] for f in found] == ["FSDP003"]


def test_a_linked_module_outside_the_roots_is_never_read(tmp_path):
    root, _ = _project(tmp_path)
    result = lint_paths([str(root / "train.py")], roots=Roots.of([root]))
    assert [f["code"] for f in result["findings"]] == []
