"""`fsdp-skill new`: options, rendering, atomic writes and the command line (no training)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fsdp_skill.cli import main
from fsdp_skill.errors import UsageError
from fsdp_skill.scaffold import TEMPLATE_DIR, new_project
from fsdp_skill.scaffold.project import Options, render, template_files
from tests.cli import fsdp

PROJECT_FILES = [
    "README.md",
    "checkpoint.py",
    "data.py",
    "export.py",
    "launch/multinode.sh",
    "launch/slurm.sbatch",
    "launch/torchrun.sh",
    "model.py",
    "model_config.json",
    "options.py",
    "prepare.py",
    "tracking.py",
    "train.py",
    "train_config.json",
]
PYTHON_FILES = [f for f in PROJECT_FILES if f.endswith(".py")]


def train_defaults() -> dict:
    """The DEFAULTS literal of the shipped options.py, read without running it."""
    tree = ast.parse((TEMPLATE_DIR / "options.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "DEFAULTS":
            return ast.literal_eval(node.value)
    raise AssertionError("options.py has no DEFAULTS")


def test_shipped_config_equals_train_py_defaults():
    assert json.loads((TEMPLATE_DIR / "train_config.json").read_text()) == train_defaults()


def test_default_options_render_the_shipped_files_unchanged():
    assert render(Options()) == template_files()


def test_new_writes_every_project_file(tmp_path):
    dest = tmp_path / "proj"
    result = new_project(dest)
    assert result["path"] == str(dest.resolve())
    assert result["files"] == PROJECT_FILES
    for rel in PROJECT_FILES:
        assert (dest / rel).read_bytes() == (TEMPLATE_DIR / rel).read_bytes()
    for script in ("launch/torchrun.sh", "launch/multinode.sh", "launch/slurm.sbatch"):
        assert os.access(dest / script, os.X_OK)
    assert not os.access(dest / "train.py", os.X_OK)
    assert [p.name for p in tmp_path.iterdir()] == ["proj"]  # no staging folder left behind


def test_options_reach_the_config_and_readme(tmp_path):
    model_config = tmp_path / "gpt2.json"
    model_config.write_text(json.dumps({"model_type": "gpt2", "n_layer": 2, "n_embd": 64}))
    new_project(
        tmp_path / "p",
        model_config=str(model_config),
        cpu_offload=True,
        activation_checkpointing=True,
        precision="fp16",
        fsdp_version="1",
    )
    config = json.loads((tmp_path / "p" / "train_config.json").read_text())
    assert config["fsdp"] == dict(
        train_defaults()["fsdp"],
        version=1,
        precision="fp16",
        cpu_offload=True,
        activation_checkpointing=True,
    )
    model = json.loads((tmp_path / "p" / "model_config.json").read_text())
    assert model == {"model_type": "gpt2", "n_layer": 2, "n_embd": 64}
    readme = (tmp_path / "p" / "README.md").read_text()
    assert "a `gpt2` model" in readme and "FSDP1" in readme and "fp16" in readme
    assert "with a gradient scaler" in readme


def test_model_checkpoint_replaces_the_model_config(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text('{"model_type": "llama"}')
    result = new_project(tmp_path / "p", model=str(ckpt))
    assert "model_config.json" not in result["files"]
    config = json.loads((tmp_path / "p" / "train_config.json").read_text())
    assert config["model"]["name_or_path"] == str(ckpt.resolve())
    assert config["model"]["config"] is None
    hub = new_project(tmp_path / "q", model="org/model-1.0")
    assert hub["options"]["model"] == "org/model-1.0"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"precision": "fp8"}, "--precision"),
        ({"fsdp_version": 3}, "--fsdp-version"),
        ({"fsdp_version": "two"}, "--fsdp-version"),
        ({"model": "no such thing!"}, "--model"),
        ({"model": "a", "model_config": "b.json"}, "not both"),
        ({"model_config": "missing.json"}, "cannot read"),
        ({"colour": "blue"}, "unknown option"),
    ],
)
def test_bad_options_raise_usage_error_and_write_nothing(tmp_path, options, message):
    with pytest.raises(UsageError, match=message):
        new_project(tmp_path / "p", **options)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "content", ['{"vocab_size": 10}', "[1, 2]", "not json", b"\xff\xfe\x00binary"]
)
def test_model_config_must_be_a_hugging_face_config(tmp_path, content):
    path = tmp_path / "config.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(UsageError, match="--model-config"):
        new_project(tmp_path / "p", model_config=str(path))
    assert not (tmp_path / "p").exists()


def test_model_folder_without_config_is_refused(tmp_path):
    (tmp_path / "ckpt").mkdir()
    with pytest.raises(UsageError, match="no config.json"):
        new_project(tmp_path / "p", model=str(tmp_path / "ckpt"))


def test_non_empty_folder_is_refused_without_force(tmp_path):
    dest = tmp_path / "p"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not empty"):
        new_project(dest)
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]


def test_force_replaces_project_files_and_keeps_the_others(tmp_path):
    dest = tmp_path / "p"
    new_project(dest)
    (dest / "train.py").write_text("# edited\n")
    (dest / "notes.txt").write_text("mine")
    (dest / "checkpoints").mkdir()
    new_project(dest, force=True, precision="fp32")
    assert (dest / "train.py").read_bytes() == (TEMPLATE_DIR / "train.py").read_bytes()
    assert (dest / "notes.txt").read_text() == "mine"
    assert (dest / "checkpoints").is_dir()
    assert json.loads((dest / "train_config.json").read_text())["fsdp"]["precision"] == "fp32"


def test_empty_existing_folder_is_used(tmp_path):
    dest = tmp_path / "p"
    dest.mkdir()
    assert new_project(dest)["files"] == PROJECT_FILES


def test_a_file_in_the_way_is_refused(tmp_path):
    (tmp_path / "p").write_text("x")
    with pytest.raises(UsageError, match="not a folder"):
        new_project(tmp_path / "p", force=True)


def test_an_unwritable_parent_is_a_usage_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="cannot write"):
        new_project(tmp_path / "file" / "p")


def test_cli_json_and_exit_codes(tmp_path):
    result = fsdp("new", tmp_path / "p", "--precision", "fp32", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["path"] == str((tmp_path / "p").resolve())
    assert data["files"] == PROJECT_FILES
    assert data["options"]["precision"] == "fp32"
    result = fsdp("new", tmp_path / "p")
    assert result.code == 2 and result.out == ""
    assert result.err.startswith("fsdp-skill: error:") and len(result.err.strip().splitlines()) == 1
    result = fsdp("new", tmp_path / "q", "--fsdp-version", "3")
    assert result.code == 2 and "Traceback" not in result.err and not (tmp_path / "q").exists()


def test_cli_in_process_text_output(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["new", str(tmp_path / "p"), "--activation-checkpointing"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert f"wrote {len(PROJECT_FILES)} files" in out and "launch/torchrun.sh" in out


def test_new_does_not_import_torch(tmp_path):
    code = (
        "import sys; from fsdp_skill.scaffold import new_project; "
        f"new_project({str(tmp_path / 'p')!r}); "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_launch_scripts_are_valid_shell():
    for script in sorted((TEMPLATE_DIR / "launch").iterdir()):
        subprocess.run(["bash", "-n", str(script)], check=True)
        assert "train.py --config train_config.json" in script.read_text()


@pytest.mark.parametrize("name", PYTHON_FILES)
def test_shipped_python_files_are_valid_and_documented(name):
    compile((TEMPLATE_DIR / name).read_text(), name, "exec")
    assert Path(TEMPLATE_DIR / name).read_text().startswith('"""')


