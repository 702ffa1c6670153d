"""The log readers of ``explain`` and ``hang`` take linear time on lines of any length.

Every regular expression the diagnose modules compile is checked by ``tests.linear_regex``
and timed on its worst megabyte lines; then the real commands run on such lines, within a
time limit, as a user would feed them a hostile or broken log.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import time
from pathlib import Path

import pytest

import fsdp_skill.diagnose as diagnose
from tests.cli import fsdp
from tests.knowledge.test_signatures_linear import LIMIT_S, deadline
from tests.linear_regex import risks, worst_inputs


def _patterns() -> list[tuple[str, re.Pattern]]:
    found = []
    for module in pkgutil.iter_modules(diagnose.__path__):
        loaded = importlib.import_module(f"{diagnose.__name__}.{module.name}")
        for name, value in vars(loaded).items():
            if isinstance(value, re.Pattern):
                found.append((f"{module.name}.{name}", value))
    return found


PATTERNS = _patterns()


def _text(pattern: re.Pattern) -> str:
    source = pattern.pattern
    return source.decode("latin-1") if isinstance(source, bytes) else source


def test_the_parsers_are_found():
    assert len(PATTERNS) >= 15


@pytest.mark.parametrize(("name", "pattern"), PATTERNS, ids=[n for n, _ in PATTERNS])
def test_parser_cannot_backtrack(name, pattern):
    assert risks(_text(pattern), pattern.flags & ~re.UNICODE) == [], name


@pytest.mark.parametrize(("name", "pattern"), PATTERNS, ids=[n for n, _ in PATTERNS])
def test_parser_is_fast_on_its_worst_lines(name, pattern):
    flags = pattern.flags & ~re.UNICODE
    for case, line in worst_inputs(_text(pattern), flags=flags).items():
        subject = line.encode("latin-1", "replace") if isinstance(pattern.pattern, bytes) else line
        started = time.perf_counter()
        with deadline(LIMIT_S):
            for _ in pattern.finditer(subject):
                pass
        assert time.perf_counter() - started < LIMIT_S, f"{name}: {case}"


MEGABYTE_LINES = {
    "nccl-error": "NCCL error in: " * 70_000,
    "exitcode": "  exitcode  : " * 80_000,
    "fingerprint": "CollectiveFingerPrint(SequenceNumber=1, OpType=X, TensorShape=[" * 16_000,
    "nccl-init": "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 commId 0x1 " * 18_000 + "Init",
    "host-run": "gpu-node" * 130_000 + " NCCL INFO AllReduce: opCount 1",
    "breaks": "\n" * 1_000_000 + "exitcode",
}


@pytest.mark.parametrize("case", sorted(MEGABYTE_LINES))
def test_explain_and_hang_on_megabyte_lines(tmp_path: Path, case: str):
    log = tmp_path / "rank0.log"
    log.write_text(MEGABYTE_LINES[case] + "\n")
    for command in (("explain", "--file", str(log)), ("hang", str(log))):
        started = time.monotonic()
        result = fsdp(*command, "--json", timeout=60)
        elapsed = time.monotonic() - started
        assert "Traceback" not in result.err, result.err[-2000:]
        assert elapsed < 20, f"{command[0]} took {elapsed:.1f} s on {case}"
