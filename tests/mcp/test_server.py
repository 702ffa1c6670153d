"""The MCP server over a real stdio connection, driven by the SDK's own client.

Each tool's structured result must equal what the library function returns for the same
input: that proves the arguments reach the function unchanged and the result comes back
whole. Paths must stay inside the client's roots; bad arguments are tool errors.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from tests.mcp.session import open_session, text_of

pytest.importorskip("mcp.server.mcpserver", reason="the mcp 2.x SDK is not installed")

EXPECTED_ARGS = {
    "search": {"query", "k"},
    "show": {"id", "with_pitfalls"},
    "lint": {"code", "paths", "select", "ignore"},
    "plan": {
        "params",
        "model_config",
        "model",
        "gpus",
        "nodes",
        "gpu_memory",
        "seq_len",
        "micro_batch",
        "precision",
        "optimizer",
        "activation_checkpointing",
        "reduce_dtype",
        "attention",
        "headroom",
        "bandwidth",
        "inter_node_bandwidth",
        "interconnect",
        "network",
        "cpu_memory",
        "mfu",
        "gpu_flops",
        "cpu_adam_rate",
        "lora_rank",
    },
    "explain": {"text"},
    "hang": {"paths"},
    "env": {"topic", "deep"},
}

CONTRACT_FIELDS = {  # DESIGN §3: the fields each command's JSON must have
    "search": {"query", "results"},
    "show": {"id", "title", "path", "url", "text"},
    "lint": {"findings", "files", "errors"},
    "plan": {"model", "strategies", "recommendation"},
    "explain": {"matches", "related", "hang"},
    "hang": {"ranks", "verdict", "culprit_ranks", "first_divergence", "advice", "inputs"},
    "env": {"torch", "cuda", "nccl", "devices", "backend_recommendation", "env_vars", "warnings"},
}

BAD_CODE = """\
import torch
from torch.distributed.fsdp import fully_shard

model = torch.nn.Linear(4, 4)
optimizer = torch.optim.AdamW(model.parameters())
fully_shard(model)
"""


def needs(module: str) -> None:
    """Skip when another tool's module is not part of this checkout yet."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not in this checkout yet")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("workspace")
    (root / "train.py").write_text(BAD_CODE)
    (root / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 1024,
                "intermediate_size": 2816,
                "num_hidden_layers": 8,
                "num_attention_heads": 16,
                "num_key_value_heads": 16,
                "vocab_size": 32000,
            }
        )
    )
    return root


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("outside")
    (folder / "secret.py").write_text(BAD_CODE)
    return folder


@pytest.fixture(scope="module")
def session(workspace: Path):
    with open_session(roots=[workspace]) as connected:
        yield connected


def structured(result) -> dict:
    assert not result.is_error, text_of(result)
    return result.structured_content


def test_lists_every_tool_with_typed_documented_schema(session):
    tools = {t.name: t for t in session.list_tools()}
    assert set(tools) == set(EXPECTED_ARGS)
    for name, tool in tools.items():
        assert set(tool.input_schema["properties"]) == EXPECTED_ARGS[name], name
        for arg, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), f"{name}({arg}) is not documented"
        assert tool.description, name
        assert set(tool.output_schema["required"]) == CONTRACT_FIELDS[name], name
        assert tool.output_schema["additionalProperties"] is True, name
        assert tool.annotations is not None and tool.annotations.read_only_hint, name
    props = tools["lint"].input_schema["properties"]
    paths_schema = next(s for s in props["paths"]["anyOf"] if s.get("type") == "array")
    assert paths_schema["maxItems"] >= 1
    assert tools["explain"].input_schema["properties"]["text"]["maxLength"] > 0
    assert tools["search"].input_schema["properties"]["k"]["maximum"] == 50
    assert set(tools["plan"].input_schema["required"]) == {"gpus", "gpu_memory"}


def test_env_matches_the_library(session):
    from fsdp_skill.doctor import env

    result = structured(session.call("env", {"topic": "hang"}))
    direct = env("hang")
    assert result["backend_recommendation"] == direct["backend_recommendation"]
    assert result["for"]["topic"] == "hang"
    assert {"torch", "cuda", "nccl", "devices", "env_vars", "warnings"} <= set(result)


def test_search_and_show_match_the_library(session):
    needs("fsdp_skill.search")
    from fsdp_skill.search import search, show

    result = structured(session.call("search", {"query": "fully_shard mixed precision", "k": 3}))
    assert result == search("fully_shard mixed precision", k=3)
    if not result["results"]:
        pytest.skip("the bundle's references are not rendered yet: nothing to show")
    first = result["results"][0]["id"]
    assert structured(session.call("show", {"id": first})) == show(first)
    linked = structured(session.call("show", {"id": first, "with_pitfalls": True}))
    assert linked == show(first, with_pitfalls=True) and "pitfalls" in linked


