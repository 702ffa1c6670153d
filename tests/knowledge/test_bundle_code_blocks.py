"""Every Python block the bundle ships is either run (CPU, gloo) or compiled and symbol-checked.

A block's run mode is the word after ``python`` in its fence: ``ws=1|2|4`` runs it as a script
under torchrun at that world size and expects exit 0; ``gpu`` and ``snippet`` compile it and
check that every torch name it uses resolves in the installed torch. A block with no mode fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fsdp_skill import markdown, symbols
from fsdp_skill.bundle_files import BUNDLE_DIR
from fsdp_skill.knowledge import RUN_MODES
from tests.distributed import run_ranks


def _blocks() -> list[tuple[str, markdown.CodeBlock]]:
    found = []
    for md in sorted(BUNDLE_DIR.rglob("*.md")):
        rel = md.relative_to(BUNDLE_DIR).as_posix()
        for block in markdown.code_blocks(md.read_text(encoding="utf-8")):
            if block.language in ("python", "py"):
                found.append((rel, block))
    return found


BLOCKS = _blocks()
RUNNABLE = [(rel, b) for rel, b in BLOCKS if b.tags and b.tags[0].startswith("ws=")]
COMPILED = [(rel, b) for rel, b in BLOCKS if not (b.tags and b.tags[0].startswith("ws="))]


def _id(item: tuple[str, markdown.CodeBlock]) -> str:
    return f"{item[0]}:{item[1].line}"


@pytest.mark.parametrize("item", BLOCKS, ids=[_id(i) for i in BLOCKS])
def test_block_has_a_run_mode(item):
    rel, block = item
    assert block.tags and block.tags[0] in RUN_MODES, (
        f"{rel}:{block.line}: a Python block needs a run mode after the language, "
        f"one of {RUN_MODES}"
    )


@pytest.mark.parametrize("item", COMPILED, ids=[_id(i) for i in COMPILED])
def test_compiled_block_parses_and_names_resolve(item):
    rel, block = item
    compile(block.code, f"{rel}:{block.line}", "exec")
    unresolved = [
        name
        for _, name in symbols.longest_names(symbols.names_in_code(block.code))
        if not symbols.resolve(name)
    ]
    assert not unresolved, f"{rel}:{block.line}: torch names that do not resolve: {unresolved}"


_DEPRECATED = re.compile(r"FutureWarning: (`?torch\.[\w.]+`? is deprecated[^\n]*)")
"""A torch API the example calls warns that it is deprecated: users copy the example as is."""


def _deprecated_names(code: str) -> dict[str, str]:
    """``{name: message}`` for the names in ``code`` that the installed torch deprecates."""
    found = {}
    for _, name in symbols.longest_names(symbols.names_in_code(code)):
        message = symbols.deprecation(name)
        if message:
            found[name] = message
    return found


@pytest.mark.parametrize("item", BLOCKS, ids=[_id(i) for i in BLOCKS])
def test_block_names_nothing_the_installed_torch_deprecates(item):
    """Users copy examples as they are: a GPU-only block is never run here, so its names are
    checked for the deprecation torch marks on them."""
    rel, block = item
    deprecated = _deprecated_names(block.code)
    assert not deprecated, f"{rel}:{block.line}: deprecated in the installed torch: {deprecated}"


@pytest.mark.slow
@pytest.mark.parametrize("item", RUNNABLE, ids=[_id(i) for i in RUNNABLE])
def test_runnable_block_runs(item, tmp_path: Path):
    rel, block = item
    world_size = int(block.tags[0].removeprefix("ws="))
    script = tmp_path / "example.py"
    script.write_text(block.code, encoding="utf-8")
    # torch announces a public API's deprecation with a FutureWarning: show those, not the rest
    shown = {"PYTHONWARNINGS": "ignore,default::FutureWarning"}
    result = run_ranks(script, world_size, timeout=180, cwd=tmp_path, env=shown)
    assert result.returncode == 0, (
        f"{rel}:{block.line} failed at world size {world_size} (exit {result.returncode})\n"
        f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-6000:]}"
    )
    deprecated = sorted(set(_DEPRECATED.findall(result.stderr)))
    assert not deprecated, (
        f"{rel}:{block.line} calls what the installed torch deprecates: {deprecated}"
    )


def test_the_deprecation_check_sees_what_torch_marks_deprecated():
    code = "import torch.distributed as dist\ndist.all_gather_into_tensor(out, inp)\n"
    assert list(_deprecated_names(code)) == ["torch.distributed.all_gather_into_tensor"]
    assert "all_gather_single" in symbols.deprecation("torch.distributed.all_gather_into_tensor")
    assert symbols.deprecation("torch.distributed.all_gather_single") is None
    assert symbols.deprecation("torch.no_such_name") is None


SHIPPED_PY = sorted(BUNDLE_DIR.rglob("*.py"))


@pytest.mark.parametrize(
    "path", SHIPPED_PY, ids=[p.relative_to(BUNDLE_DIR).as_posix() for p in SHIPPED_PY]
)
def test_shipped_python_names_nothing_the_installed_torch_deprecates(path):
    """The project template and the bundled scripts are copied as they are, too."""
    deprecated = _deprecated_names(path.read_text(encoding="utf-8"))
    assert not deprecated, f"{path.name}: deprecated in the installed torch: {deprecated}"
