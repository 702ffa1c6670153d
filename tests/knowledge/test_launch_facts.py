"""Facts the launch pitfalls and guides state, checked against the installed torch and
accelerate.

torchrun-libuv-on-windows, torchrun-not-on-path and device-map-auto-under-distributed explain
their errors with how the packages behave, elastic-restarts says how restarts are counted on
each node and what starts one; these tests fail when a release changes that.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import re
import subprocess
import sys
import textwrap

import pytest
import torch.distributed as dist

from fsdp_skill import knowledge
from tests.distributed import free_port, kill_tree, quiet_env, run_script
from tests.knowledge.texts import flat, guide, section
from tests.signatures import recognises

# torch.distributed.rendezvous is also a function's name there: take the module itself
rendezvous = importlib.import_module("torch.distributed.rendezvous")


def test_the_store_asks_for_libuv_unless_told_otherwise():
    assert "use_libuv: bool = True" in dist.TCPStore.__init__.__doc__


def test_init_process_groups_rendezvous_skips_libuv_on_windows_and_honours_the_url(monkeypatch):
    monkeypatch.delenv("USE_LIBUV", raising=False)
    assert rendezvous._get_use_libuv_from_query_dict({}) is True  # Linux: libuv by default
    assert rendezvous._get_use_libuv_from_query_dict({"use_libuv": "0"}) is False
    monkeypatch.setattr(sys, "platform", "win32")
    assert rendezvous._get_use_libuv_from_query_dict({}) is False
    monkeypatch.setenv("USE_LIBUV", "1")
    assert rendezvous._get_use_libuv_from_query_dict({}) is True


@pytest.mark.parametrize(
    "module",
    [
        "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend",
        "torch.distributed.elastic.rendezvous.static_tcp_rendezvous",
        "torch.distributed.elastic.rendezvous.dynamic_rendezvous",
    ],
)
def test_torchruns_rendezvous_stores_leave_use_libuv_at_its_default(module):
    source = inspect.getsource(importlib.import_module(module))
    calls = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "TCPStore"
    ]
    assert calls, f"{module} creates no TCPStore any more"
    assert all("use_libuv" not in {k.arg for k in call.keywords} for call in calls)


def test_torchrun_is_the_console_script_of_torch_distributed_run():
    scripts = importlib.metadata.entry_points(group="console_scripts")
    torchrun = next(e for e in scripts if e.name == "torchrun")
    assert torchrun.value == "torch.distributed.run:main"
    source = inspect.getsource(importlib.import_module("torch.distributed.run"))
    assert 'if __name__ == "__main__":\n    main()' in source


def test_accelerate_refuses_only_a_device_map_with_several_entries():
    pytest.importorskip("accelerate")
    import torch.nn as nn
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    split, whole = nn.Linear(2, 2), nn.Linear(2, 2)
    split.hf_device_map = {"a": 0, "b": 1}
    whole.hf_device_map = {"": 0}
    assert accelerator.verify_device_map(split) is True
    assert accelerator.verify_device_map(whole) is False


# A worker on node "b" fails on its first start; the worker on node "a" is healthy and only
# reports once its agent has restarted it (its marker file exists by then).
TWO_NODES = """
import os, sys, time
node, count = os.environ["NODE_NAME"], os.environ["TORCHELASTIC_RESTART_COUNT"]
marker = os.path.join(os.environ["MARKERS"], node)
if not os.path.exists(marker):
    open(marker, "w").close()
    if node == "b":
        sys.exit(1)
    time.sleep(60)
print(f"node {node} restart count {count}", flush=True)
"""


@pytest.mark.slow
def test_each_node_counts_only_its_own_restarts(tmp_path):
    """elastic-restarts: after node b's worker failed, b's workers read 1, a's read 0."""
    script = tmp_path / "two_nodes.py"
    script.write_text(textwrap.dedent(TWO_NODES))
    endpoint = f"127.0.0.1:{free_port()}"
    agents = {
        node: subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
             "--nproc-per-node=1", "--max-restarts=1", "--monitor-interval=0.2",
             "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", "--rdzv-id=count",
             str(script)],
            env=quiet_env({"NODE_NAME": node, "MARKERS": str(tmp_path)}),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for node in "ab"
    }  # fmt: skip
    try:
        out = {node: agent.communicate(timeout=90)[0] for node, agent in agents.items()}
    finally:  # torchrun's workers run in their own sessions: end the whole tree of a live agent
        for agent in agents.values():
            if agent.poll() is None:
                kill_tree(agent.pid)
    assert "node a restart count 0" in out["a"], out["a"][-2000:]
    assert "node b restart count 1" in out["b"], out["b"][-2000:]


