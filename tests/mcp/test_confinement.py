"""No tool reads a file outside the client's roots, however the path gets there.

Driven through the server over stdio, as a client calls it. The workspace (the only root)
holds real symbolic links out of it, under hidden folders, package caches and plain folders;
the files outside carry a marker, and no answer may contain it, list the files it came from,
or tell whether a path outside exists.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.mcp.session import open_session, text_of

pytest.importorskip("mcp.server.mcpserver", reason="the mcp 2.x SDK is not installed")

MARKER = "OUTSIDE_SECRET_7f3a"
SECRET_CODE = f"""\
# {MARKER}
import torch
from torch.distributed.fsdp import fully_shard

model = torch.nn.Linear(4, 4)
optimizer = torch.optim.AdamW(model.parameters())
fully_shard(model)
"""
INSIDE_CODE = "x = 1\n"
SKIPPED_FOLDERS = (".cfg", "node_modules", "site-packages", "__pycache__", "plain")


def watchdog_log(rank: int, seq: int) -> str:
    return (
        f"[rank{rank}]:[PG ID 0 PG GUID 0(default_pg) Rank {rank}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=16, NumelOut=16, "
        f"Timeout(ms)=600000) ran for 600042 milliseconds before timing out. {MARKER}\n"
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("confinement")
    outside = base / "outside"
    (outside / "pkg").mkdir(parents=True)
    (outside / "secret.py").write_text(SECRET_CODE)
    (outside / "pkg" / "deep.py").write_text(SECRET_CODE)
    (outside / "rank1.log").write_text(watchdog_log(1, 9))
    (outside / "config.json").write_text(json.dumps({"model_type": "llama", "note": MARKER}))
    # a folder named like a hub id, where the server's working directory will be
    (outside / "org" / "model").mkdir(parents=True)
    (outside / "org" / "model" / "config.json").write_text(
        (Path(__file__).parents[2] / "src/fsdp_skill/plan/configs/llama-3-8b.json").read_text()
    )

    root = base / "workspace"
    code = root / "code"
    logs = root / "logs"
    for folder in SKIPPED_FOLDERS:
        (code / folder).mkdir(parents=True)
        (code / folder / "x.py").symlink_to(outside / "secret.py")
        (logs / folder).mkdir(parents=True)
        (logs / folder / "rank1.log").symlink_to(outside / "rank1.log")
    (code / "train.py").write_text(INSIDE_CODE)
    (code / "linked_dir").symlink_to(outside / "pkg")
    (code / ".cfg" / "pyproject.toml").symlink_to(outside / "config.json")
    (logs / "rank0.log").write_text(watchdog_log(0, 7).replace(MARKER, ""))
    (root / "model").mkdir()
    (root / "model" / "config.json").write_text(
        (outside / "org" / "model" / "config.json").read_text()
    )
    (root / "escape.py").symlink_to(outside / "secret.py")
    (root / "escape_dir").symlink_to(outside)
    return {"root": root, "outside": outside, "code": code, "logs": logs}


@pytest.fixture(scope="module")
def session(tree: dict[str, Path]):
    with open_session(roots=[tree["root"]]) as connected:
        yield connected


def answer(result) -> str:
    return text_of(result) + json.dumps(result.structured_content or {})


def assert_nothing_leaked(result, outside: Path) -> None:
    text = answer(result)
    assert MARKER not in text
    assert str(outside) not in text


def test_lint_walk_does_not_follow_links_out_of_any_folder(session, tree):
    result = session.call("lint", {"paths": [str(tree["code"])]})
    assert not result.is_error, text_of(result)
    data = result.structured_content
    assert_nothing_leaked(result, tree["outside"])
    assert data["files"] == 1  # train.py only
    assert not data["findings"]
    refused = {Path(e["path"]).parent.name for e in data["errors"] if "outside" in e["message"]}
    # lint skips package caches itself; every other folder it walks has its link refused
    assert refused == {".cfg", "plain"}


def test_hang_walk_does_not_follow_links_out_of_any_folder(session, tree):
    result = session.call("hang", {"paths": [str(tree["logs"])]})
    assert not result.is_error, text_of(result)
    data = result.structured_content
    assert_nothing_leaked(result, tree["outside"])
    assert [Path(i["path"]).name for i in data["inputs"]] == ["rank0.log"]
    assert data["ranks"] == 1
    refused = {
        Path(w.split(":", 1)[0]).parent.name
        for w in data["warnings"]
        if "outside the client's roots" in w
    }
    # hang walks every folder but hidden ones, and refuses each link out of the roots
    assert refused == {name for name in SKIPPED_FOLDERS if not name.startswith(".")}


@pytest.mark.parametrize("tool", ["lint", "hang"])
@pytest.mark.parametrize(
    "path",
    [
        "escape.py",
        "escape_dir",
        "escape_dir/secret.py",
        "code/linked_dir",
        "code/linked_dir/deep.py",
        "code/.cfg/x.py",
        "code/node_modules/x.py",
        "../outside/secret.py",
        "code/../../outside/secret.py",
        "ABSOLUTE/secret.py",
        "ABSOLUTE/not-there.py",
    ],
)
def test_a_path_that_leads_out_is_refused(session, tree, tool, path):
    path = path.replace("ABSOLUTE", str(tree["outside"]))
    result = session.call(tool, {"paths": [path]})
    assert result.is_error
    assert "outside the client's roots" in text_of(result)
    assert MARKER not in text_of(result)


@pytest.mark.parametrize(
    "model",
    ["ABSOLUTE/config.json", "ABSOLUTE", "../outside/config.json", "../outside/missing.json"],
)
def test_plan_model_never_reads_outside(session, tree, model):
    model = model.replace("ABSOLUTE", str(tree["outside"]))
    result = session.call("plan", {"model": model, "gpus": 8, "gpu_memory": "80GB"})
    assert result.is_error
    assert MARKER not in answer(result)
    # the same words whether the file exists or not
    assert text_of(result).endswith(
        f": {model} is outside the client's roots ({tree['root'].resolve()})"
    )


def test_plan_bundled_model_names_still_work(session):
    result = session.call("plan", {"model": "llama-3-8b", "gpus": 8, "gpu_memory": "80GB"})
    assert not result.is_error, text_of(result)
    assert result.structured_content["model"]["source"] == "bundled"


def test_plan_reads_a_model_folder_inside_the_roots(session, tree):
    pytest.importorskip("transformers")
    result = session.call("plan", {"model": "./model", "gpus": 8, "gpu_memory": "80GB"})
    assert not result.is_error, text_of(result)
    assert result.structured_content["model"]["source"] == "transformers"


def test_plan_hub_id_is_not_read_from_the_working_directory(tree, monkeypatch):
    """A name shaped like a hub id that the server's working directory holds as a folder."""
    pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with open_session(roots=[tree["root"]], cwd=tree["outside"]) as served:
        result = served.call("plan", {"model": "org/model", "gpus": 8, "gpu_memory": "80GB"})
    assert result.is_error, "read org/model/config.json from the working directory"
    assert "not in the local cache" in text_of(result)
