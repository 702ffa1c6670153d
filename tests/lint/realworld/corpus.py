"""The real-world lint corpus: fetch the pinned registry archives, lint the listed paths, and
compare the findings with the judged verdicts; and the GitHub-only part (``github.toml``),
whose files stay outside the repository and are linted again only when a local copy is given.

Used by ``tests/lint/test_realworld.py`` and ``benchmarks/lint_bench.py``. The archives land in
a cache outside the repository (``$FSDP_SKILL_CORPUS_CACHE``, default
``~/.cache/fsdp-skill/lint-corpus``); nothing of them is ever written into the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.toml"
VERDICTS = HERE / "verdicts.toml"
GITHUB = HERE / "github.toml"
GITHUB_CHECKOUT = "FSDP_SKILL_GITHUB_CORPUS"
"""Environment variable: a folder holding the GitHub files as ``<owner>__<repo>/<path>``."""


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    paths: tuple[str, ...]
    root: str = "."
    archive: str = "wheel"
    holdout: bool = False

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class Verdict:
    package: str
    path: str
    line: int
    code: str
    verdict: bool
    reason: str
    judged: str = "before"

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.package, self.path, self.line, self.code)


@dataclass(frozen=True)
class GithubFile:
    repo: str
    path: str
    commit: str
    url: str
    holdout: bool = False


@dataclass(frozen=True)
class GithubVerdict:
    repo: str
    path: str
    line: int
    code: str
    verdict: bool
    judged: str
    reason: str
    fixed: bool = False
    fixtures: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.repo, self.path, self.line, self.code)


class FetchError(RuntimeError):
    """An archive could not be downloaded or extracted."""


def packages() -> list[Package]:
    data = tomllib.loads(MANIFEST.read_text(encoding="utf-8"))
    return [
        Package(
            name=p["name"],
            version=p["version"],
            paths=tuple(p["paths"]),
            root=p.get("root", "."),
            archive=p.get("archive", "wheel"),
            holdout=p.get("holdout", False),
        )
        for p in data["package"]
    ]


def verdicts() -> list[Verdict]:
    data = tomllib.loads(VERDICTS.read_text(encoding="utf-8"))
    return [
        Verdict(
            v["package"],
            v["path"],
            v["line"],
            v["code"],
            v["verdict"] == "true",
            v["reason"],
            v.get("judged", "before"),
        )
        for v in data.get("verdict", [])
    ]


def github() -> tuple[list[GithubFile], list[GithubVerdict]]:
    """The GitHub-only files and the verdicts on their findings (``github.toml``)."""
    data = tomllib.loads(GITHUB.read_text(encoding="utf-8"))
    files = [
        GithubFile(f["repo"], f["path"], f["commit"], f["url"], f.get("holdout", False))
        for f in data.get("file", [])
    ]
    verdicts = [
        GithubVerdict(
            v["repo"],
            v["path"],
            v["line"],
            v["code"],
            v["verdict"] == "true",
            v["judged"],
            v["reason"],
            v.get("fixed", False),
            tuple(v.get("fixtures", ())),
        )
        for v in data.get("verdict", [])
    ]
    return files, verdicts


def github_checkout() -> Path | None:
    """The local copy of the GitHub files, if one is given (see ``GITHUB_CHECKOUT``)."""
    configured = os.environ.get(GITHUB_CHECKOUT)
    return Path(configured) if configured and Path(configured).is_dir() else None


def lint_github(checkout: Path, files: list[GithubFile]) -> list[dict]:
    """Findings on the local copy, one project per repository (its folder is the root)."""
    from fsdp_skill.lint import lint_paths

    out = []
    for repo in sorted({f.repo for f in files}):
        folder = checkout / repo.replace("/", "__")
        wanted = [folder / f.path for f in files if f.repo == repo]
        present = [str(p) for p in wanted if p.is_file()]
        if not present:
            continue
        result = lint_paths(present, project_root=str(folder))
        for f in result["findings"]:
            rel = Path(f["path"]).resolve().relative_to(folder.resolve()).as_posix()
            out.append({**f, "path": rel, "repo": repo})
    return out


def cache_dir() -> Path:
    configured = os.environ.get("FSDP_SKILL_CORPUS_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "fsdp-skill" / "lint-corpus"


def fetch(package: Package, cache: Path | None = None) -> Path:
    """The extracted archive's project root (downloaded and extracted on first use)."""
    cache = cache or cache_dir()
    dest = cache / "extracted" / f"{package.name}-{package.version}"
    if not dest.is_dir():
        archive = _download(package, cache / "archives")
        _extract(archive, dest)
    return dest / package.root


def _download(package: Package, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    found = _archive_in(package, folder)
    if found is not None:
        return found
    binary = ["--no-binary", ":all:"] if package.archive == "sdist" else ["--only-binary", ":all:"]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", *binary]
    command += ["--dest", str(folder), package.pin]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise FetchError(f"pip download {package.pin}: {done.stderr.strip()[-300:]}")
    found = _archive_in(package, folder)
    if found is not None:
        return found
    raise FetchError(f"pip download {package.pin}: no archive appeared")


def _archive_in(package: Package, folder: Path) -> Path | None:
    """The archive of this pin already in ``folder`` (names normalised as wheels spell them)."""
    prefix = f"{package.name}-{package.version}-".replace("-", "_").lower()
    plain = f"{package.name}-{package.version}.".replace("-", "_").lower()
    for existing in sorted(folder.iterdir()):
        name = existing.name.replace("-", "_").lower()
        if name.startswith((prefix, plain)):
            return existing
    return None


def _extract(archive: Path, dest: Path) -> None:
    """Extract aside, then rename into place (a half-extracted tree is never used)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix=".extract-", dir=dest.parent))
    try:
        if archive.suffix == ".whl" or archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as z:
                z.extractall(aside)
        else:
            with tarfile.open(archive) as t:
                t.extractall(aside, filter="data")
        os.replace(aside, dest)
    except BaseException:
        shutil.rmtree(aside, ignore_errors=True)
        raise


def lint_package(package: Package, root: Path) -> list[dict]:
    """Findings on the package's listed paths, with paths relative to its root."""
    from fsdp_skill.lint import lint_paths

    result = lint_paths([str(root / p) for p in package.paths], project_root=str(root))
    out = []
    for f in result["findings"]:
        rel = Path(f["path"]).resolve().relative_to(root.resolve()).as_posix()
        out.append({**f, "path": rel, "package": package.name})
    return out


def lines_of(package: Package, root: Path) -> int:
    return sum(
        (root / p).read_text(encoding="utf-8", errors="replace").count("\n") + 1
        for p in package.paths
    )