def test_show_unknown_id_is_a_tool_error(session):
    needs("fsdp_skill.search")
    result = session.call("show", {"id": "no-such-section-anywhere"})
    assert result.is_error
    assert "no-such-section-anywhere" in text_of(result)


def test_lint_code_and_paths_inside_roots(session, workspace: Path):
    needs("fsdp_skill.lint")
    from fsdp_skill.lint import lint_paths, lint_source

    by_text = structured(session.call("lint", {"code": BAD_CODE, "select": ["FSDP001"]}))
    assert by_text == lint_source(BAD_CODE, "<input>", select=["FSDP001"])
    assert [f["code"] for f in by_text["findings"]] == ["FSDP001"]

    by_path = structured(session.call("lint", {"paths": [str(workspace / "train.py")]}))
    assert by_path == lint_paths([str((workspace / "train.py").resolve())])
    assert any(f["code"] == "FSDP001" for f in by_path["findings"])

    relative = structured(session.call("lint", {"paths": ["train.py"]}))
    assert relative == by_path


def test_plan_matches_the_library(session, workspace: Path):
    needs("fsdp_skill.plan")
    from fsdp_skill.plan import plan

    args = {"params": "7B", "gpus": 8, "gpu_memory": "80GB", "seq_len": 2048}
    assert structured(session.call("plan", args)) == plan(**args)

    config = workspace / "config.json"
    by_file = structured(
        session.call("plan", {"model_config": str(config), "gpus": 8, "gpu_memory": "80GB"})
    )
    assert by_file == plan(model_config=str(config.resolve()), gpus=8, gpu_memory="80GB")
    inline = json.loads(config.read_text())
    by_content = structured(
        session.call("plan", {"model_config": inline, "gpus": 8, "gpu_memory": "80GB"})
    )
    assert by_content["model"]["params"] == by_file["model"]["params"]


def test_plan_has_every_option_of_the_command():
    from fsdp_skill.cli import plan_command

    command = {p.name for p in plan_command.params} - {"as_json", "torch_version"}
    renamed = {"model_id": "model"}  # the CLI's --model is the tool's model
    assert {renamed.get(name, name) for name in command} == EXPECTED_ARGS["plan"]


def test_plan_takes_the_options_of_the_command(session):
    needs("fsdp_skill.plan")
    from fsdp_skill.plan import plan

    args = {
        "params": "70B",
        "gpus": 16,
        "nodes": 2,
        "gpu_memory": "80GB",
        "cpu_memory": "512GB",
        "mfu": 0.3,
        "gpu_flops": "989TFLOPS",
        "headroom": 0.05,
        "network": "ethernet",
        "reduce_dtype": "bf16",
        "lora_rank": 16,
        "optimizer": "adam",
    }
    result = structured(session.call("plan", args))
    assert result == plan(**args)
    assert result != plan(**{k: v for k, v in args.items() if k not in ("lora_rank", "mfu")})
    bad = session.call("plan", {**args, "mfu": 1.5})
    assert bad.is_error


def test_plan_needs_exactly_one_model_source(session):
    result = session.call("plan", {"gpus": 8, "gpu_memory": "80GB"})
    assert result.is_error and "exactly one" in text_of(result)
    both = session.call("plan", {"params": 7, "model": "x", "gpus": 8, "gpu_memory": "80GB"})
    assert both.is_error


def test_explain_matches_the_library(session):
    needs("fsdp_skill.diagnose")
    from fsdp_skill.diagnose import explain

    text = (
        "[rank1]: torch.distributed.DistBackendError: Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=12, OpType=ALLGATHER, NumelIn=4, NumelOut=8, "
        "Timeout(ms)=600000) ran for 600041 milliseconds before timing out."
    )
    assert structured(session.call("explain", {"text": text})) == explain(text)


def test_hang_reads_logs_inside_roots(session, workspace: Path):
    needs("fsdp_skill.diagnose.divergence")
    from fsdp_skill.diagnose import hang

    logs = workspace / "logs"
    logs.mkdir(exist_ok=True)
    for rank in range(2):
        (logs / f"rank{rank}.log").write_text(
            f"[rank{rank}]:[PG ID 0 PG GUID 0(default_pg) Rank {rank}] Watchdog caught "
            f"collective operation timeout: WorkNCCL(SeqNum={7 + rank}, OpType=ALLREDUCE, "
            "NumelIn=16, NumelOut=16, Timeout(ms)=600000) ran for 600042 milliseconds before "
            "timing out.\n"
        )
    paths = [str(p) for p in sorted(logs.iterdir())]
    result = structured(session.call("hang", {"paths": paths}))
    assert result == hang([str(Path(p).resolve()) for p in paths])
    assert result["ranks"] == 2


