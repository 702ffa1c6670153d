#!/usr/bin/env python3
"""Rewrite src/fsdp_skill/knowledge/hf_fsdp_keys.toml and hf_model_classes.json from the
installed accelerate, transformers and torch (run after changing their pins in
requirements-test.txt)."""

from __future__ import annotations

import sys

from fsdp_skill.references import hf_keys, hf_models


def main() -> int:
    for path in (hf_keys.write(), hf_models.write()):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
