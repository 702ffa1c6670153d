"""``show`` with an id no section could have: one short line, exit 2."""

from __future__ import annotations

import pytest

from tests.cli import fsdp


@pytest.mark.parametrize("section_id", ["a" * 60_000, "%_" * 30_000, "x#" * 200])
def test_an_overlong_id_is_a_one_line_error(section_id: str):
    result = fsdp("show", section_id, timeout=60)
    assert result.code == 2
    assert "Traceback" not in result.err
    (line,) = result.err.strip().splitlines()
    assert line.startswith("fsdp-skill: error: no section") and len(line) < 200
