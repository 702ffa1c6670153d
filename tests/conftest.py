import sys
from pathlib import Path

# Let tests import the shared helpers in tests/ (e.g. `from tests.distributed import run_ranks`).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
