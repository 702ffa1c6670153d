"""The installable bundle: SKILL.md is hand-written, references/ is rendered from knowledge."""
