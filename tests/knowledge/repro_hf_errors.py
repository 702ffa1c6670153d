"""Provoke the Hugging Face FSDP errors that some pitfalls' signatures must match.

Run under ``torchrun --nproc_per_node 2`` (FSDP1 on one rank does not shard, so the generate
cases need two): rank 0 prints one JSON object ``{case: "ExceptionType: message"}``. Each case
uses Gloo and tiny models built here (no downloads), with the installed torch, transformers,
accelerate and peft, so a reworded message fails the test that reads it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn as nn


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    return LlamaForCausalLM(config)


def wrap_class_accelerate() -> None:
    from accelerate.utils import FullyShardedDataParallelPlugin

    plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2,
        auto_wrap_policy="transformer_based_wrap",
        transformer_cls_names_to_wrap=["LlamaBlock"],  # the class is LlamaDecoderLayer
    )
    plugin.set_auto_wrap_policy(_tiny_llama())


def wrap_class_peft() -> None:
    from peft.utils.other import fsdp_auto_wrap_policy

    os.environ["FSDP_TRANSFORMER_CLS_TO_WRAP"] = "LlamaBlock"
    try:
        fsdp_auto_wrap_policy(_tiny_llama())
    finally:
        del os.environ["FSDP_TRANSFORMER_CLS_TO_WRAP"]


def integer_flatten() -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    model = nn.Linear(4, 4)
    # What bitsandbytes' default uint8 quant storage looks like to FSDP: a frozen integer tensor.
    model.weight = nn.Parameter(torch.zeros(4, 4, dtype=torch.uint8), requires_grad=False)
    FSDP(model, device_id=torch.device("cpu"))


def _generate_fsdp1(use_orig_params: bool) -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    model = FSDP(_tiny_llama(), device_id=torch.device("cpu"), use_orig_params=use_orig_params)
    model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=2, do_sample=False)


def _resize_after_fully_shard(mean_resizing: bool) -> None:
    from torch.distributed.fsdp import fully_shard

    model = _tiny_llama()
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    model.resize_token_embeddings(72, mean_resizing=mean_resizing)


def resize_on_meta() -> None:
    # the weights a non-zero rank holds under fsdp_cpu_ram_efficient_loading, or under QLoRA
    with torch.device("meta"):
        model = _tiny_llama()
    model.resize_token_embeddings(72)


def device_map_auto() -> None:
    from accelerate import Accelerator

    model = _tiny_llama()
    # what from_pretrained(device_map="auto") records when it spreads a model over two GPUs
    model.hf_device_map = {"model": 0, "lm_head": 1}
    Accelerator(cpu=True).prepare(model)


def accelerate_unknown_key() -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    with tempfile.TemporaryDirectory() as folder:
        config = os.path.join(folder, "fsdp.yaml")
        with open(config, "w", encoding="utf-8") as f:  # an FSDP key outside fsdp_config
            f.write("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_version: 2\n")
        load_config_from_file(config)


CASES: dict[str, Callable[[], None]] = {
    "wrap_class_accelerate": wrap_class_accelerate,
    "wrap_class_peft": wrap_class_peft,
    "integer_flatten": integer_flatten,
    "generate_fsdp1_orig_params": lambda: _generate_fsdp1(True),
    "generate_fsdp1_flat_params": lambda: _generate_fsdp1(False),
    "accelerate_unknown_key": accelerate_unknown_key,
    "resize_after_fully_shard": lambda: _resize_after_fully_shard(True),
    "resize_after_fully_shard_no_mean": lambda: _resize_after_fully_shard(False),
    "resize_on_meta": resize_on_meta,
    "device_map_auto": device_map_auto,  # last: it leaves Accelerate's state set up
}


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    dist.init_process_group("gloo")
    messages = {}
    for name, case in CASES.items():
        try:
            case()
            messages[name] = ""
        except Exception as exc:  # the point is to record what the packages raise
            messages[name] = f"{type(exc).__name__}: {exc}"
    if dist.get_rank() == 0:
        sys.stdout.write("MESSAGES " + json.dumps(messages) + "\n")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
