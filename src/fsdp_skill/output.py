"""Printing results: one JSON document under --json, readable text otherwise."""

from __future__ import annotations

import json
import sys
from typing import Any


def emit_json(data: Any) -> None:
    """Write ``data`` as the one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def echo(text: str = "", err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