def test_the_agent_takes_a_restart_only_when_its_own_workers_failed():
    from torch.distributed.elastic.agent.server.api import SimpleElasticAgent

    source = inspect.getsource(SimpleElasticAgent._invoke_run)
    assert source.count("self._remaining_restarts -= 1") == 1
    healthy = source[source.index("WorkerState.HEALTHY") :]
    assert "num_nodes_waiting" in healthy and "_remaining_restarts" not in healthy


# Rank 1 hangs on the first attempt (alive, in no collective); rank 0 waits for it in a
# barrier until the group's timeout ends it with an error. The second attempt only reports.
HUNG_WORKER = """
import os, time
from datetime import timedelta
import torch.distributed as dist
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
started = os.path.join(os.environ["MARKERS"], "started")
if attempt == 0:
    dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT))
    if dist.get_rank() == 0:
        open(started, "w").write(str(time.time()))
    dist.barrier()  # so that rank 0 wrote the start time before rank 1 hangs
    if dist.get_rank() == 1:
        time.sleep(120)
    dist.barrier()
    raise SystemExit("rank 0 passed a barrier that rank 1 never reached")
waited = time.time() - float(open(started).read())
print(f"rank {os.environ['RANK']} attempt {attempt} after {waited:.1f} s", flush=True)
"""


@pytest.mark.slow
def test_a_hung_worker_restarts_only_once_the_collective_timeout_ends_its_peer(tmp_path):
    """elastic-restarts: a worker that hangs is not a failure. Its agent restarts the job
    only when the peer waiting for it fails on the group's timeout, and then stops the hung
    worker too."""
    timeout = 6
    script = tmp_path / "hung_worker.py"
    script.write_text(textwrap.dedent(HUNG_WORKER).replace("TIMEOUT", str(timeout)))
    agent = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
         "--max-restarts=1", "--monitor-interval=0.2", f"--master-port={free_port()}",
         str(script)],
        env=quiet_env({"MARKERS": str(tmp_path)}),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        out = agent.communicate(timeout=90)[0]
    finally:
        if agent.poll() is None:
            kill_tree(agent.pid)
    assert agent.returncode == 0, out[-3000:]
    waits = [float(w) for w in re.findall(r"rank [01] attempt 1 after ([\d.]+) s", out)]
    assert len(waits) == 2, out[-3000:]
    assert min(waits) >= timeout, out[-3000:]  # nothing restarted while rank 1 only hung


def test_the_agent_restarts_on_an_exit_or_a_waiting_node_only():
    """elastic-restarts: what the agent watches, and the rendezvous keep-alive it quotes."""
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous
    from torch.distributed.run import get_args_parser

    monitor = inspect.getsource(LocalElasticAgent._monitor_workers)
    assert "self._pcontext.wait(0)" in monitor  # the state comes from the processes' exits
    waiting = inspect.getsource(dynamic_rendezvous.DynamicRendezvousHandler.num_nodes_waiting)
    assert "len(self._state_holder.state.wait_list)" in waiting
    handler = inspect.getsource(dynamic_rendezvous.create_handler)
    assert 'get_as_int("keep_alive_interval", 5)' in handler
    assert 'get_as_int("keep_alive_max_attempt", 3)' in handler
    assert get_args_parser().parse_args(["train.py"]).monitor_interval == 0.1


def test_accelerate_launch_hands_its_restart_and_rendezvous_options_to_torchrun():
    """elastic-restarts: accelerate launch filters these four options into torchrun's own
    arguments, unchanged (max_restarts 0 unless given)."""
    pytest.importorskip("accelerate")
    from accelerate.commands.launch import launch_command_parser, multi_gpu_launcher
    from accelerate.utils.launch import _filter_args
    from torch.distributed.run import get_args_parser

    assert "_filter_args(" in inspect.getsource(multi_gpu_launcher)
    args = launch_command_parser().parse_args(
        ["--max_restarts", "2", "--monitor_interval", "0.5", "--rdzv_backend", "c10d",
         "--rdzv_conf", "join_timeout=900,last_call_timeout=60", "train.py"]
    )  # fmt: skip
    torchrun = _filter_args(args, get_args_parser(), ["--training_script", "train.py"])
    assert (torchrun.max_restarts, torchrun.monitor_interval) == (2, 0.5)
    assert torchrun.rdzv_backend == "c10d"
    assert torchrun.rdzv_conf == "join_timeout=900,last_call_timeout=60"
    assert launch_command_parser().parse_args(["train.py"]).max_restarts == 0


