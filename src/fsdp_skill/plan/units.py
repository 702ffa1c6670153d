"""Parse and format the sizes people type: parameter counts, bytes, bandwidths."""

from __future__ import annotations

import math
import re

from fsdp_skill.errors import UsageError

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_COUNT = re.compile(rf"^\s*{_NUMBER}\s*([a-zA-Z]*)\s*$")
_COUNT_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_BYTE_SUFFIX = {
    "": 1e9,  # a bare number is read as gigabytes: "--gpu-memory 80"
    "b": 1,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "k": 1e3,
    "m": 1e6,
    "g": 1e9,
    "t": 1e12,
}
_RATE = re.compile(rf"^\s*{_NUMBER}\s*([a-zA-Z]*?)\s*(/s|ps)?\s*$")
_RATE_SUFFIX = {
    # bytes per second
    "": 1e9,  # a bare number is read as GB/s
    "B": 1,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "GiB": 2**30,
    # bits per second (network links are sold in bits)
    "b": 1 / 8,
    "Kb": 1e3 / 8,
    "Mb": 1e6 / 8,
    "Gb": 1e9 / 8,
    "Tb": 1e12 / 8,
}


MAX_COUNT = 1e15
"""The largest parameter count read (a quadrillion: a thousand times the largest models)."""
MAX_BYTES = 1e18
"""The largest memory size read (an exabyte)."""
MAX_RATE = 1e15
"""The largest bandwidth read (a petabyte per second)."""


def _in_range(value: float | int, text: object, what: str, most: float) -> float:
    """``value`` as a finite float in (0, ``most``]; UsageError (one line) otherwise."""
    shown = _shown(text)
    try:
        number = float(value)
    except OverflowError:  # an int with hundreds of digits
        number = math.inf
    if math.isnan(number) or not number > 0:
        raise UsageError(f"{what} must be greater than zero, got {shown}")
    if number > most:
        raise UsageError(f"{what} {shown} is out of range (at most {most:.0e})")
    return number


def _shown(text: object) -> str:
    shown = repr(text) if isinstance(text, str) else str(text)
    return shown if len(shown) <= 40 else shown[:39] + "…"


def parse_count(text: str | int | float, what: str = "parameter count") -> int:
    """A count such as ``7b``, ``70B``, ``1.3e9``, ``350M`` or ``124439808``, as an int."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(_in_range(text, text, what, MAX_COUNT))
    match = _COUNT.match(str(text))
    if not match or match.group(2).lower() not in _COUNT_SUFFIX:
        raise UsageError(
            f"cannot read {what} {_shown(text)}: use a number like 7b, 70B, 1.3e9 or 350M"
        )
    value = float(match.group(1)) * _COUNT_SUFFIX[match.group(2).lower()]
    return int(round(_in_range(value, text, what, MAX_COUNT)))


def parse_flops(text: str | int | float, what: str = "FLOP/s") -> float:
    """A compute rate such as ``989TFLOPS``, ``989T``, ``1.979e15`` or a bare ``989``
    (under a million: TFLOP/s), in FLOP/s."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(parse_count(text, what))
    cleaned = re.sub(r"\s*flop(s|/s)?\s*$", "", str(text).strip(), flags=re.IGNORECASE)
    if re.fullmatch(r"[0-9]*\.?[0-9]+", cleaned) and float(cleaned) < 1e6:
        cleaned += "t"  # a bare small number is read as TFLOP/s
    try:
        return float(parse_count(cleaned, what))
    except UsageError:
        raise UsageError(
            f"cannot read {what} {text!r}: use a rate like 989TFLOPS, 989T or 9.89e14"
        ) from None


def parse_bytes(text: str | int | float, what: str = "memory size") -> int:
    """A size such as ``80GB`` (10^9), ``80GiB`` (2^30) or a bare ``80`` (gigabytes), in bytes."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(_in_range(text, text, what, MAX_BYTES))
    match = _COUNT.match(str(text))
    if not match or match.group(2).lower() not in _BYTE_SUFFIX:
        raise UsageError(f"cannot read {what} {_shown(text)}: use a size like 80GB, 80GiB or 24G")
    value = float(match.group(1)) * _BYTE_SUFFIX[match.group(2).lower()]
    return int(_in_range(value, text, what, MAX_BYTES))


def parse_bandwidth(text: str | int | float, what: str = "bandwidth") -> float:
    """A rate such as ``50GB/s``, ``400Gbps``, ``400Gb/s`` or a bare ``50`` (GB/s), in bytes/s.

    Capital ``B`` means bytes, small ``b`` bits, as network links are quoted.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _in_range(text, text, what, MAX_RATE)
    match = _RATE.match(str(text))
    if not match or match.group(2) not in _RATE_SUFFIX:
        raise UsageError(
            f"cannot read {what} {_shown(text)}: use a rate like 50GB/s, 400Gbps or 400Gb/s"
        )
    return _in_range(float(match.group(1)) * _RATE_SUFFIX[match.group(2)], text, what, MAX_RATE)


def format_bytes(value: float) -> str:
    """``12.3 GB`` style text for a byte count (decimal units, as GPU sizes are quoted)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{int(value)} B"


def format_count(value: float) -> str:
    """``6.74B`` style text for a parameter count."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{unit}"
    return str(int(value))


def format_seconds(value: float) -> str:
    """``1.23 s`` or ``45 ms``."""
    return f"{value:.2f} s" if value >= 1 else f"{value * 1000:.0f} ms"
