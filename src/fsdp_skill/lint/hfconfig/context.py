"""What a config check sees: the file, the FSDP version it runs with, the mined rows of its
keys, the model it trains (when known) and the scripts launched with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fsdp_skill.lint.hfconfig import data

if TYPE_CHECKING:
    from fsdp_skill.lint.hfconfig.document import ConfigFile, Entry
    from fsdp_skill.lint.hfconfig.launches import Launch
    from fsdp_skill.lint.hfconfig.model import ModelInfo

TRUE_WORDS = frozenset({"true", "yes", "on", "y", "t", "1"})


def truthy(value: object) -> bool:
    """True for a value accelerate and the Trainer read as true (``True``, ``"yes"``, 1)."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in TRUE_WORDS


def as_text(value: object) -> str:
    """A value as the launcher passes it on (``str()``; booleans lower-cased)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass
class Context:
    doc: ConfigFile
    model: ModelInfo | None = None
    launches: list[Launch] = field(default_factory=list)

    def __post_init__(self) -> None:
        entry = self.doc.fsdp.get("fsdp_version" if self.doc.is_accelerate else "version")
        self.version_entry = entry
        self.version = data.default_version(self.doc.is_accelerate)
        self.version_explicit = False
        if entry is not None:
            try:
                self.version = int(str(entry.value))
                self.version_explicit = True
            except ValueError:
                pass  # FSDP104 reports it; check the rest as the default version

    @property
    def fsdp_enabled(self) -> bool:
        """False for an accelerate file whose ``distributed_type`` is not FSDP."""
        if not self.doc.is_accelerate:
            return True
        distributed = self.doc.top.get("distributed_type")
        return distributed is not None and str(distributed.value).upper() == "FSDP"

    def row(self, key: str) -> dict | None:
        """The mined row of an FSDP key of this file (None: a key no tool reads)."""
        table = data.accelerate_keys() if self.doc.is_accelerate else data.trainer_keys()
        return table.get(key)

    def version_note(self) -> str:
        """How the file got its FSDP version, for messages."""
        if self.version_explicit:
            return (
                f"fsdp_version {self.version}"
                if self.doc.is_accelerate
                else f"version {self.version}"
            )
        name = "fsdp_version" if self.doc.is_accelerate else "version"
        tool = "accelerate launch" if self.doc.is_accelerate else "TrainingArguments"
        release = data.versions()["accelerate" if self.doc.is_accelerate else "transformers"]
        return f"no `{name}`, so FSDP{self.version} ({tool} default in {release})"

    def value_of(self, key: str) -> object | None:
        entry = self.doc.fsdp.get(key)
        return None if entry is None else entry.value

    def wrap_policy(self) -> str:
        """The auto-wrap policy this file runs with (upper case)."""
        key = "fsdp_auto_wrap_policy" if self.doc.is_accelerate else "auto_wrap_policy"
        value = self.value_of(key)
        if value is None:
            row = self.row(key) or {}
            if self.doc.is_accelerate:  # the launcher exports nothing: the plugin's default
                value = (
                    row.get("launch_default") or data.plugin_fields()[row["field"]]["env_default"]
                )
            else:
                value = row.get("default")
        return as_text(value).upper()

    def entry_or_anchor(self, key: str) -> Entry | None:
        return self.doc.fsdp.get(key) or self.doc.anchor()
