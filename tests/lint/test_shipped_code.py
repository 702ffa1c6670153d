"""Code the project ships for users to run must pass its own linter."""

from __future__ import annotations

from fsdp_skill.bundle_files import BUNDLE_DIR
from fsdp_skill.lint import lint_paths


def test_project_templates_lint_clean():
    assets = BUNDLE_DIR / "assets"
    scripts = sorted(assets.rglob("*.py"))
    assert scripts, f"no Python template under {assets}"
    result = lint_paths([str(p) for p in scripts])
    assert result["errors"] == []
    assert result["findings"] == [], [
        f"{f['path']}:{f['line']} {f['code']} {f['message']}" for f in result["findings"]
    ]
