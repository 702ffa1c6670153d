"""The MCP ``lint`` tool reads Hugging Face FSDP configs inside the client's roots, and none
outside: a config, a model folder or a training script reached through a link out of the
roots is never read. Driven through the server over stdio, as a client calls it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lint.test_hfconfig_project import RUN, TRAIN
from tests.mcp.session import open_session, text_of

pytest.importorskip("mcp.server.mcpserver", reason="the mcp 2.x SDK is not installed")

MARKER = "fsdp_outside_secret_7f3a"
OUTSIDE_CONFIG = f"distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  {MARKER}: 1\n"
INSIDE_CONFIG = (
    "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_ofload_params: true\n"
)
RECIPE = """\
model_name_or_path: model
output_dir: out
fsdp: full_shard auto_wrap
fsdp_config:
  transformer_layer_cls_to_wrap: [BertLayer]
"""
LLAMA = Path(__file__).parents[2] / "src" / "fsdp_skill" / "plan" / "configs" / "llama-3-8b.json"
SHARDED = (Path(__file__).parents[1] / "lint" / "hfconfig" / "real" / "trl-fsdp2.yaml").read_text()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("configs")
    outside, root = base / "outside", base / "workspace"
    (outside / "model").mkdir(parents=True)
    (outside / "model" / "config.json").write_text(LLAMA.read_text())
    (outside / "fsdp.yaml").write_text(OUTSIDE_CONFIG)
    (outside / "train.py").write_text(TRAIN.format(extra=""))
    linked, launched = root / "linked", root / "launched"
    (root / "recipes").mkdir(parents=True)
    (root / "recipes" / "fsdp.yaml").write_text(INSIDE_CONFIG)
    (root / "recipes" / "recipe.yaml").write_text(RECIPE)
    (root / "recipes" / "model").symlink_to(outside / "model")
    linked.mkdir()
    (linked / "fsdp.yaml").symlink_to(outside / "fsdp.yaml")
    (launched / "configs").mkdir(parents=True)
    (launched / "configs" / "fsdp2.yaml").write_text(SHARDED)
    (launched / "run.sh").write_text(RUN)
    (launched / "train.py").symlink_to(outside / "train.py")
    return {"root": root, "outside": outside}


@pytest.fixture(scope="module")
def session(tree: dict[str, Path]):
    with open_session(roots=[tree["root"]]) as connected:
        yield connected


def _lint(session, paths: list[str]) -> dict:
    result = session.call("lint", {"paths": paths})
    assert not result.is_error, text_of(result)
    assert MARKER not in text_of(result)
    return result.structured_content


def test_a_config_inside_the_roots_is_linted(session, tree):
    from fsdp_skill.lint import lint_paths

    data = _lint(session, ["recipes/fsdp.yaml"])
    assert [f["code"] for f in data["findings"]] == ["FSDP101"]
    assert data == lint_paths([str((tree["root"] / "recipes" / "fsdp.yaml").resolve())])


def test_a_model_folder_linked_out_of_the_roots_is_not_read(session):
    data = _lint(session, ["recipes/recipe.yaml"])
    assert data == {"findings": [], "files": 1, "errors": []}


def test_a_config_linked_out_of_a_folder_is_listed_not_read(session, tree):
    data = _lint(session, ["linked"])
    assert data["findings"] == [] and data["files"] == 0
    assert [Path(e["path"]).name for e in data["errors"]] == ["fsdp.yaml"]
    assert "outside the client's roots" in data["errors"][0]["message"]


def test_a_training_script_linked_out_is_not_read_for_fsdp110(session):
    data = _lint(session, ["launched"])
    assert data["findings"] == []
    assert [Path(e["path"]).name for e in data["errors"]] == ["train.py"]


@pytest.mark.parametrize("path", ["linked/fsdp.yaml", "ABSOLUTE/fsdp.yaml", "../outside/fsdp.yaml"])
def test_a_config_path_that_leads_out_is_refused(session, tree, path):
    result = session.call("lint", {"paths": [path.replace("ABSOLUTE", str(tree["outside"]))]})
    assert result.is_error
    assert "outside the client's roots" in text_of(result)
    assert MARKER not in text_of(result)
