"""``fsdp-skill plan`` end to end: the acceptance case, the JSON contract, bad input, speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from fsdp_skill.cli import cli
from fsdp_skill.errors import UsageError
from fsdp_skill.plan import plan
from tests.cli import fsdp


def _run(*args: str):
    return CliRunner().invoke(cli, ["plan", *args], standalone_mode=False)


def _by_name(result: dict) -> dict[str, dict]:
    return {s["name"]: s for s in result["strategies"]}


def test_7b_on_8x80gb_ddp_does_not_fit_full_shard_does():
    result = plan(params="7b", gpus=8, gpu_memory="80GB")
    rows = _by_name(result)
    assert not rows["ddp"]["fits"]
    assert rows["fsdp2-full-shard"]["fits"]
    b = rows["fsdp2-full-shard"]["per_gpu_bytes"]
    states = b["params"] + b["grads"] + b["optimizer"]
    assert states == pytest.approx(16 * 7e9 / 8, rel=1e-6)
    assert result["recommendation"]["strategy"] is not None
    assert not result["recommendation"]["strategy"].startswith("ddp")


def test_cli_text_and_exit_code():
    out = _run("--params", "7b", "--gpus", "8", "--gpu-memory", "80GB")
    assert out.return_value == 0, out.output
    lines = {line.split()[0]: line.split() for line in out.output.splitlines() if line.strip()}
    assert lines["ddp"][1] == "no"
    assert lines["fsdp2-full-shard"][1] == "yes"
    assert "fully_shard(" in out.output


def test_json_contract_shape():
    out = _run(
        "--model", "llama-3-8b", "--gpus", "16", "--nodes", "2", "--gpu-memory", "80GiB", "--json"
    )
    data = json.loads(out.output)
    assert data["model"]["params"] == 8_030_261_248
    names = set()
    for s in data["strategies"]:
        assert {
            "name",
            "fits",
            "per_gpu_bytes",
            "cpu_bytes",
            "comm_bytes_per_step",
            "notes",
        } <= set(s)
        b = s["per_gpu_bytes"]
        assert {"params", "grads", "optimizer", "activations", "buffers", "total"} <= set(b)
        # the peak: never more than everything at once, never less than the model states
        everything = sum(v for k, v in b.items() if k != "total")
        assert b["params"] + b["grads"] + b["optimizer"] <= b["total"] <= everything
        names.add(s["name"])
    assert {
        "ddp",
        "fsdp2-full-shard",
        "fsdp2-no-reshard",
        "fsdp2-hsdp",
        "fsdp2-full-shard+offload+ac",
        "fsdp2-hsdp+ac",
    } <= names
    assert {"strategy", "why", "snippet"} <= set(data["recommendation"])


def test_strategies_order_as_the_model_says():
    rows = _by_name(plan(model="llama-2-7b", gpus=16, nodes=2, gpu_memory="80GB"))
    total = {n: r["per_gpu_bytes"]["total"] for n, r in rows.items()}
    # sharding more reduces memory; keeping layers gathered costs memory
    assert total["fsdp2-full-shard"] < total["fsdp2-hsdp"] < total["ddp"]
    assert total["fsdp2-full-shard"] < total["fsdp2-no-reshard"]
    assert total["fsdp2-full-shard+ac"] < total["fsdp2-full-shard"]
    assert total["fsdp2-full-shard+offload"] < total["fsdp2-full-shard"]
    assert rows["fsdp2-full-shard+offload"]["cpu_bytes"] > 0
    # HSDP keeps most traffic inside the node; full shard across nodes does not
    assert (
        rows["fsdp2-hsdp"]["comm_seconds_per_step"]
        < rows["fsdp2-full-shard"]["comm_seconds_per_step"]
    )
    assert rows["fsdp2-hsdp"]["comm"]["all_reduce"] > 0
    # full shard gathers twice (forward, backward), no-reshard once
    assert (
        rows["fsdp2-full-shard"]["comm"]["all_gather"]
        > rows["fsdp2-no-reshard"]["comm"]["all_gather"]
    )


def test_more_gpus_less_memory_and_bandwidth_scales_time():
    small = _by_name(plan(model="llama-3-8b", gpus=4, gpu_memory="80GB"))
    big = _by_name(plan(model="llama-3-8b", gpus=8, gpu_memory="80GB"))
    assert (
        big["fsdp2-full-shard"]["per_gpu_bytes"]["optimizer"]
        < small["fsdp2-full-shard"]["per_gpu_bytes"]["optimizer"]
    )
    slow = _by_name(plan(model="llama-3-8b", gpus=8, gpu_memory="80GB", bandwidth="75GB/s"))
    fast = _by_name(plan(model="llama-3-8b", gpus=8, gpu_memory="80GB", bandwidth="150GB/s"))
    assert slow["fsdp2-full-shard"]["comm_seconds_per_step"] == pytest.approx(
        2 * fast["fsdp2-full-shard"]["comm_seconds_per_step"], rel=1e-3
    )


def test_nothing_fits_exits_1():
    out = _run("--model", "llama-3-70b", "--gpus", "1", "--gpu-memory", "24GB")
    assert out.return_value == 1
    assert "Recommendation: none" in out.output


def test_activation_checkpointing_flag_limits_rows():
    result = plan(params="1b", gpus=2, gpu_memory="24GB", activation_checkpointing=True)
    assert all(s["activation_checkpointing"] for s in result["strategies"])


def test_snippet_follows_torch_version():
    new = plan(params="7b", gpus=8, gpu_memory="40GB", torch_version="2.6.0")
    mid = plan(params="7b", gpus=8, gpu_memory="40GB", torch_version="2.4.1")
    old = plan(params="7b", gpus=8, gpu_memory="40GB", torch_version="2.3.1")
    assert "from torch.distributed.fsdp import" in new["recommendation"]["snippet"]
    assert "torch.distributed._composable.fsdp" in mid["recommendation"]["snippet"]
    assert "FullyShardedDataParallel" in old["recommendation"]["snippet"]


def test_snippets_compile_and_name_real_torch_symbols():
    pytest.importorskip("torch")
    from fsdp_skill.plan.planner import build_setup, load_model
    from fsdp_skill.plan.snippet import render
    from fsdp_skill.plan.strategies import candidates
    from fsdp_skill.symbols import longest_names, names_in_code, resolve

    for source in ({"params": "7b"}, {"model": "gpt2"}):
        spec, _ = load_model(**source)
        setup = build_setup(spec, gpus=16, nodes=2, gpu_memory="80GB")
        for strategy in candidates(2):
            for version in ("2.13.0", "2.3.0"):
                code = render(setup, strategy, version)
                compile(code, strategy.name, "exec")
                if version == "2.13.0":
                    for _, name in longest_names(names_in_code(code)):
                        assert resolve(name), (strategy.name, name)


BAD = [
    ["--params", "-7b"],
    ["--params", "0"],
    ["--params", "7zz"],
    ["--params", "7b", "--gpu-memory", "80XB"],
    ["--params", "7b", "--gpu-memory", "0"],
    ["--params", "7b", "--nodes", "16"],
    ["--params", "7b", "--nodes", "3"],
    ["--params", "7b", "--gpus", "0"],
    ["--params", "7b", "--seq-len", "0"],
    ["--params", "7b", "--micro-batch", "-1"],
    ["--params", "7b", "--headroom", "1.5"],
    ["--params", "7b", "--bandwidth", "fast"],
    ["--params", "7b", "--model", "gpt2"],
    [],
]


@pytest.mark.parametrize("args", BAD, ids=[" ".join(a) or "no-model" for a in BAD])
def test_bad_input_is_a_one_line_error(args):
    base = {"--gpus": "8", "--gpu-memory": "80GB"}
    full = list(args)
    for key, value in base.items():
        if key not in full:
            full += [key, value]
    result = fsdp("plan", *full)
    assert result.code == 2, result.err
    assert result.out == ""
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert result.err.startswith("fsdp-skill: error:")


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[1, 2]",
        '{"model_type": "llama", "hidden_size": 4096}',
        '{"model_type": "llama", "hidden_size": -1, "num_hidden_layers": 2, '
        '"num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 10}',
        '{"model_type": "gpt2", "n_embd": "big"}',
    ],
    ids=["not-json", "not-object", "missing-fields", "negative", "wrong-type"],
)
def test_bad_config_file(tmp_path, content):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(UsageError):
        plan(model_config=str(path), gpus=8, gpu_memory="80GB")
    out = _run("--model-config", str(path), "--gpus", "8", "--gpu-memory", "80GB")
    assert isinstance(out.exception, UsageError)


def test_unknown_model_type_is_read_as_llama_with_a_note(tmp_path):
    config = {
        "model_type": "newthing",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 100,
    }
    result = plan(model_config=config, gpus=1, gpu_memory="8GB")
    assert any("Llama-style" in n for n in result["notes"])


def test_params_and_config_paths_do_not_import_torch(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "vocab_size": 100,
            }
        )
    )
    code = (
        "import sys\n"
        "from fsdp_skill.cli import main\n"
        "for args in (['--params', '7b'], ['--model-config', sys.argv[1]], ['--model', 'gpt2']):\n"
        "    try:\n"
        "        main(['plan', *args, '--gpus', '8', '--gpu-memory', '80GB', '--json'])\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, e.code\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')]\n"
        "assert not bad, bad[:5]\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(config)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


def test_model_id_offline_says_to_pass_model_config(tmp_path):
    pytest.importorskip("transformers")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsdp_skill",
            "plan",
            "--model",
            "some-org/not-cached-model",
            "--gpus",
            "8",
            "--gpu-memory",
            "80GB",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--model-config" in proc.stderr


def test_model_id_reads_a_local_folder_through_autoconfig(tmp_path):
    pytest.importorskip("transformers")
    from fsdp_skill.plan import bundled

    (tmp_path / "config.json").write_text(bundled.path("mistral-7b").read_text())
    result = plan(model=str(tmp_path), gpus=8, gpu_memory="80GB")
    assert result["model"]["source"] == "transformers"
    assert result["model"]["params"] == 7_241_732_096


def test_text_report_plain_and_rich():
    from fsdp_skill.plan.report import render_text

    result = plan(model="qwen2-7b", gpus=8, gpu_memory="80GB")
    for rich in (False, True):
        text = render_text(result, rich=rich)
        assert "fsdp2-full-shard" in text and "Recommendation:" in text
        assert "qwen2-7b: 7.62B parameters" in text


def test_composite_config_reads_its_text_config():
    from fsdp_skill.plan import bundled

    inner = bundled.load("llama-2-7b")
    result = plan(
        model_config={"model_type": "llava", "text_config": inner}, gpus=8, gpu_memory="80GB"
    )
    assert result["model"]["params"] == 6_738_415_616


@pytest.mark.parametrize(
    "options",
    [
        {"gpus": True},
        {"gpus": 2.5},
        {"gpus": "two"},
        {"nodes": -1},
        {"headroom": "lots"},
        {"headroom": 1},
        {"micro_batch": 0},
        {"precision": "int3"},
        {"optimizer": "lion"},
        {"attention": "flash3"},
        {"interconnect": "carrier-pigeon"},
        {"frobnicate": 1},
    ],
    ids=lambda o: next(iter(o)),
)
def test_python_api_rejects_bad_options(options):
    kwargs = {"params": "7b", "gpus": 8, "gpu_memory": "80GB", **options}
    with pytest.raises(UsageError):
        plan(**kwargs)


def test_python_api_accepts_strings_from_other_callers():
    result = plan(params=7e9, gpus="8", nodes="1", gpu_memory=80e9, seq_len="2048")
    assert result["setup"]["gpus"] == 8 and result["setup"]["seq_len"] == 2048


def test_large_vocabulary_loss_note():
    def noted(**kw):
        result = plan(gpus=16, nodes=2, gpu_memory="80GB", **kw)
        return any("cross-entropy" in n for n in result["notes"])

    assert noted(model="llama-3-8b", seq_len=8192)
    assert not noted(model="llama-2-7b", seq_len=4096)


def test_bundled_names_are_never_joined_into_a_path(tmp_path):
    """``--model ../x`` or an absolute path must not be read as a bundled config."""
    from fsdp_skill.plan import bundled

    elsewhere = tmp_path / "config.json"
    elsewhere.write_text("{}")
    assert bundled.path("LLAMA-3-8B") == bundled.CONFIG_DIR / "llama-3-8b.json"
    for name in (str(elsewhere.with_suffix("")), "../configs/llama-3-8b", "./llama-3-8b"):
        assert bundled.path(name) is None, name


BASE_ARGS = ["--params", "7B", "--gpus", "8", "--gpu-memory", "80GB"]
OVERFLOWING = [
    ("--gpu-memory", "1e400GB"),
    ("--gpu-memory", "1e400"),
    ("--gpu-memory", "9" * 400 + "GB"),
    ("--params", "1e400"),
    ("--params", "1e30"),
    ("--cpu-memory", "1e309GiB"),
    ("--bandwidth", "1e400GB/s"),
    ("--inter-node-bandwidth", "1e999Gbps"),
    ("--headroom", "nan"),
    ("--headroom", "inf"),
    ("--seq-len", str(10**30)),
    ("--gpus", str(10**30)),
    ("--micro-batch", str(10**12)),
]


def _with(option: str, value: str) -> list[str]:
    args = list(BASE_ARGS)
    if option in args:
        args[args.index(option) + 1] = value
    else:
        args += [option, value]
    return args


@pytest.mark.parametrize(
    ("option", "value"), OVERFLOWING, ids=[f"{o}={v[:12]}" for o, v in OVERFLOWING]
)
def test_overflowing_and_non_finite_numbers_are_one_line_errors(option, value):
    result = fsdp("plan", *_with(option, value))
    assert result.code == 2, result.out[-500:]
    assert "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fsdp-skill: error: "), result.err
    assert len(lines[0]) < 300


@pytest.mark.parametrize("value", ["1e400", "-1e400", "NaN", str(10**40)])
def test_overflowing_model_config_fields_are_one_line_errors(tmp_path, value):
    config = tmp_path / "config.json"
    config.write_text(
        '{"model_type": "llama", "hidden_size": HIDDEN, "intermediate_size": 11008, '
        '"num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000}'.replace(
            "HIDDEN", value
        )
    )
    result = fsdp("plan", "--model-config", config, "--gpus", "8", "--gpu-memory", "80GB")
    assert result.code == 2
    assert (
        result.err.startswith("fsdp-skill: error: model config") and "Traceback" not in result.err
    )


def test_the_largest_accepted_numbers_give_valid_json():
    """At every bound at once, the result is still JSON (no Infinity or NaN in it)."""
    result = fsdp(
        "plan",
        "--json",
        "--params",
        "1e15",
        "--gpus",
        "1000000",
        "--nodes",
        "100000",
        "--gpu-memory",
        "1e18B",
        "--seq-len",
        "10000000",
        "--micro-batch",
        "1000000",
    )
    assert result.code in (0, 1), result.err

    def refuse(name):
        raise ValueError(name)

    json.loads(result.out, parse_constant=refuse)
