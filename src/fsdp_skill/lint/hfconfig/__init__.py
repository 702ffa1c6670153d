"""``fsdp-skill lint`` for Hugging Face FSDP configuration files: accelerate config YAMLs,
``TrainingArguments`` files and ``fsdp_config`` JSONs (codes FSDP101 and up).

Each file is checked against facts mined from the installed accelerate and transformers
(``knowledge/hf_fsdp_keys.toml``, ``knowledge/hf_model_classes.json``): neither package, nor
torch, is imported here. ``lint_text`` is what ``lint_paths`` and ``lint_source`` call for a
``.yaml``/``.yml``/``.json`` file; a file that is not such a configuration gives None and is
skipped without a word.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fsdp_skill.lint.hfconfig.codes import CONFIG_CODES

if TYPE_CHECKING:
    from fsdp_skill.roots import Roots

__all__ = ["CONFIG_CODES", "Project", "is_config_name", "lint_text"]

SUFFIXES = (".yaml", ".yml", ".json")
MAX_BYTES = 1 << 20
"""A configuration is a few hundred bytes: larger YAML/JSON files (data sets) are not read."""
_ALWAYS = ("FSDP102", "FSDP111")
"""The checks that still apply to an accelerate file that does not turn FSDP on."""


def is_config_name(name: str) -> bool:
    """True for a file name lint reads as a possible configuration."""
    return name.lower().endswith(SUFFIXES)


@dataclass
class Project:
    """What one lint run knows beyond each file: the model (``--model-config``) and the
    folders whose shell scripts tie configs to training scripts. With ``confine`` (the MCP
    server's roots), no file outside them is read: not the model config, a model folder, a
    shell script nor the training script it launches."""

    model_config: str | None = None
    roots: list[Path] = field(default_factory=list)
    confine: Roots | None = None
    _model: object = None
    _launches: list | None = None

    def model(self):
        """The ``--model-config`` model (None: not given, or its classes are unknown);
        raises UsageError when the file cannot be read or lies outside ``confine``."""
        if self.model_config is None:
            return None
        if self._model is None:
            from fsdp_skill.errors import UsageError
            from fsdp_skill.lint.hfconfig import model

            if self.confine is not None:
                self.confine.admit(self.model_config, shown=f"--model-config {self.model_config}")
            try:
                config = model.read_config(Path(self.model_config))
            except ValueError as exc:
                raise UsageError(f"--model-config: {exc}") from None
            self._model = model.from_config(config, Path(self.model_config).name) or False
        return self._model or None

    def launches_for(self, path: Path) -> list:
        """The ``accelerate launch`` lines that pass this config file."""
        if not self.roots:
            return []
        if self._launches is None:
            from fsdp_skill.lint.hfconfig.launches import find_launches

            self._launches = find_launches(self.roots, self.confine)
        try:
            resolved = path.resolve()
        except OSError:
            return []
        return [launch for launch in self._launches if launch.config == resolved]


def lint_text(
    text: str, path: str, codes: set[str], project: Project | None = None
) -> tuple[list, list[str]] | None:
    """``(findings, problems)`` for one file's text, or None when it is not a configuration.

    A file that looks like one but does not parse is a problem, not a silence."""
    from fsdp_skill.lint import engine
    from fsdp_skill.lint.hfconfig import document
    from fsdp_skill.lint.hfconfig.context import Context
    from fsdp_skill.lint.hfconfig.rules import config_rules

    try:
        doc = document.load(text, path)
    except document.NotAConfig:
        return None
    except document.BadConfig as exc:
        return [], [str(exc)]
    project = project or Project()
    ctx = Context(
        doc, model=_model_for(doc, project, path), launches=project.launches_for(Path(path))
    )
    noqa = engine.noqa_lines(text)
    findings, problems = [], []
    for rule in config_rules():
        if rule.code not in codes or (not ctx.fsdp_enabled and rule.code not in _ALWAYS):
            continue
        try:
            hits = list(rule.check(ctx))
        except Exception as exc:  # a rule bug must not hide the other rules' findings
            problems.append(f"{rule.code} failed on this file: {type(exc).__name__}: {exc}")
            continue
        for line, col, message in hits:
            suppressed = [noqa[n] for n in (0, line) if n in noqa]
            if any(codes_ is None or rule.code in codes_ for codes_ in suppressed):
                continue
            findings.append(
                engine.Finding(
                    path=path,
                    line=line,
                    col=col,
                    code=rule.code,
                    severity=rule.severity,
                    message=message,
                    fix=rule.fix((0, 0)),
                    ref=f"pitfall:{rule.pitfall}",
                )
            )
    findings.sort(key=lambda f: (f.line, f.col, f.code))
    return findings, problems


def _model_for(doc, project: Project, path: str):
    found = project.model()
    if found is not None:
        return found
    named = doc.top.get("model_name_or_path")
    if named is not None and isinstance(named.value, str):
        from fsdp_skill.lint.hfconfig import model

        return model.from_name(named.value, Path(path).parent, project.confine)
    return None
