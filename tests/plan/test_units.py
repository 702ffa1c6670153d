import pytest

from fsdp_skill.errors import UsageError
from fsdp_skill.plan.units import (
    format_bytes,
    format_count,
    parse_bandwidth,
    parse_bytes,
    parse_count,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7b", 7_000_000_000),
        ("70B", 70_000_000_000),
        ("1.3e9", 1_300_000_000),
        ("350M", 350_000_000),
        ("124439808", 124_439_808),
        ("1.5k", 1500),
        (" 2T ", 2 * 10**12),
    ],
)
def test_parse_count(text, expected):
    assert parse_count(text) == expected


@pytest.mark.parametrize("text", ["-7b", "0", "7x", "", "b", "7 bytes", "nan"])
def test_parse_count_rejects(text):
    with pytest.raises(UsageError):
        parse_count(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80GB", 80 * 10**9),
        ("80GiB", 80 * 2**30),
        ("24G", 24 * 10**9),
        ("80", 80 * 10**9),
        ("512MiB", 512 * 2**20),
        ("1.5TB", 1.5e12),
    ],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["80XB", "-80GB", "0GB", "GB", "eighty"])
def test_parse_bytes_rejects(text):
    with pytest.raises(UsageError):
        parse_bytes(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("50GB/s", 50e9), ("400Gbps", 50e9), ("400Gb/s", 50e9), ("25", 25e9), ("100MB/s", 1e8)],
)
def test_parse_bandwidth(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["fast", "0GB/s", "50XB/s", "-1Gbps"])
def test_parse_bandwidth_rejects(text):
    with pytest.raises(UsageError):
        parse_bandwidth(text)


def test_format():
    assert format_bytes(80e9) == "80.0 GB"
    assert format_bytes(512) == "512 B"
    assert format_count(6_738_415_616) == "6.74B"