@pytest.mark.parametrize(
    ("processes", "same_network", "per_machine"), [(16, True, "8"), (8, False, "4")]
)
def test_accelerate_launch_splits_num_processes_over_the_machines(
    monkeypatch, tmp_path, processes, same_network, per_machine
):
    """multi-node-launch: num_processes is the total; each machine starts num_processes //
    num_machines, and the rendezvous is machine 0's address, as MASTER_ADDR or an endpoint."""
    pytest.importorskip("accelerate")
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    monkeypatch.setenv("HF_HOME", str(tmp_path))  # no user config file behind the defaults
    port = str(free_port())
    flags = ["--multi_gpu", "--num_machines", "2", "--machine_rank", "1",
             "--num_processes", str(processes), "--main_process_ip", "10.0.0.1",
             "--main_process_port", port, "--mixed_precision", "no"]  # fmt: skip
    args = launch_command_parser().parse_args(
        flags + (["--same_network"] if same_network else []) + ["train.py"]
    )
    args = _validate_launch_command(args)[0]
    prepare_multi_gpu_env(args)
    assert (args.nproc_per_node, args.nnodes, args.node_rank) == (per_machine, "2", 1)
    if same_network:
        assert (args.master_addr, args.master_port) == ("10.0.0.1", port)
    else:
        assert args.rdzv_endpoint == f"10.0.0.1:{port}"


def test_accelerate_refuses_a_busy_port_only_on_several_machines():
    """address-in-use: the standalone fallback and the ConnectionError its fix quotes."""
    pytest.importorskip("accelerate")
    from accelerate.utils.launch import prepare_multi_gpu_env

    source = inspect.getsource(prepare_multi_gpu_env)
    assert "need_port_check = num_machines <= 1 or int(args.machine_rank) == 0" in source
    assert "standalone-like mode" in source
    assert "Tried to launch distributed communication on port" in source
    assert "if args.main_process_port == 0:" in source  # 0 asks for any free port
    fix = flat(knowledge.pitfall("address-in-use").fix)
    assert "`ConnectionError: Tried to launch distributed communication on port ...`" in fix


def test_the_old_launcher_announces_its_deprecation_and_passes_local_rank():
    """deprecated-distributed-launch: its signature quotes torch's own warning."""
    source = inspect.getsource(importlib.import_module("torch.distributed.launch"))
    assert '"The module torch.distributed.launch is deprecated' in source
    assert "--local-rank" in source or "--local_rank" in source


def test_gloo_names_the_host_it_cannot_resolve():
    """gloo-hostname-address: torch's wording when the host name resolves to no address."""
    with pytest.raises(RuntimeError) as raised:
        dist.ProcessGroupGloo.create_device(hostname="no-such-host.invalid")
    pitfall = knowledge.pitfall("gloo-hostname-address")
    assert recognises(pitfall, str(raised.value)), raised.value


def test_a_master_addr_that_does_not_resolve_warns_then_times_out():
    """store-connect-timeout: an unresolvable host name (".invalid" never resolves) is logged as
    addresses that "cannot be retrieved" and ends in the connect timeout explain names."""
    from fsdp_skill.diagnose import explain

    code = textwrap.dedent(
        f"""
        import datetime
        import torch.distributed as dist
        try:
            dist.TCPStore("master.invalid", {free_port()}, 2, False,
                          timeout=datetime.timedelta(seconds=1))
        except Exception as exc:
            print(type(exc).__name__, exc)
        """
    )
    env = quiet_env({"TORCH_CPP_LOG_LEVEL": "INFO"})
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    log = proc.stderr + proc.stdout
    assert "cannot be retrieved (gai error:" in log, log[-2000:]
    assert "DistNetworkError" in proc.stdout, log[-2000:]
    assert explain(log)["matches"][0]["id"] == "store-connect-timeout"


