"""Config linting stays inside the MCP server's roots, as Python linting does: a config file,
a model folder, a ``--model-config``, a hub cache, a shell script or a training script that
lies (or links) outside them is never read, so nothing in it can reach a finding. Each case
first gives its finding without roots, so that it is the roots check that silences it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsdp_skill.errors import UsageError
from fsdp_skill.lint import lint_paths
from fsdp_skill.roots import NOT_READ, Roots
from tests.lint.hfconfig.cases import REAL
from tests.lint.test_hfconfig_project import RUN, TRAIN

LLAMA = Path(__file__).parents[2] / "src" / "fsdp_skill" / "plan" / "configs" / "llama-3-8b.json"
RECIPE = """\
model_name_or_path: {model}
output_dir: out
fsdp: full_shard auto_wrap
fsdp_config:
  transformer_layer_cls_to_wrap: [BertLayer]
"""


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """(the workspace, the only root; a folder outside it)."""
    root, outside = tmp_path / "workspace", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    return root, outside


def _codes(result: dict) -> list[tuple[str, str]]:
    return sorted((Path(f["path"]).name, f["code"]) for f in result["findings"])


def _model_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(LLAMA.read_text())
    return folder


def test_a_linked_config_in_a_folder_is_never_read(places):
    root, outside = places
    (outside / "fsdp.yaml").write_text((REAL / "halos-fsdp.yaml").read_text())
    (root / "configs").mkdir()
    (root / "configs" / "fsdp.yaml").symlink_to(outside / "fsdp.yaml")
    assert _codes(lint_paths([str(root)])) == [("fsdp.yaml", "FSDP101")]
    result = lint_paths([str(root)], roots=Roots.of([root]))
    assert result["findings"] == [] and result["files"] == 0
    assert result["errors"] == [{"path": str(root / "configs" / "fsdp.yaml"), "message": NOT_READ}]


@pytest.mark.parametrize("named", ["workspace/fsdp.yaml", "outside/fsdp.yaml"])
def test_a_config_path_that_leads_out_is_refused(places, named):
    root, outside = places
    (outside / "fsdp.yaml").write_text((REAL / "halos-fsdp.yaml").read_text())
    (root / "fsdp.yaml").symlink_to(outside / "fsdp.yaml")
    path = str(root.parent / named)
    assert _codes(lint_paths([path])) == [("fsdp.yaml", "FSDP101")]
    result = lint_paths([path], roots=Roots.of([root]))
    assert result == {
        "findings": [],
        "files": 0,
        "errors": [{"path": path, "message": "outside the client's roots"}],
    }


def test_a_config_inside_the_roots_is_linted(places):
    root, _ = places
    (root / "fsdp.yaml").write_text((REAL / "halos-fsdp.yaml").read_text())
    result = lint_paths([str(root / "fsdp.yaml")], roots=Roots.of([root]))
    assert _codes(result) == [("fsdp.yaml", "FSDP101")] and result["files"] == 1


@pytest.mark.parametrize("how", ["link", "absolute"])
def test_a_model_folder_outside_the_roots_is_not_read(places, how):
    root, outside = places
    model = _model_folder(outside / "model")
    if how == "link":
        (root / "model").symlink_to(model)
    (root / "recipe.yaml").write_text(RECIPE.format(model="model" if how == "link" else model))
    assert _codes(lint_paths([str(root)])) == [("recipe.yaml", "FSDP105")]
    result = lint_paths([str(root)], roots=Roots.of([root]))
    assert result == {"findings": [], "files": 1, "errors": []}


def test_a_model_folder_inside_the_roots_is_read(places):
    root, _ = places
    _model_folder(root / "model")
    (root / "recipe.yaml").write_text(RECIPE.format(model="model"))
    found = lint_paths([str(root)], roots=Roots.of([root]))["findings"]
    assert [f["code"] for f in found] == ["FSDP105"]


def test_a_hub_id_is_not_read_from_the_working_directory_under_roots(places, monkeypatch):
    root, outside = places
    _model_folder(outside / "org" / "llama")
    monkeypatch.setenv("HF_HUB_CACHE", str(outside / "empty-cache"))
    monkeypatch.chdir(outside)
    (root / "recipe.yaml").write_text(RECIPE.format(model="org/llama"))
    assert _codes(lint_paths([str(root)])) == [("recipe.yaml", "FSDP105")]
    assert lint_paths([str(root)], roots=Roots.of([root]))["findings"] == []


@pytest.mark.parametrize("cache_inside", [False, True])
def test_the_hub_cache_is_read_only_inside_the_roots(places, monkeypatch, cache_inside):
    root, outside = places
    cache = (root if cache_inside else outside) / "hub"
    repo = cache / "models--org--llama"
    _model_folder(repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    (root / "recipe.yaml").write_text(RECIPE.format(model="org/llama"))
    assert _codes(lint_paths([str(root / "recipe.yaml")])) == [("recipe.yaml", "FSDP105")]
    found = lint_paths([str(root / "recipe.yaml")], roots=Roots.of([root]))["findings"]
    assert [f["code"] for f in found] == (["FSDP105"] if cache_inside else [])


def test_a_model_config_outside_the_roots_is_refused_before_any_work(places):
    root, outside = places
    (outside / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (root / "fsdp.yaml").write_text((REAL / "accelerate-tests-latest-fsdp.yaml").read_text())
    roots = Roots.of([root])
    for model_config in (outside / "config.json", outside / "missing.json"):
        with pytest.raises(UsageError, match="outside the client's roots") as refused:
            lint_paths([str(root)], roots=roots, model_config=str(model_config))
        assert "not JSON" not in str(refused.value) and "cannot read" not in str(refused.value)
    (root / "config.json").write_text(json.dumps({"model_type": "llama"}))
    inside = lint_paths([str(root)], roots=roots, model_config=str(root / "config.json"))
    assert [f["code"] for f in inside["findings"]] == ["FSDP105"]


@pytest.mark.parametrize("linked", ["run.sh", "train.py"])
def test_fsdp110_reads_no_shell_or_training_script_outside_the_roots(places, linked):
    root, outside = places
    (root / "configs").mkdir()
    (root / "configs" / "fsdp2.yaml").write_text((REAL / "trl-fsdp2.yaml").read_text())
    texts = {"run.sh": RUN, "train.py": TRAIN.format(extra="")}
    for name, text in texts.items():
        if name == linked:
            (outside / name).write_text(text)
            (root / name).symlink_to(outside / name)
        else:
            (root / name).write_text(text)
    assert _codes(lint_paths([str(root)])) == [("fsdp2.yaml", "FSDP110")]
    result = lint_paths([str(root)], roots=Roots.of([root]))
    assert result["findings"] == []
    refused = [Path(e["path"]).name for e in result["errors"] if e["message"] == NOT_READ]
    assert refused == (["train.py"] if linked == "train.py" else [])  # lint does not lint .sh
