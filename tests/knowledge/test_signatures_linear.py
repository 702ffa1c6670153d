"""Every error signature runs in linear time on text of any length.

``explain`` searches each signature through whole logs, lines of a megabyte included. The
guard reads each signature's structure (``tests.linear_regex``: no repeat of a group, every
unbounded repeat fenced off from the text before it); the timed test feeds each signature
the lines that hurt a backtracking pattern most, a megabyte each, under a time limit.
"""

from __future__ import annotations

import re
import signal
import time
from contextlib import contextmanager

import pytest

from fsdp_skill import knowledge
from tests.linear_regex import risks, worst_inputs

SIGNATURES = [(p.id, s) for p in knowledge.pitfalls() for s in p.signatures]
LIMIT_S = 2.0
"""Per megabyte line; a linear signature takes milliseconds, a quadratic one minutes."""


@contextmanager
def deadline(seconds: float):
    """Interrupt the block after ``seconds`` (the regex engine checks for signals)."""

    def expire(*_):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(
    ("pitfall", "signature"), SIGNATURES, ids=[f"{p}:{s}" for p, s in SIGNATURES]
)
def test_signature_cannot_backtrack(pitfall, signature):
    assert risks(signature, re.MULTILINE) == [], (
        f"{pitfall}: signature {signature!r} may take quadratic time or worse on long lines "
        "(see the README's pitfall table, row `signatures`)"
    )


@pytest.mark.parametrize(
    ("pitfall", "signature"), SIGNATURES, ids=[f"{p}:{s}" for p, s in SIGNATURES]
)
def test_signature_is_fast_on_its_worst_lines(pitfall, signature):
    pattern = re.compile(signature, re.MULTILINE)
    for name, line in worst_inputs(signature, flags=re.MULTILINE).items():
        started = time.perf_counter()
        with deadline(LIMIT_S):
            for _ in pattern.finditer(line):
                pass
        assert time.perf_counter() - started < LIMIT_S, f"{pitfall}: {name}"


# The checker itself: what it must flag, and the near misses it must let through.
QUADRATIC = [
    "NCCL error in: .*invalid usage",  # the signature of issue 15, as it was
    r"^\s*exitcode",  # \s crosses line breaks: every line start rescans the rest
    r"in its \d+\w* output",
    r"(a+)+b",
    r"(?:\w+\s?)*x",
    r"\d+ items",  # starts with its repeat: every digit is a start
    r"x.*y.*z",
    r"a[^,]*,[^,]*b",  # the lead `a` is inside [^,]
    r".*a\d+b.*c",  # each `a1b` the first repeat gives back restarts the last one
]
LINEAR = [
    r"NCCL error in: \S+, invalid usage",
    r"^[ \t]*exitcode\s*:\s*-?\d+",
    r"in its \d+[a-z]* output",
    r"Timed out waiting \d+ms for (?:send|recv) operation",
    r"not_none\(dm\.mesh_dim_names\)[\s\S]{0,400}?Invariant",
    r"Input type \(\S+\) and (?:weight|bias) type \(\S+\) should",
    r"size mismatch for \S+: copying",
    r"x\.*",  # a repeat with nothing after it to fail
]


@pytest.mark.parametrize("pattern", QUADRATIC)
def test_checker_flags_backtracking_patterns(pattern):
    assert risks(pattern, re.MULTILINE)


@pytest.mark.parametrize("pattern", LINEAR)
def test_checker_passes_fenced_patterns(pattern):
    assert risks(pattern, re.MULTILINE) == []


def test_worst_lines_do_hurt_the_old_signature():
    """The timed test would catch the signature issue 15 found: on a quarter megabyte its
    worst line already takes far longer than the fenced signature on a whole megabyte."""
    old = re.compile("NCCL error in: .*invalid usage", re.MULTILINE)
    line = next(iter(worst_inputs(old.pattern, size=1 << 16).values()))
    started = time.perf_counter()
    with pytest.raises(TimeoutError), deadline(LIMIT_S / 4):
        old.search(line * 4)
    assert time.perf_counter() - started >= LIMIT_S / 4 * 0.9
