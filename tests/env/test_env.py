"""``fsdp-skill env``: the doctor on this machine and on simulated GPU and CPU hosts."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fsdp_skill.doctor import Host, env, varinfo
from fsdp_skill.doctor import topics as topics_module
from fsdp_skill.doctor.advice import ifname_matches
from fsdp_skill.doctor.host import fake_runner, run_command
from fsdp_skill.doctor.probes import parse_topology
from tests.cli import fsdp
from tests.env.fakehost import (
    QUERY,
    TOPO,
    add_interface,
    add_rdma,
    cpu_host,
    fake_torch,
    gpu_host,
    gpu_query,
    topo_matrix,
)


def warning_ids(report: dict) -> set[str]:
    return {w["id"] for w in report["warnings"]}


# --- this machine --------------------------------------------------------------------------


def test_env_json_on_this_machine_is_fast_and_imports_no_torch():
    code = (
        "import json, sys, time\n"
        "t = time.perf_counter()\n"
        "from fsdp_skill.doctor import env\n"
        "report = env()\n"
        "print(json.dumps({'s': time.perf_counter() - t, 'torch': 'torch' in sys.modules,"
        " 'backend': report['backend_recommendation']['backend']}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    measured = json.loads(done.stdout)
    assert measured["torch"] is False
    assert measured["s"] < 2.0
    if shutil.which("nvidia-smi") is None:
        assert measured["backend"] == "gloo"


def test_env_cli_json_and_text():
    started = time.perf_counter()
    result = fsdp("env", "--json")
    elapsed = time.perf_counter() - started
    assert result.code == 0, result.err
    report = result.json()
    for key in ("torch", "cuda", "nccl", "devices", "backend_recommendation", "env_vars"):
        assert key in report
    assert isinstance(report["warnings"], list)
    assert elapsed < 10  # the whole process, interpreter start included, on a shared CPU
    text = fsdp("env", "--for", "init")
    assert text.code == 0
    assert f"backend: {report['backend_recommendation']['backend']}" in text.out
    assert "to investigate init" in text.out


def test_env_cli_rejects_an_unknown_topic():
    result = fsdp("env", "--for", "weather")
    assert result.code == 2
    assert "weather" in result.err and "Traceback" not in result.err


def test_env_library_rejects_an_unknown_topic():
    from fsdp_skill.errors import UsageError

    with pytest.raises(UsageError, match="unknown topic"):
        env("weather")


# --- simulated GPU hosts ------------------------------------------------------------------


def test_gpu_host_with_infiniband_gets_nccl(tmp_path: Path):
    report = env(host=gpu_host(tmp_path, gpus=8, link="NV18", rdma="InfiniBand"))
    rec = report["backend_recommendation"]
    assert rec["backend"] == "nccl"
    assert "InfiniBand" in rec["why"] and "mlx5_0" in rec["why"]
    assert len(report["devices"]) == 8
    assert report["devices"][0]["memory_bytes"] == 81559 * 2**20
    assert report["interconnect"]["nvlink"] is True
    assert report["interconnect"]["link_counts"] == {"NV": 28}
    assert report["interconnect"]["nics"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert report["cuda"]["build"] == "12.8" and report["cuda"]["driver"] == "550.54.15"
    assert report["nccl"]["available"] is True
    assert [p["state"] for p in report["infiniband"]] == ["ACTIVE", "ACTIVE"]
    assert warning_ids(report) == set()


def test_gpu_host_with_ethernet_gets_nccl_and_interface_advice(tmp_path: Path):
    host = gpu_host(tmp_path, gpus=4, link="SYS", rdma=None, interfaces=("ens5", "ens6"))
    report = env(host=host)
    rec = report["backend_recommendation"]
    assert rec["backend"] == "nccl"
    assert "Ethernet" in rec["why"] and "sockets" in rec["why"]
    assert report["interconnect"]["nvlink"] is False
    assert "several-interfaces" in warning_ids(report)
    exports = {e["name"]: e["value"] for e in report["exports"]}
    assert exports["NCCL_SOCKET_IFNAME"] == "ens5"  # the default route's interface
    docker = next(i for i in report["interfaces"] if i["name"] == "docker0")
    assert docker["candidate"] is False


def test_gpu_host_with_roce_names_it(tmp_path: Path):
    report = env(host=gpu_host(tmp_path, rdma="Ethernet"))
    assert report["backend_recommendation"]["backend"] == "nccl"
    assert "RoCE" in report["backend_recommendation"]["why"]


def test_setting_the_interface_silences_the_warning(tmp_path: Path):
    host = gpu_host(
        tmp_path, rdma=None, interfaces=("ens5", "ens6"), env={"NCCL_SOCKET_IFNAME": "ens6"}
    )
    report = env(host=host)
    assert "several-interfaces" not in warning_ids(report)
    assert "NCCL_SOCKET_IFNAME" not in {e["name"] for e in report["exports"]}
    assert report["env_vars"]["NCCL_SOCKET_IFNAME"] == "ens6"


def test_p2p_disabled_is_flagged_only_with_nvlink(tmp_path: Path):
    nvlink = env(host=gpu_host(tmp_path / "a", link="NV12", env={"NCCL_P2P_DISABLE": "1"}))
    assert "p2p-disabled-on-nvlink" in warning_ids(nvlink)
    pcie = env(host=gpu_host(tmp_path / "b", link="PHB", env={"NCCL_P2P_DISABLE": "1"}))
    assert "p2p-disabled-on-nvlink" not in warning_ids(pcie)


def test_ib_disabled_and_ports_down(tmp_path: Path):
    report = env(host=gpu_host(tmp_path / "a", env={"NCCL_IB_DISABLE": "1"}))
    assert "ib-disabled" in warning_ids(report)
    host = gpu_host(tmp_path / "b", rdma=None)
    add_rdma(tmp_path / "b", "mlx5_0", state="1: DOWN")
    down = env(host=host)
    assert "rdma-ports-down" in warning_ids(down)
    assert "sockets" in down["backend_recommendation"]["why"]


def test_gpus_without_a_near_nic(tmp_path: Path):
    report = env(host=gpu_host(tmp_path / "a", far=(6, 7)))
    far = [w for w in report["warnings"] if w["id"] == "gpus-far-from-nics"]
    assert len(far) == 1 and far[0]["message"].startswith("GPU6, GPU7 reach")
    no_rdma = env(host=gpu_host(tmp_path / "b", rdma=None, far=(6, 7)))
    assert "gpus-far-from-nics" not in warning_ids(no_rdma)


def test_for_says_what_is_set_now(tmp_path: Path):
    advice = env("init", host=gpu_host(tmp_path, env={"NCCL_DEBUG": "WARN"}))["for"]
    current = {e["name"]: e["current"] for e in advice["exports"]}
    assert current["NCCL_DEBUG"] == "WARN" and current["TORCH_CPP_LOG_LEVEL"] is None


def test_launcher_without_master_addr(tmp_path: Path):
    slurm = {"SLURM_JOB_ID": "42", "SLURM_PROCID": "0", "RANK": "0", "WORLD_SIZE": "16"}
    report = env(host=gpu_host(tmp_path / "a", env=slurm))
    assert report["launcher"] == "slurm"
    assert "master-addr-unset" in warning_ids(report)
    assert report["env_vars"]["SLURM_PROCID"] == "0"
    torchrun = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "2"}
    assert "master-addr-unset" not in warning_ids(env(host=gpu_host(tmp_path / "b", env=torchrun)))
    ready = dict(slurm, MASTER_ADDR="node1", MASTER_PORT="29500")
    assert warning_ids(env(host=gpu_host(tmp_path / "c", env=ready))) == set()


def test_launcher_without_rank(tmp_path: Path):
    mpi = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "MASTER_ADDR": "n1"}
    report = env(host=cpu_host(tmp_path, env=dict(mpi, MASTER_PORT="29500")))
    assert report["launcher"] == "open-mpi"
    assert warning_ids(report) == {"rank-unset"}
    assert "OMPI_COMM_WORLD_RANK" in report["warnings"][0]["message"]


def test_more_local_ranks_than_gpus(tmp_path: Path):
    torchrun = {"TORCHELASTIC_RUN_ID": "x", "LOCAL_WORLD_SIZE": "8", "MASTER_ADDR": "a"}
    assert "more-ranks-than-gpus" in warning_ids(
        env(host=gpu_host(tmp_path / "a", gpus=4, env=torchrun))
    )
    masked = dict(torchrun, CUDA_VISIBLE_DEVICES="0,1")
    report = env(host=gpu_host(tmp_path / "b", gpus=8, env=masked))
    message = next(w["message"] for w in report["warnings"] if w["id"] == "more-ranks-than-gpus")
    assert "only 2 GPU(s)" in message
    assert "more-ranks-than-gpus" not in warning_ids(
        env(host=gpu_host(tmp_path / "c", gpus=8, env=torchrun))
    )


def test_old_variable_names_from_the_knowledge(tmp_path: Path):
    renames = varinfo.renamed()
    if "NCCL_ASYNC_ERROR_HANDLING" not in renames:
        pytest.skip("the knowledge does not record the 2.2 rename of NCCL_ASYNC_ERROR_HANDLING")
    assert renames["NCCL_ASYNC_ERROR_HANDLING"] == ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2.2")
    report = env(host=gpu_host(tmp_path / "a", env={"NCCL_ASYNC_ERROR_HANDLING": "1"}))
    message = next(w["message"] for w in report["warnings"] if w["id"] == "renamed-variable")
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING=1" in message
    both = {"NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
    assert "renamed-variable" not in warning_ids(env(host=gpu_host(tmp_path / "b", env=both)))


def test_half_set_rank_variables(tmp_path: Path):
    report = env(host=cpu_host(tmp_path, env={"RANK": "3"}))
    assert "rank-vars-incomplete" in warning_ids(report)


def test_cpu_only_torch_on_a_gpu_host(tmp_path: Path):
    report = env(host=gpu_host(tmp_path, cuda=None))
    assert "cpu-only-torch" in warning_ids(report)
    assert report["backend_recommendation"]["backend"] == "nccl"


def test_hidden_and_mixed_gpus(tmp_path: Path):
    host = gpu_host(tmp_path, gpus=2, env={"CUDA_VISIBLE_DEVICES": ""})
    mixed = gpu_query(1) + gpu_query(1, name="NVIDIA A100-SXM4-40GB", mib=40960).replace(
        "0, ", "1, ", 1
    )
    host = Host(
        root=host.root,
        env=host.env,
        run=fake_runner({QUERY: mixed, TOPO: topo_matrix(2, "NV12")}),
        torch_dir=host.torch_dir,
    )
    assert {"no-visible-gpus", "mixed-gpus"} <= warning_ids(env(host=host))


def test_interface_variable_that_matches_nothing(tmp_path: Path):
    report = env(host=gpu_host(tmp_path, env={"NCCL_SOCKET_IFNAME": "ib"}))
    assert "ifname-matches-nothing" in warning_ids(report)


@pytest.mark.parametrize(
    ("value", "nccl", "expected"),
    [
        ("eth", True, ["eth0", "eth1"]),
        ("=eth", True, []),
        ("=eth1", True, ["eth1"]),
        ("^docker,lo", True, ["eth0", "eth1", "ib0"]),
        ("^=eth0", True, ["docker0", "eth1", "ib0", "lo"]),
        ("eth0,ib", True, ["eth0", "ib0"]),
        ("eth", False, []),
        ("eth1,ib0", False, ["eth1", "ib0"]),
    ],
)
def test_ifname_semantics(value: str, nccl: bool, expected: list[str]):
    names = ["docker0", "eth0", "eth1", "ib0", "lo"]
    assert ifname_matches(value, names, nccl) == expected


# --- simulated CPU hosts ------------------------------------------------------------------


def test_cpu_host_gets_gloo(tmp_path: Path):
    report = env(host=cpu_host(tmp_path))
    rec = report["backend_recommendation"]
    assert rec["backend"] == "gloo" and "CPU" in rec["why"]
    assert report["gloo"]["available"] is True and report["nccl"]["available"] is False
    assert report["devices"] == [] and report["interconnect"] is None
    assert any("nvidia-smi" in u for u in report["unknown"])
    assert {e["name"]: e["value"] for e in report["exports"]} == {"GLOO_SOCKET_IFNAME": "eth0"}


def test_cpu_host_on_infiniband_without_ipoib(tmp_path: Path):
    host = cpu_host(tmp_path / "a", backends=("gloo", "mpi"))
    add_rdma(tmp_path / "a", "mlx5_0")
    assert env(host=host)["backend_recommendation"]["backend"] == "mpi"
    plain = cpu_host(tmp_path / "b")
    add_rdma(tmp_path / "b", "mlx5_0")
    rec = env(host=plain)["backend_recommendation"]
    assert rec["backend"] == "gloo" and "not built with MPI" in rec["why"]


def test_cpu_host_with_ip_over_infiniband(tmp_path: Path):
    host = cpu_host(tmp_path)
    add_rdma(tmp_path, "mlx5_0")
    add_interface(tmp_path, "ib0", if_type=32)
    report = env(host=host)
    assert report["backend_recommendation"]["backend"] == "gloo"
    assert "ib0" in report["backend_recommendation"]["why"]
    exports = {e["name"]: e["value"] for e in report["exports"]}
    assert exports == {"GLOO_SOCKET_IFNAME": "ib0"}


def test_without_torch_it_says_what_it_cannot_know(tmp_path: Path):
    host = cpu_host(tmp_path)
    report = env(host=Host(root=host.root, env={}, run=host.run, torch_dir=None))
    assert report["torch"] == {"installed": False, "imported": False}
    assert report["nccl"]["available"] is None
    assert any("torch is not installed" in u for u in report["unknown"])
    assert report["backend_recommendation"]["backend"] == "gloo"


def test_unreadable_sys_is_reported_not_raised(tmp_path: Path):
    report = env(host=Host(root=tmp_path / "nothing", env={}, run=fake_runner({}), torch_dir=None))
    assert report["interfaces"] == []
    assert any("/sys/class/net" in u for u in report["unknown"])


# --- probes bounded in time -------------------------------------------------------------


def _fake_exe(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_hanging_nvidia_smi_is_cut_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _fake_exe(tmp_path / "bin", "nvidia-smi", "sleep 30")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    host = Host(root=tmp_path, env={}, run=run_command, torch_dir=None, command_timeout=0.5)
    started = time.perf_counter()
    report = env(host=host)
    assert time.perf_counter() - started < 5
    assert any("did not answer within 0.5 s" in u for u in report["unknown"])


def test_a_failing_nvidia_smi_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _fake_exe(tmp_path / "bin", "nvidia-smi", "echo 'NVIDIA-SMI has failed' >&2; exit 9")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    report = env(host=Host(root=tmp_path, env={}, run=run_command, torch_dir=None))
    assert any("NVIDIA-SMI has failed" in u for u in report["unknown"])


def test_a_hanging_torch_import_is_cut_off(tmp_path: Path):
    python = _fake_exe(tmp_path / "bin", "python", "sleep 30")
    host = cpu_host(tmp_path)
    host = Host(root=host.root, env={}, run=host.run, torch_dir=host.torch_dir, python=str(python))
    started = time.perf_counter()
    report = env(host=host, deep=True, deep_timeout=1)
    assert time.perf_counter() - started < 6
    assert any("did not finish within 1 s" in u for u in report["unknown"])
    assert report["torch"]["imported"] is False


@pytest.mark.torch
def test_static_backend_probe_agrees_with_torch_itself():
    pytest.importorskip("torch")
    static = env()
    deep = env(deep=True, deep_timeout=120)
    assert deep["torch"]["imported"] is True
    for name in ("nccl", "gloo", "mpi", "xccl"):
        assert static[name]["available"] == deep[name]["available"], name
    assert static["torch"]["version"] == deep["torch"]["version"]


# --- topology parsing and --for ---------------------------------------------------------


def test_parse_topology_tabs_and_pasted_spaces():
    tabbed = topo_matrix(4, "NV4", nics=1, far=(3,))
    spaced = tabbed.replace("\t", "    ")
    for text in (tabbed, spaced, f"\x1b[4m{tabbed}\x1b[0m"):
        topo = parse_topology(text)
        assert topo["gpus"] == 4 and topo["nvlink"] is True
        assert topo["gpu_pairs"]["GPU0-GPU3"] == "NV4"
        assert topo["matrix"]["NIC0"]["GPU0"] == "PXB" and topo["matrix"]["GPU3"]["NIC0"] == "SYS"
        assert topo["nics"] == {"NIC0": "mlx5_0"}
        assert topo["nearest_nic"]["GPU0"] == {"nic": "NIC0", "device": "mlx5_0", "link": "PXB"}
        assert topo["nearest_nic"]["GPU3"]["link"] == "SYS"


def test_parse_topology_of_a_single_gpu():
    topo = parse_topology("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-31\t0\n")
    assert topo["gpus"] == 1 and topo["gpu_pairs"] == {} and topo["nvlink"] is False


@pytest.mark.parametrize("topic", sorted(topics_module.TOPICS))
def test_for_topic_on_a_gpu_host(tmp_path: Path, topic: str):
    report = env(topic, host=gpu_host(tmp_path))
    advice = report["for"]
    assert advice["topic"] == topic and advice["backend"] == "nccl"
    assert advice["exports"] and all(e["applies"] for e in advice["exports"])
    assert all(e["shows"] and e["source"].startswith("https://") for e in advice["exports"])
    for e in advice["exports"]:
        assert f"export {e['name']}=" in advice["shell"]


def test_for_hang_on_a_cpu_host_keeps_only_what_applies(tmp_path: Path):
    advice = env("hang", host=cpu_host(tmp_path))["for"]
    applied = [e["name"] for e in advice["exports"] if e["applies"]]
    assert "TORCH_DISTRIBUTED_DEBUG" in applied
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in applied
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in advice["shell"]


def test_for_uses_the_knowledge_when_it_describes_a_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from fsdp_skill.knowledge import EnvVar

    entry = EnvVar(
        name="NCCL_DEBUG",
        backend="nccl",
        what="NCCL log level",
        values="VERSION, WARN, INFO, TRACE",
        when="hang, init",
        since="",
        source="https://example.org/nccl",
        shows="a sentence from the knowledge",
    )
    monkeypatch.setattr(varinfo, "known", lambda: {"NCCL_DEBUG": entry})
    exports = env("hang", host=gpu_host(tmp_path))["for"]["exports"]
    nccl_debug = next(e for e in exports if e["name"] == "NCCL_DEBUG")
    assert nccl_debug["shows"] == "a sentence from the knowledge"
    assert nccl_debug["described_by"] == "knowledge"


def test_for_leaves_out_variables_newer_than_the_torch(tmp_path: Path):
    host = gpu_host(tmp_path)
    (host.torch_dir / "version.py").write_text("__version__ = '2.3.1+cu121'\ncuda = '12.1'\n")
    knowledge = varinfo.known()
    if varinfo.since(knowledge.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")) != "2.5":
        pytest.skip("the knowledge does not date TORCH_NCCL_DEBUG_INFO_TEMP_FILE to 2.5")
    exports = {e["name"]: e for e in env("hang", host=host)["for"]["exports"]}
    old = exports["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]
    assert old["applies"] is False and old["needs_torch"] == ">=2.5"
    assert exports["NCCL_DEBUG"]["applies"] is True


def test_fake_torch_reader_sees_cuda_builds(tmp_path: Path):
    torch_dir = fake_torch(tmp_path, "12.8", ("gloo", "nccl", "ucc"))
    report = env(host=Host(root=tmp_path, env={}, run=fake_runner({}), torch_dir=torch_dir))
    assert report["torch"]["cuda_build"] == "12.8"
    assert report["nccl"]["available"] is True
    assert report["torch"]["version"] == "2.13.0+cu128"


def test_text_report_of_a_gpu_host(tmp_path: Path):
    from fsdp_skill.doctor.text import format_report

    host = gpu_host(tmp_path, interfaces=("ens5", "ens6"), env={"NCCL_P2P_DISABLE": "1"})
    text = format_report(env("topology", host=host))
    assert "devices     8 x NVIDIA H100 80GB HBM3 80 GiB (cuda:0-7)" in text
    assert "GPU links   NVLink (NV x28)" in text
    assert "backend: nccl" in text
    assert "export NCCL_SOCKET_IFNAME=ens5" in text
    assert "! NCCL_P2P_DISABLE is set" in text
    assert "export NCCL_TOPO_DUMP_FILE=" in text
