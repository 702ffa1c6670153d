"""Facts the launch pitfalls state, checked against the installed torch and accelerate.

torchrun-libuv-on-windows, torchrun-not-on-path and device-map-auto-under-distributed explain
their errors with how the packages behave; these tests fail when a release changes that.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import sys

import pytest
import torch.distributed as dist

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
