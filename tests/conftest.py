import sys
from pathlib import Path

import pytest

# Let tests import the shared helpers in tests/ (e.g. `from tests.distributed import run_ranks`).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """Environment for a fake home folder: no agent executables on PATH, no config-folder
    overrides, so clients and their configs are looked for under that home only."""
    home = tmp_path / "home"
    home.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return {"HOME": str(home), "PATH": str(bin_dir), "XDG_CONFIG_HOME": "", "APPDATA": ""}