@pytest.mark.parametrize("tool", ["lint", "hang"])
def test_path_outside_the_roots_is_refused(session, outside: Path, tool: str):
    result = session.call(tool, {"paths": [str(outside / "secret.py")]})
    assert result.is_error
    assert "outside the client's roots" in text_of(result)


def test_symlink_out_of_the_roots_is_refused(session, workspace: Path, outside: Path):
    link = workspace / "escape.py"
    if not link.exists():
        os.symlink(outside / "secret.py", link)
    result = session.call("lint", {"paths": [str(link)]})
    assert result.is_error and "outside the client's roots" in text_of(result)
    dotdot = session.call("lint", {"paths": [f"{workspace}/../{outside.name}/secret.py"]})
    assert dotdot.is_error and "outside the client's roots" in text_of(dotdot)


def test_model_config_outside_the_roots_is_refused(session, outside: Path):
    (outside / "config.json").write_text("{}")
    result = session.call(
        "plan", {"model_config": str(outside / "config.json"), "gpus": 8, "gpu_memory": "80GB"}
    )
    assert result.is_error and "outside the client's roots" in text_of(result)


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("search", {"query": "fsdp", "k": 0}, "greater than or equal to 1"),
        ("search", {"query": "x" * 1001}, "at most 1000 characters"),
        ("search", {}, "Field required"),
        ("show", {"id": ""}, "at least 1 character"),
        ("lint", {}, "give either code"),
        ("lint", {"code": "x = 1", "paths": ["a.py"]}, "give either code"),
        ("lint", {"paths": [f"f{i}.py" for i in range(101)]}, "at most 100 items"),
        ("lint", {"code": "x = 1", "select": ["not a code!"]}, "pattern"),
        ("explain", {"text": "x" * 1_000_001}, "at most 1000000 characters"),
        ("hang", {"paths": []}, "at least 1 item"),
        ("plan", {"params": 7, "gpus": 0, "gpu_memory": "80GB"}, "greater than or equal to 1"),
        ("plan", {"params": 7, "gpus": 8, "gpu_memory": "80GB", "precision": "int3"}, "bf16"),
        ("env", {"topic": "weather"}, "hang"),
        ("no_such_tool", {}, "no_such_tool"),
    ],
)
def test_bad_arguments_are_tool_errors(session, tool, arguments, expected):
    result = session.call(tool, arguments)
    assert result.is_error
    assert expected in text_of(result)


def test_server_keeps_serving_after_errors(session):
    assert session.call("lint", {}).is_error
    assert not session.call("env", {}).is_error


def test_references_are_resources(session):
    from fsdp_skill.mcp_server import bundle_dir, reference_files

    listed = {str(r.uri): r for r in session.list_resources()}
    expected = reference_files(bundle_dir())
    assert set(listed) == {uri for uri, _, _ in expected}
    uri, path, title = expected[0]
    assert uri == "fsdp://skill/SKILL.md"
    assert listed[uri].mime_type == "text/markdown"
    contents = session.read_resource(uri).contents
    assert contents[0].text == path.read_text(encoding="utf-8")


def test_unknown_resource_is_an_error(session):
    from mcp import MCPError

    with pytest.raises(MCPError):
        session.read_resource("fsdp://references/not-there.md")


def test_without_roots_paths_are_refused_but_text_works(workspace: Path):
    with open_session(roots=None) as plain:
        result = plain.call("lint", {"paths": [str(workspace / "train.py")]})
        assert result.is_error and "no roots" in text_of(result)
        assert not plain.call("lint", {"code": "x = 1\n"}).is_error


def test_server_root_option_grants_a_folder(workspace: Path, outside: Path):
    needs("fsdp_skill.lint")
    with open_session(roots=None, server_args=["--root", str(workspace)]) as served:
        inside = served.call("lint", {"paths": [str(workspace / "train.py")]})
        assert not inside.is_error, text_of(inside)
        refused = served.call("lint", {"paths": [str(outside / "secret.py")]})
        assert refused.is_error and "outside" in text_of(refused)


def test_legacy_handshake_clients_get_roots_too(workspace: Path):
    needs("fsdp_skill.lint")
    with open_session(roots=[workspace], mode="legacy") as legacy:
        result = legacy.call("lint", {"paths": [str(workspace / "train.py")]})
        assert not result.is_error, text_of(result)
        outside = legacy.call("lint", {"paths": ["/"]})
        assert outside.is_error
