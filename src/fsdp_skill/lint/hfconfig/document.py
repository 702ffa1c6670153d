"""Read a YAML or JSON file into the entries lint checks, each with its line and column, and
tell which kind of Hugging Face FSDP configuration it is (if any).

Kinds, recognised by content (never by file name):

- ``accelerate``: an ``accelerate config`` file: a ``distributed_type`` or
  ``compute_environment`` key, and FSDP in use (``distributed_type: FSDP`` or a non-empty
  ``fsdp_config:``).
- ``trainer-arguments``: a file of ``TrainingArguments`` (what ``HfArgumentParser`` and TRL
  read): a ``fsdp_config`` mapping or an ``fsdp`` option next to ``TrainingArguments`` fields.
- ``trainer-fsdp-config``: the ``fsdp_config`` file itself (``--fsdp_config file.json``): a
  mapping whose keys are, nearly all, keys ``TrainingArguments`` reads from it.

Anything else is not a configuration lint checks, and is skipped without a word.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field

import yaml

from fsdp_skill.lint.hfconfig import data

ACCELERATE, TRAINER_ARGUMENTS, TRAINER_FSDP_CONFIG = (
    "accelerate",
    "trainer-arguments",
    "trainer-fsdp-config",
)
# Keys of a training-recipe file that the Trainer does not read but other tools do (axolotl's
# own schema maps fsdp_config differently): such files are not Trainer arguments.
_OTHER_TOOLS = ("base_model",)


_TOP_LEVEL_FSDP = re.compile(r"^(fsdp_config|distributed_type)\s*:", re.MULTILINE)
"""A file with one of these top-level keys is meant as a config: if it does not parse, say so."""


class NotAConfig(Exception):
    """The text is not a configuration lint checks."""


class BadConfig(ValueError):
    """The text looks like a configuration but cannot be read (one-line reason)."""


@dataclass(frozen=True)
class Entry:
    """One ``key: value`` of the file; positions are 1-based."""

    key: str
    value: object
    line: int
    col: int
    value_line: int
    value_col: int
    children: dict[str, Entry] = field(default_factory=dict, compare=False, repr=False)
    """The entries of a mapping value, with their own positions."""


@dataclass
class ConfigFile:
    """A recognised configuration: its top-level entries and its FSDP entries, keyed by the
    name the reading tool uses (accelerate: ``fsdp_``-prefixed; the Trainer: unprefixed)."""

    path: str
    kind: str
    text: str
    top: dict[str, Entry]
    fsdp: dict[str, Entry] = field(default_factory=dict)
    fsdp_entry: Entry | None = None

    @property
    def is_accelerate(self) -> bool:
        return self.kind == ACCELERATE

    def anchor(self) -> Entry | None:
        """Where a finding about the FSDP settings as a whole goes."""
        return self.fsdp_entry or next(iter(self.fsdp.values()), None)


def canonical_key(kind: str, key: str) -> str:
    """The key as the tool that reads this kind of file names it."""
    if kind == ACCELERATE:
        return key if key.startswith("fsdp") else "fsdp_" + key  # as `accelerate launch` does
    return key[5:] if key.startswith("fsdp_") else key  # as TrainingArguments does


def _entries_from_node(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        children = (
            _entries_from_node(loader, value_node)
            if isinstance(value_node, yaml.MappingNode)
            else {}
        )
        entries[str(key_node.value)] = Entry(
            key=str(key_node.value),
            value=loader.construct_object(value_node, deep=True),
            line=key_node.start_mark.line + 1,
            col=key_node.start_mark.column + 1,
            value_line=value_node.start_mark.line + 1,
            value_col=value_node.start_mark.column + 1,
            children=children,
        )
    return entries


def _load_yaml(text: str) -> dict[str, Entry]:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if not isinstance(node, yaml.MappingNode):
            raise NotAConfig
        return _entries_from_node(loader, node)
    finally:
        loader.dispose()


def _load_json(text: str) -> dict[str, Entry]:
    """JSON that YAML cannot read (tabs, say): values from ``json``, positions found by the
    first ``"key":`` of each name after its parent's."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadConfig(f"invalid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(value, dict):
        raise NotAConfig
    return _json_entries(text, value, 0)