def test_nproc_per_node_takes_a_count_or_one_of_the_words_the_pitfall_names():
    """torchrun-nproc-per-node-value: numbers and cpu/auto are counted; GPU ids, cuda, and
    an empty value are refused; gpu needs CUDA."""
    import torch
    from torch.distributed.run import determine_local_world_size

    assert determine_local_world_size("3") == 3
    assert determine_local_world_size("cpu") >= 1
    assert determine_local_world_size("auto") >= 1
    for value in ("0,1", "cuda", "8gpu", ""):
        with pytest.raises(ValueError, match="Unsupported nproc_per_node value"):
            determine_local_world_size(value)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="^Cuda is not available.$"):
            determine_local_world_size("gpu")
    cause = flat(knowledge.pitfall("torchrun-nproc-per-node-value").cause)
    assert "one of the words `cpu`, `gpu`, `xpu` and `auto`" in cause
    assert "`gpu` fails instead with `ValueError: Cuda is not available.`" in cause


_WAIT_IN_BARRIER = """
import time
from datetime import timedelta

import torch.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=3))
if dist.get_rank() == 0:
    time.sleep(8)  # the main process prepares the data alone
try:
    dist.barrier()
    print(f"rank {dist.get_rank()}: released", flush=True)
except RuntimeError as error:
    print(f"rank {dist.get_rank()}: {error}", flush=True)
"""


def test_a_rank_waiting_for_the_main_process_fails_at_the_groups_timeout(tmp_path):
    """main-process-first-timeout: a barrier waits no longer than the group's timeout."""
    result = run_script(tmp_path, "wait.py", _WAIT_IN_BARRIER, 2, timeout=90)
    assert "rank 1: " in result.stdout, result.stdout + result.stderr[-2000:]
    assert "Timed out waiting 3000ms for recv operation to complete" in result.stdout
    assert "rank 1: released" not in result.stdout
    cause = flat(knowledge.pitfall("main-process-first-timeout").cause)
    assert "Reproduced with Gloo and a 3-second timeout" in cause


def test_main_process_first_is_a_pair_of_barriers_in_transformers_and_accelerate():
    """main-process-first-timeout: where the waiting ranks wait, and the Trainer's timeout."""
    import dataclasses

    from accelerate import PartialState
    from accelerate.utils import InitProcessGroupKwargs
    from transformers import TrainingArguments

    source = inspect.getsource(TrainingArguments.main_process_first)
    assert source.count("dist.barrier()") == 2
    assert "yield from self._goes_first(self.is_main_process)" in inspect.getsource(
        PartialState.main_process_first
    )
    assert "self.wait_for_everyone()" in inspect.getsource(PartialState._goes_first)
    fields = {f.name: f.default for f in dataclasses.fields(TrainingArguments)}
    assert fields["ddp_timeout"] == 1800
    assert "timeout" in {f.name for f in dataclasses.fields(InitProcessGroupKwargs)}


