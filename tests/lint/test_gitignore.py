"""The .gitignore matcher used when lint walks folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsdp_skill.lint.gitignore import GitIgnore

BASE = Path("/repo")
RULES = """
# comment
*.log
/build/
docs/**/gen_*.py
**/cache
!important.log
tmp?/
[ab]_*.py
"""


@pytest.mark.parametrize(
    ("rel", "is_dir", "ignored"),
    [
        ("x.log", False, True),
        ("deep/x.log", False, True),
        ("important.log", False, False),
        ("build", True, True),
        ("src/build", True, None),  # anchored: only at the root
        ("build", False, None),  # folder-only pattern, and this is a file
        ("docs/a/b/gen_x.py", False, True),
        ("docs/gen_x.py", False, True),
        ("src/gen_x.py", False, None),
        ("a/b/cache", True, True),
        ("tmp1", True, True),
        ("tmp12", True, None),
        ("a_train.py", False, True),
        ("c_train.py", False, None),
        ("train.py", False, None),
    ],
)
def test_patterns(rel: str, is_dir: bool, ignored: bool | None):
    assert GitIgnore(BASE, RULES).ignored(BASE / rel, is_dir) is ignored


def test_paths_outside_the_base_are_undecided():
    assert GitIgnore(BASE, "*.py").ignored(Path("/elsewhere/a.py"), False) is None
