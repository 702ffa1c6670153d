"""The .gitignore matcher used when lint walks folders."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from fsdp_skill.lint.gitignore import GitIgnore
from tests.cli import fsdp

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


# --- the same verdicts as git itself ------------------------------------------------------

GIT_PATTERNS = [
    "*.py",
    "a*b*c.py",
    "**/cache",
    "docs/**",
    "docs/**/gen_*.py",
    "/top.py",
    "src/*.py",
    "[!a]*.py",
    "[a-c]?.py",
    "\\*.py",
    "te?t.py",
    "*" * 100,
    "a" + "*a" * 30 + "*b.py",
    "**/**/**/deep.py",
    "x/**/y/**/z.py",
    "build/",
    "*.py\n!keep.py",
]
GIT_PATHS = [
    "top.py",
    "keep.py",
    "abc.py",
    "axbxc.py",
    "b1.py",
    "test.py",
    "*.py",
    "src/top.py",
    "src/deep/top.py",
    "docs/readme.md",
    "docs/a/b/gen_x.py",
    "docs/gen_y.py",
    "a/b/cache/file.py",
    "cache/file.py",
    "x/y/z.py",
    "x/1/2/y/3/z.py",
    "one/two/three/deep.py",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab.py",
    "build/out.py",
]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("rules", GIT_PATTERNS, ids=range(len(GIT_PATTERNS)))
def test_verdicts_match_git_check_ignore(tmp_path: Path, rules: str):
    """``git check-ignore`` is the reference: same verdict for every path whose folders are
    not ignored themselves (git never looks inside an ignored folder, nor does lint)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text(rules + "\n")
    for rel in GIT_PATHS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "-v", "-n", "--stdin"],
        cwd=tmp_path,
        input="\n".join(GIT_PATHS) + "\n",
        capture_output=True,
        text=True,
    )
    git = {}
    for line in done.stdout.splitlines():
        source, path = line.split("\t")
        pattern = source.split(":", 2)[2]
        git[path] = None if not pattern else not pattern.startswith("!")
    ours = GitIgnore(tmp_path, rules)
    for rel in GIT_PATHS:
        parents = Path(rel).parents
        if any(ours.ignored(tmp_path / p, True) for p in list(parents)[:-1]):
            continue
        assert ours.ignored(tmp_path / rel, False) == git[rel], (rules, rel)


@pytest.mark.parametrize(
    ("rules", "name"),
    [
        ("*" * 100, "x" * 200),
        ("*" * 100 + "z", "x" * 4000),
        ("a" + "*a" * 50 + "*b", "a" * 4000),
        ("**/" * 60 + "deep.py", "/".join(["d"] * 400)),
        ("[ab]*" * 40 + "c", "ab" * 2000),
    ],
    ids=["stars", "stars-then-z", "a-star-runs", "deep-segments", "classes"],
)
def test_worst_patterns_take_linear_time(rules: str, name: str):
    ignore = GitIgnore(BASE, rules)
    started = time.perf_counter()
    ignore.ignored(BASE / name, False)
    assert time.perf_counter() - started < 1.0


def test_lint_of_a_folder_with_a_line_of_stars_finishes(tmp_path: Path):
    """A pattern of a hundred ``*`` that does not match: a regex translation backtracks
    through every way of splitting the name among the stars."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("*" * 100 + "x.py\n")
    (tmp_path / ("training_script_" * 4 + ".py")).write_text("x = 1\n")
    (tmp_path / ("data_folder_" * 4)).mkdir()
    result = fsdp("lint", "--format", "json", str(tmp_path), timeout=30)
    assert result.code == 0, result.err
    assert result.json()["files"] == 1
