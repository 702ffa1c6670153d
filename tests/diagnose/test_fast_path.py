"""``explain`` and ``hang`` never import torch: they must start fast on any machine.

Nor does ``hang`` import multiprocessing for logs small enough to read in one process.
"""

from __future__ import annotations

import subprocess
import sys

from tests.diagnose.synth import Fault, write_nccl

PROBE = """
import sys
from fsdp_skill.cli import main
try:
    main({args!r})
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {names!r})
print('HEAVY', heavy, file=sys.stderr)
"""


def _heavy_modules(
    args: list[str], names: tuple[str, ...] = ("torch", "transformers", "numpy")
) -> str:
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args, names=names)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.stderr.rsplit("HEAVY", 1)[1].strip()


def test_explain_does_not_import_torch():
    assert _heavy_modules(["explain", "--json", "Default process group has not been"]) == "[]"


def test_hang_does_not_import_torch(tmp_path):
    write_nccl(tmp_path, 3, Fault("missing", rank=1, seq=4))
    assert _heavy_modules(["hang", "--json", str(tmp_path)]) == "[]"


def test_hang_reads_small_logs_without_importing_multiprocessing(tmp_path):
    write_nccl(tmp_path, 3, Fault("missing", rank=1, seq=4))
    assert _heavy_modules(["hang", "--json", str(tmp_path)], ("multiprocessing",)) == "[]"
