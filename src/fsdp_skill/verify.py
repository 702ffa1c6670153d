"""Check a skill bundle: front matter, size budget, links, code blocks and torch names.

The front-matter checks follow the Agent Skills reference validator (``skills-ref``); the
body budget and the torch-name checks are this project's own rules.
"""

from __future__ import annotations

import ast
import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from fsdp_skill import locking, markdown, symbols
from fsdp_skill.bundle_files import BUNDLE_DIR
from fsdp_skill.textfile import Unreadable, read_text

ALLOWED_FIELDS = {"name", "description", "license", "allowed-tools", "metadata", "compatibility"}
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_BODY_LINES = 500
MAX_BODY_CHARS = 20_000


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    message: str

    def as_dict(self) -> dict:
        return {"path": self.path, "line": self.line, "message": self.message}


def check_front_matter(meta: object, skill_dir: Path) -> list[str]:
    """The reference validator's checks of a parsed front matter, as messages."""
    if not isinstance(meta, dict):
        return ["front matter must be a YAML mapping"]
    errors = []
    extra = set(meta) - ALLOWED_FIELDS
    if extra:
        errors.append(f"unexpected front matter fields: {', '.join(sorted(map(str, extra)))}")
    name = meta.get("name")
    if not isinstance(name, str) or not name.strip():
        errors.append("field 'name' must be a non-empty string")
    else:
        name = unicodedata.normalize("NFKC", name.strip())
        if len(name) > MAX_NAME:
            errors.append(f"name exceeds {MAX_NAME} characters ({len(name)})")
        if name != name.lower():
            errors.append(f"name {name!r} must be lowercase")
        if name.startswith("-") or name.endswith("-") or "--" in name:
            errors.append("name cannot start or end with a hyphen or contain '--'")
        if not all(c.isalnum() or c == "-" for c in name):
            errors.append(f"name {name!r} may hold only letters, digits and hyphens")
        if unicodedata.normalize("NFKC", skill_dir.name) != name:
            errors.append(f"folder name {skill_dir.name!r} must equal the skill name {name!r}")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        errors.append("field 'description' must be a non-empty string")
    else:
        if len(description) > MAX_DESCRIPTION:
            errors.append(f"description exceeds {MAX_DESCRIPTION} characters ({len(description)})")
        if "<" in description or ">" in description:
            errors.append("description must not contain '<' or '>'")
    if "license" in meta and (not isinstance(meta["license"], str) or not meta["license"]):
        errors.append("field 'license' must be a non-empty string")
    if "compatibility" in meta:
        compat = meta["compatibility"]
        if not isinstance(compat, str):
            errors.append("field 'compatibility' must be a string")
        elif len(compat) > MAX_COMPATIBILITY:
            errors.append(f"compatibility exceeds {MAX_COMPATIBILITY} characters ({len(compat)})")
    if "allowed-tools" in meta:
        tools = meta["allowed-tools"]
        if not isinstance(tools, str) and not (
            isinstance(tools, list) and all(isinstance(t, str) for t in tools)
        ):
            errors.append("field 'allowed-tools' must be a string or a list of strings")
    if "metadata" in meta:
        data = meta["metadata"]
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            errors.append("field 'metadata' must map strings to strings")
    return errors


def _check_skill_md(bundle: Path) -> list[Problem]:
    import yaml

    path = bundle / "SKILL.md"
    if not path.is_file():
        return [Problem("SKILL.md", 0, "missing required file SKILL.md")]
    try:
        text = read_text(path)
    except Unreadable as exc:
        return [Problem("SKILL.md", 0, f"cannot be read: {exc}")]
    try:
        front, body, body_line = markdown.split_front_matter(text, "---")
    except ValueError as exc:
        return [Problem("SKILL.md", 1, str(exc))]
    if not front:
        return [Problem("SKILL.md", 1, "SKILL.md must start with YAML front matter (---)")]
    try:
        meta = yaml.safe_load(front)
    except yaml.YAMLError as exc:
        return [Problem("SKILL.md", 1, f"invalid YAML in front matter: {exc}".splitlines()[0])]
    problems = [Problem("SKILL.md", 1, m) for m in check_front_matter(meta, bundle)]
    lines = body.count("\n") + 1
    if lines > MAX_BODY_LINES:
        problems.append(Problem("SKILL.md", body_line, f"body has {lines} lines (max 500)"))
    if len(body) > MAX_BODY_CHARS:
        problems.append(
            Problem("SKILL.md", body_line, f"body has {len(body)} characters (max 20000)")
        )
    return problems