def _deepspeed_launch(monkeypatch, tmp_path, *flags: str):
    """accelerate launch's DeepSpeed command and arguments for two machines of 8 GPUs."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    monkeypatch.setenv("HF_HOME", str(tmp_path))  # no user config file behind the defaults
    args = launch_command_parser().parse_args(
        ["--use_deepspeed", "--zero_stage", "3", "--num_machines", "2", "--machine_rank", "0",
         "--num_processes", "16", "--main_process_ip", "10.0.0.1", "--main_process_port",
         "29500", "--deepspeed_hostfile", "hostfile", "--mixed_precision", "no", *flags,
         "train.py"]
    )  # fmt: skip
    args = _validate_launch_command(args)[0]
    args.deepspeed_fields_from_accelerate_config = []  # what launch_command sets from a file
    command, _ = prepare_deepspeed_cmd_env(args)
    return command, args


def test_accelerate_deepspeed_on_several_machines_is_one_hostfile_command_or_torchrun_on_each(
    monkeypatch, tmp_path
):
    """multi-node-launch, DeepSpeed's hostfile: by default Accelerate runs DeepSpeed's own
    launcher from machine 0 over pdsh; with the standard launcher, torchrun on each machine."""
    pytest.importorskip("accelerate")
    from accelerate.utils.constants import DEEPSPEED_MULTINODE_LAUNCHERS

    command, _ = _deepspeed_launch(monkeypatch, tmp_path)
    assert command == [
        "deepspeed", "--hostfile", "hostfile", "--no_local_rank", "--launcher", "pdsh",
        "--num_gpus", "8", "--master_addr", "10.0.0.1", "--master_port", "29500", "train.py",
    ]  # fmt: skip
    assert DEEPSPEED_MULTINODE_LAUNCHERS[:2] == ["pdsh", "standard"]
    command, args = _deepspeed_launch(
        monkeypatch, tmp_path, "--deepspeed_multinode_launcher", "standard"
    )
    assert command is None
    assert (args.nproc_per_node, args.nnodes, args.node_rank) == ("8", "2", 0)
    text = section("multi-node-launch", "DeepSpeed's hostfile")
    assert (
        "`deepspeed --hostfile <deepspeed_hostfile> --no_local_rank --launcher pdsh "
        "--num_gpus <per machine> --master_addr <main_process_ip> ...`"
    ) in text
    assert "With `deepspeed_multinode_launcher: standard` it launches like every other mode" in text


def test_the_deepspeed_to_fsdp_table_names_real_accelerate_options():
    """accelerate-fsdp, 'From a DeepSpeed config': every DeepSpeed key of the table is an
    option of accelerate launch's DeepSpeed group, every FSDP key a mined fsdp_config key, and
    the facts the notes give hold in the installed torch."""
    pytest.importorskip("accelerate")
    from accelerate.commands.launch import launch_command_parser
    from torch.distributed.fsdp import CPUOffloadPolicy
    from torch.distributed.optim import ZeroRedundancyOptimizer  # noqa: F401 (ZeRO-1's row)

    group = next(
        g for g in launch_command_parser()._action_groups if g.title == "DeepSpeed Arguments"
    )
    deepspeed_options = {a.option_strings[0].lstrip("-") for a in group._group_actions}
    fsdp_keys = {row["key"] for row in knowledge.hf_fsdp_keys()["accelerate_config"]}
    body = guide("accelerate-fsdp").body
    start = body.index("| `deepspeed_config:` | `fsdp_config:` |")
    rows = [line for line in body[start:].splitlines()[2:] if line.startswith("|")]
    assert len(rows) == 8
    for row in rows:
        left, right = row.split(" | ")[:2]
        for key in re.findall(r"`(\w+)(?::[^`]*)?`", left):
            assert key in deepspeed_options, f"{key}: not an accelerate DeepSpeed option"
        for key in re.findall(r"`(fsdp_\w+)(?::[^`]*)?`", right):
            assert key in fsdp_keys, f"{key}: not an fsdp_config key"
    assert "the optimizer step runs on CPU" in flat(CPUOffloadPolicy.__doc__)
    assert "mixed_precision" in knowledge.hf_fsdp_keys()["accelerate_file"]["top_level_keys"]


_BARRIER_WITH_DEVICE_IDS = """
import os

import torch.distributed as dist

dist.init_process_group("gloo")
dist.barrier(device_ids=[int(os.environ["LOCAL_RANK"])])
print(f"rank {dist.get_rank()}: passed", flush=True)
dist.destroy_process_group()
"""


def test_a_gloo_barrier_takes_device_ids(tmp_path):
    """barrier-device-ids-on-gloo: the installed torch has no backend check on device_ids (2.0
    had one), takes the first id as the barrier's device, and runs the barrier on Gloo."""
    source = inspect.getsource(dist.barrier)
    assert "not supported for the selected backend" not in source
    assert "opts.device = torch.device(device.type, device_ids[0])" in source
    result = run_script(tmp_path, "barrier.py", _BARRIER_WITH_DEVICE_IDS, 2, timeout=90, check=True)
    assert "rank 0: passed" in result.stdout and "rank 1: passed" in result.stdout
    cause = flat(knowledge.pitfall("barrier-device-ids-on-gloo").cause)
    assert "uses its first entry as the barrier's device, and the installed torch 2.13" in cause


def test_detail_wraps_every_group_with_a_gloo_helper_group():
    """debug-detail-on-some-ranks and debugging: the checker of DETAIL runs on a Gloo group
    that each wrapped group creates, which every rank of it must join."""
    c10d = importlib.import_module("torch.distributed.distributed_c10d")
    helper = inspect.getsource(c10d._create_process_group_wrapper)
    assert "helper_pg = ProcessGroupGloo(store, rank, world_size" in helper
    assert c10d.PG_WRAPPER_STORE_PREFIX == "pg_wrapper"
    created = inspect.getsource(c10d._new_process_group_helper)
    assert "get_debug_level() == DebugLevel.DETAIL" in created
    cause = flat(knowledge.pitfall("debug-detail-on-some-ranks").cause)
    assert "`_create_process_group_wrapper` in torch 2.13's `distributed_c10d`" in cause
    assert "a Gloo helper group created beside each process group" in section(
        "debugging", "TORCH_DISTRIBUTED_DEBUG"
    )