def _json_entries(text: str, mapping: dict, start: int) -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    for key, value in mapping.items():
        match = re.compile(re.escape(json.dumps(key)) + r"\s*:\s*").search(text, start)
        offset = match.start() if match else start
        value_offset = match.end() if match else start
        line, col = _position(text, offset)
        value_line, value_col = _position(text, value_offset)
        children = _json_entries(text, value, value_offset) if isinstance(value, dict) else {}
        entries[key] = Entry(key, value, line, col, value_line, value_col, children)
    return entries


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def load(text: str, path: str) -> ConfigFile:
    """The configuration in ``text``; raises NotAConfig, or BadConfig for a file that names
    FSDP settings but does not parse."""
    lowered = text.lower()
    if "fsdp" not in lowered and not any(k in lowered for k in data.TRAINER_SPECIFIC_KEYS):
        raise NotAConfig  # every kind names an FSDP key: skip other files without parsing
    try:
        top = _load_yaml(text)
    except yaml.composer.ComposerError:
        raise NotAConfig from None  # several YAML documents (a manifest): not a config file
    except yaml.YAMLError as exc:
        stripped = text.lstrip()
        if stripped.startswith("{"):
            top = _load_json(text)
        else:
            if not _TOP_LEVEL_FSDP.search(text):
                raise NotAConfig from None  # a template or other YAML that mentions FSDP
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or "cannot parse"
            raise BadConfig(f"invalid YAML: {problem}{where}") from None
    return _recognise(path, text, top)


def _recognise(path: str, text: str, top: dict[str, Entry]) -> ConfigFile:
    fsdp_entry = top.get("fsdp_config")
    section = fsdp_entry.children if fsdp_entry is not None else {}
    if "distributed_type" in top or "compute_environment" in top:
        distributed = top.get("distributed_type")
        if not section and not (distributed and str(distributed.value).upper() == "FSDP"):
            raise NotAConfig  # an accelerate config for DDP, DeepSpeed, TPU, ...
        return _config(path, ACCELERATE, text, top, section, fsdp_entry)
    if any(key in top for key in _OTHER_TOOLS):
        raise NotAConfig
    trainer_fields = data.trainer_argument_names()
    if ("fsdp_config" in top or "fsdp" in top) and any(
        key in trainer_fields for key in top if key not in ("fsdp", "fsdp_config")
    ):
        return _config(path, TRAINER_ARGUMENTS, text, top, section, fsdp_entry)
    if _looks_like_trainer_fsdp_config(top):
        return _config(path, TRAINER_FSDP_CONFIG, text, top, top, None)
    raise NotAConfig


def _looks_like_trainer_fsdp_config(top: dict[str, Entry]) -> bool:
    """Nearly every key is one TrainingArguments reads from ``fsdp_config`` (or close to one),
    and at least one is FSDP-specific."""
    known = data.trainer_keys()
    names = [canonical_key(TRAINER_FSDP_CONFIG, k) for k in top]
    if not names:
        return False
    exact = [n for n in names if n in known]
    close = [n for n in names if n not in known and difflib.get_close_matches(n, known, 1, 0.8)]
    specific = [k for k in top if k.startswith("fsdp_") or k in data.TRAINER_SPECIFIC_KEYS]
    return bool(specific) and len(exact) * 2 >= len(names) and len(exact) + len(close) == len(names)


def _config(
    path: str,
    kind: str,
    text: str,
    top: dict[str, Entry],
    section: dict[str, Entry],
    fsdp_entry: Entry | None,
) -> ConfigFile:
    fsdp = {}
    for key, entry in section.items():
        fsdp.setdefault(canonical_key(kind, key), entry)
    return ConfigFile(path, kind, text, top, fsdp, fsdp_entry)