def _anchors(path: Path, seen: dict[Path, set[str]]) -> set[str]:
    """The heading anchors of a Markdown file, read once per verify run (``seen``)."""
    if path not in seen:
        try:
            text = read_text(path)
        except Unreadable:
            text = ""  # reported as a problem of that page itself
        seen[path] = {markdown.slugify(title) for _, _, title in markdown.headings(text)}
    return seen[path]


def _check_links(bundle: Path, md: Path, text: str, anchors: dict[Path, set[str]]) -> list[Problem]:
    rel = md.relative_to(bundle).as_posix()
    problems = []
    for line, target in markdown.links(text):
        if "://" in target or target.startswith("mailto:"):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (md.parent / file_part).resolve() if file_part else md
        if not dest.exists():
            problems.append(Problem(rel, line, f"link target {target} does not exist"))
            continue
        try:
            dest.relative_to(bundle.resolve())
        except ValueError:
            problems.append(Problem(rel, line, f"link {target} leaves the bundle"))
            continue
        if anchor and dest.suffix == ".md" and anchor not in _anchors(dest, anchors):
            problems.append(Problem(rel, line, f"link {target}: no heading #{anchor}"))
    return problems


def _name_known(name: str, version: str | None) -> str | None:
    """None if the name is fine; else why not."""
    from fsdp_skill import knowledge

    listed = knowledge.versioned_symbols().get(name)
    if version is None:
        return None
    if symbols.resolve(name):
        return None
    if listed is None:
        return f"{name} does not resolve in torch {version}"
    if knowledge.in_range(version, listed.get("since", ""), listed.get("until", "")):
        return f"{name} should exist in torch {version} (symbols.toml) but does not resolve"
    return None


def _check_code_and_names(bundle: Path, md: Path, text: str, version: str | None) -> list[Problem]:
    rel = md.relative_to(bundle).as_posix()
    problems: list[Problem] = []
    names: list[tuple[int, str]] = []
    for block in markdown.code_blocks(text):
        if block.language not in ("python", "py"):
            continue
        try:
            found = list(symbols.names_in_code(block.code))
        except SyntaxError as exc:
            line = block.line + (exc.lineno or 1) - 1
            problems.append(Problem(rel, line, f"Python block does not parse: {exc.msg}"))
            continue
        names.extend((block.line + line - 1, name) for line, name in found)
    names.extend(symbols.names_in_text(markdown.strip_code(text)))
    for line, name in symbols.longest_names(iter(names)):
        why = _name_known(name, version)
        if why:
            problems.append(Problem(rel, line, why))
    return problems


def skipped_checks(check_torch: bool) -> list[str]:
    """The checks ``verify`` did not run, each as ``"<check>: <why>"`` (empty: all ran)."""
    if not check_torch:
        return ["torch names: --no-torch"]
    if symbols.torch_version() is None:
        return ["torch names: torch is not importable here"]
    return []


def verify(bundle: Path = BUNDLE_DIR, check_torch: bool = True) -> list[Problem]:
    """Every problem found in the bundle at ``bundle`` (an empty list means it passes)."""
    bundle = Path(bundle)
    if not bundle.is_dir():
        from fsdp_skill.errors import UsageError

        raise UsageError(f"{bundle} is not a folder")
    problems = _check_skill_md(bundle)
    version = symbols.torch_version() if check_torch else None
    anchors: dict[Path, set[str]] = {}
    for md in sorted(bundle.rglob("*.md")):
        rel = md.relative_to(bundle).as_posix()
        try:
            text = read_text(md)
        except Unreadable as exc:
            problems.append(Problem(rel, 0, f"cannot be read ({exc}); search skips it"))
            continue
        problems.extend(_check_links(bundle, md, text, anchors))
        problems.extend(_check_code_and_names(bundle, md, text, version))
    for script in sorted((bundle / "scripts").glob("*.py")):
        rel = script.relative_to(bundle).as_posix()
        try:
            ast.parse(read_text(script))
        except Unreadable as exc:
            problems.append(Problem(rel, 0, f"cannot be read ({exc})"))
        except SyntaxError as exc:
            problems.append(Problem(rel, exc.lineno or 0, f"does not parse: {exc.msg}"))
    for left in locking.leftovers(bundle):
        rel = Path(os.path.relpath(left, bundle)).as_posix()
        problems.append(
            Problem(
                rel,
                0,
                "left by an interrupted install or refresh (some clients may load it as a "
                "second skill): run the same command again to remove it, or delete it",
            )
        )
    return problems
