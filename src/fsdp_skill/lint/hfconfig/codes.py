"""The config checks' codes, importable without loading the checks (lint's code options are
validated on every run)."""

from __future__ import annotations

CONFIG_CODES = tuple(f"FSDP{n:03d}" for n in range(101, 112))