def test_project_modules_import_only_each_other_and_packages():
    """train.py's siblings are imported by bare name: each must be a file of the project."""
    siblings = {Path(f).stem for f in PYTHON_FILES}
    for name in PYTHON_FILES:
        tree = ast.parse((TEMPLATE_DIR / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                top = node.module.split(".")[0]
                if top not in siblings:
                    assert top in {"torch", "transformers", "numpy", "safetensors", "datasets",
                                   "huggingface_hub", "tqdm", "wandb", "__future__", "argparse",
                                   "collections", "contextlib", "functools", "pathlib",
                                   "multiprocessing"}, (name, top)  # fmt: skip


def _torch_minimum_from_the_template() -> str:
    """The newest ``since`` among the versioned torch names the project uses (symbols.toml)."""
    from fsdp_skill import knowledge, symbols

    listed = knowledge.versioned_symbols()
    code = "\n".join((TEMPLATE_DIR / name).read_text() for name in PYTHON_FILES)
    since = {listed[n]["since"] for _, n in symbols.names_in_code(code) if n in listed}
    return max((s for s in since if s), key=knowledge.version_tuple)


def _transformers_minimum_from_the_template() -> str:
    """The major version the project refuses to run below (its own check of the version)."""
    trees = [ast.parse((TEMPLATE_DIR / name).read_text()) for name in PYTHON_FILES]
    for node in (node for tree in trees for node in ast.walk(tree)):
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.Lt):
            left = ast.unparse(node.left)
            if "transformers.__version__" in left and isinstance(node.comparators[0], ast.Constant):
                return str(node.comparators[0].value)
    raise AssertionError("the project no longer checks the transformers version")


def test_new_says_up_front_what_the_project_needs(tmp_path):
    from fsdp_skill.scaffold.project import REQUIRES

    torch_min = _torch_minimum_from_the_template()
    transformers_min = _transformers_minimum_from_the_template()
    assert REQUIRES == {"torch": f">={torch_min}", "transformers": f">={transformers_min}"}
    readme = (TEMPLATE_DIR / "README.md").read_text()
    assert f"`torch>={torch_min}`" in readme and f"`transformers>={transformers_min}`" in readme

    wanted = (f"torch>={torch_min}", f"transformers>={transformers_min}")
    result = fsdp("new", tmp_path / "p")
    assert result.code == 0, result.err
    first = result.out.splitlines()[0]
    assert all(w in first for w in wanted), first
    assert fsdp("new", tmp_path / "q", "--json").json()["requires"] == REQUIRES
    helped = " ".join(fsdp("new", "--help").out.split())
    assert all(w in helped for w in wanted), helped
