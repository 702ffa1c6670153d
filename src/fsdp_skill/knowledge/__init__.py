"""The knowledge: guides, pitfalls and environment variables, stored as data files.

Layout (the format is documented in the README's contributor section):

- ``guides/<id>.md``: one topic each; TOML front matter between ``+++`` lines, then Markdown
  whose ``##`` headings are the searchable sections.
- ``pitfalls/<id>.toml``: one pitfall each (symptom, cause, fix, bad and good code, error
  signatures, lint code, links, torch versions).
- ``env_vars.toml``: ``[[var]]`` tables, one per environment variable.
- ``symbols.toml``: ``[[symbol]]`` tables for torch names that exist only in some versions.

Loading needs only the standard library (and ``tomli`` before Python 3.11): the fast-path
tools read this module without importing torch.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from fsdp_skill.markdown import split_front_matter

KNOWLEDGE_DIR = Path(__file__).parent
PITFALLS_DIR = KNOWLEDGE_DIR / "pitfalls"
RUN_MODES = ("ws=1", "ws=2", "ws=4", "gpu", "snippet")
"""How a Python block is tested: run at world size N on CPU/gloo, or only compiled and
symbol-checked (``gpu``: needs a GPU; ``snippet``: a fragment, e.g. the bad code of a pitfall)."""

_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class KnowledgeError(ValueError):
    """A knowledge file breaks the format."""


@dataclass(frozen=True)
class Guide:
    id: str
    title: str
    summary: str
    body: str
    path: Path
    body_line: int
    links: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    torch: str = ">=2.0"
    versions: tuple[dict, ...] = ()
    """Version facts: ``{api, since, until, source}``."""


@dataclass(frozen=True)
class Pitfall:
    id: str
    title: str
    severity: str
    category: str
    symptom: str
    cause: str
    fix: str
    bad: str
    good: str
    links: tuple[str, ...]
    torch: str
    path: Path
    lint: str = ""
    signatures: tuple[str, ...] = ()
    signature_source: str = ""
    bad_mode: str = "snippet"
    good_mode: str = "snippet"
    tags: tuple[str, ...] = ()
    hang_verdicts: tuple[str, ...] = ()
    code_lang: str = "python"
    """The language of ``bad`` and ``good``: ``python``, or ``yaml``/``json`` for a config."""
    extra: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class EnvVar:
    name: str
    backend: str
    what: str
    values: str
    when: str
    since: str
    source: str
    shows: str = ""


_PITFALL_REQUIRED = (
    "id",
    "title",
    "severity",
    "category",
    "symptom",
    "cause",
    "fix",
    "bad",
    "good",
    "links",
    "torch",
)
_PITFALL_OPTIONAL = (
    "lint",
    "signatures",
    "signature_source",
    "bad_mode",
    "good_mode",
    "tags",
    "hang_verdicts",
    "code_lang",
)
CODE_LANGS = ("python", "yaml", "json")
SEVERITIES = ("error", "warning")
CATEGORIES = ("hang", "oom", "correctness", "performance", "checkpoint", "setup", "crash")


def _load_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise KnowledgeError(f"{path}: {exc}") from None


def load_pitfall(path: Path) -> Pitfall:
    """Read and check one pitfall file."""
    data = _load_toml(path)
    missing = [k for k in _PITFALL_REQUIRED if not data.get(k)]
    if missing:
        raise KnowledgeError(f"{path}: missing {', '.join(missing)}")
    unknown = set(data) - set(_PITFALL_REQUIRED) - set(_PITFALL_OPTIONAL) - {"extra"}
    if unknown:
        raise KnowledgeError(f"{path}: unknown keys {', '.join(sorted(unknown))}")
    if data["id"] != path.stem or not _ID.match(data["id"]):
        raise KnowledgeError(f"{path}: id must be kebab-case and equal the file name")
    if data["severity"] not in SEVERITIES or data["category"] not in CATEGORIES:
        raise KnowledgeError(f"{path}: severity in {SEVERITIES}, category in {CATEGORIES}")
    for key in ("bad_mode", "good_mode"):
        if data.get(key, "snippet") not in RUN_MODES:
            raise KnowledgeError(f"{path}: {key} must be one of {RUN_MODES}")
    if data.get("code_lang", "python") not in CODE_LANGS:
        raise KnowledgeError(f"{path}: code_lang must be one of {CODE_LANGS}")
    if data.get("lint") and not re.fullmatch(r"FSDP\d{3}", data["lint"]):
        raise KnowledgeError(f"{path}: lint must look like FSDP001")
    if data.get("signatures") and not data.get("signature_source"):
        raise KnowledgeError(f"{path}: signatures need a signature_source")
    tuples = {k: tuple(data.get(k, ())) for k in ("links", "signatures", "tags", "hang_verdicts")}
    scalars = {k: v for k, v in data.items() if k not in tuples}
    return Pitfall(path=path, **scalars, **tuples)


def load_guide(path: Path) -> Guide:
    """Read and check one guide file."""
    text = path.read_text(encoding="utf-8")
    try:
        front, body, body_line = split_front_matter(text, "+++")
    except ValueError as exc:
        raise KnowledgeError(f"{path}: {exc}") from None
    try:
        meta = tomllib.loads(front)
    except tomllib.TOMLDecodeError as exc:
        raise KnowledgeError(f"{path}: front matter: {exc}") from None
    for key in ("id", "title", "summary", "links"):
        if not meta.get(key):
            raise KnowledgeError(f"{path}: front matter lacks {key}")
    if meta["id"] != path.stem or not _ID.match(meta["id"]):
        raise KnowledgeError(f"{path}: id must be kebab-case and equal the file name")
    return Guide(
        id=meta["id"],
        title=meta["title"],
        summary=meta["summary"],
        body=body,
        path=path,
        body_line=body_line,
        links=tuple(meta["links"]),
        tags=tuple(meta.get("tags", ())),
        torch=meta.get("torch", ">=2.0"),
        versions=tuple(meta.get("versions", ())),
    )


@lru_cache(maxsize=1)
def pitfalls() -> tuple[Pitfall, ...]:
    """All pitfalls, sorted by id."""
    return tuple(load_pitfall(p) for p in sorted(PITFALLS_DIR.glob("*.toml")))


@lru_cache(maxsize=1)
def guides() -> tuple[Guide, ...]:
    """All guides, sorted by id."""
    return tuple(load_guide(p) for p in sorted((KNOWLEDGE_DIR / "guides").glob("*.md")))


@lru_cache(maxsize=1)
def env_vars() -> tuple[EnvVar, ...]:
    """All environment variables, in file order."""
    path = KNOWLEDGE_DIR / "env_vars.toml"
    if not path.exists():
        return ()
    return load_env_vars(path)


_ENV_REQUIRED = ("name", "backend", "what", "values", "when", "since", "source")


def load_env_vars(path: Path) -> tuple[EnvVar, ...]:
    """Read and check an env-var file: ``[[var]]`` tables with the ``EnvVar`` fields."""
    found: list[EnvVar] = []
    for index, entry in enumerate(_load_toml(path).get("var", []), start=1):
        label = f"{path}: var {index} ({entry.get('name', '?')})"
        missing = [k for k in _ENV_REQUIRED if not str(entry.get(k, "")).strip()]
        if missing:
            raise KnowledgeError(f"{label}: missing {', '.join(missing)}")
        unknown = set(entry) - set(_ENV_REQUIRED) - {"shows"}
        if unknown:
            raise KnowledgeError(f"{label}: unknown keys {', '.join(sorted(unknown))}")
        if any(v.name == entry["name"] for v in found):
            raise KnowledgeError(f"{label}: {entry['name']} is described twice")
        found.append(EnvVar(**entry))
    return tuple(found)


@lru_cache(maxsize=1)
def versioned_symbols() -> dict[str, dict]:
    """Torch names that exist only in some versions: ``{name: {since, until, source}}``."""
    path = KNOWLEDGE_DIR / "symbols.toml"
    if not path.exists():
        return {}
    return {entry["name"]: entry for entry in _load_toml(path).get("symbol", [])}


@lru_cache(maxsize=1)
def hf_fsdp_keys() -> dict:
    """The Hugging Face FSDP configuration keys mined from accelerate and transformers:
    ``{"versions", "plugin", "accelerate_config", "trainer_fsdp_config"}`` (see the file's
    header; written by ``scripts/mine_hf_keys.py``)."""
    return _load_toml(KNOWLEDGE_DIR / "hf_fsdp_keys.toml")


def pitfall(pitfall_id: str) -> Pitfall | None:
    return next((p for p in pitfalls() if p.id == pitfall_id), None)


@cache
def pitfall_alone(pitfall_id: str) -> Pitfall | None:
    """``pitfall(pitfall_id)``, reading only that pitfall's file unless all are read already
    (``explain`` needs the few that matched)."""
    if pitfalls.cache_info().currsize or not _ID.match(pitfall_id):
        return pitfall(pitfall_id)
    path = PITFALLS_DIR / f"{pitfall_id}.toml"
    return load_pitfall(path) if path.is_file() else None


def pitfall_for_lint(code: str) -> Pitfall | None:
    return next((p for p in pitfalls() if p.lint == code), None)


def installed_torch_version() -> str | None:
    """The installed torch's version (``2.13.0+cpu``), or None, without importing torch.

    Read from ``torch/version.py``, found by the import system's path search: importing
    ``importlib.metadata`` alone costs tens of milliseconds, which ``explain``'s cold start
    cannot spend; the package metadata is the fallback.
    """
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        try:
            text = (Path(folder) / "version.py").read_text(encoding="utf-8")
        except OSError:
            continue
        found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
        if found:
            return found.group(1)
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def version_tuple(version: str) -> tuple[int, ...]:
    """``"2.13.0+cpu"`` -> ``(2, 13, 0)``."""
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+")[0])[:3])


_TORCH_CLAUSE = re.compile(r"^(>=|<)\s*(\d+(?:\.\d+)*)$")


def torch_spec_allows(spec: str, version: str) -> bool:
    """Whether torch ``version`` lies in a pitfall's ``torch`` range (``">=2.4"``, ``"<2.12"``,
    or both joined by a comma), as :func:`in_range` compares. An empty spec, or a clause it
    cannot read, allows any version."""
    bounds = {">=": "", "<": ""}
    for clause in spec.split(","):
        match = _TORCH_CLAUSE.match(clause.strip())
        if match:
            bounds[match.group(1)] = match.group(2)
    return in_range(version, since=bounds[">="], until=bounds["<"])


def in_range(version: str, since: str = "", until: str = "") -> bool:
    """True if ``since <= version < until`` (either bound may be empty)."""
    v = version_tuple(version)
    if since and v < version_tuple(since):
        return False
    return not (until and v >= version_tuple(until))
