#!/usr/bin/env python3
"""Rewrite src/fsdp_skill/knowledge/hf_fsdp_keys.toml from the installed accelerate and
transformers (run after changing their pins in requirements-test.txt)."""

from __future__ import annotations

import sys

from fsdp_skill.references import hf_keys


def main() -> int:
    path = hf_keys.write()
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
