"""Measured CPU times of the step-time model's compute and optimizer terms, and the planner's
predictions of them (one thread, timed in thread CPU time: other processes on the machine
take cores, not CPU time, so the figures stay put under load).

Compute: forward + backward of two Llama models of different widths, with and without
activation checkpointing, next to a baseline measured in the same run (an fp32 matmul's
FLOP/s). The planner's compute term for the larger model is predicted from the MFU measured
on the smaller, as a user would: measure once, plan the rest.
Optimizer: the fused CPU AdamW over two parameter sets far larger than the cache, the
planner's offload optimizer term for the second predicted from the rate measured on the
first.

Prints one ``RESULT`` JSON line.
"""

import json
import statistics
import time

import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing,
)
from transformers import AutoConfig, LlamaForCausalLM

from fsdp_skill.plan import step
from fsdp_skill.plan.model import from_hf_config, from_param_count
from fsdp_skill.plan.planner import build_setup
from fsdp_skill.plan.strategies import Strategy

SMALL = dict(
    hidden_size=256,
    intermediate_size=688,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=2048,
)
LARGE = dict(
    hidden_size=512,
    intermediate_size=1376,
    num_hidden_layers=4,
    num_attention_heads=8,
    num_key_value_heads=4,
    vocab_size=4096,
)
SEQ, BATCH, REPEATS = 256, 2, 5
OPTIMIZER_ROUNDS = 40


def cpu_seconds(fn, repeats: int = REPEATS) -> float:
    """The least thread CPU time of ``repeats`` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best


def matmul_flops() -> float:
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    return 2 * 1024**3 / cpu_seconds(lambda: a @ b)


def train_step(config: dict, checkpointing: bool):
    cfg = AutoConfig.for_model("llama", use_cache=False, **config)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    if checkpointing:
        cls = type(model.model.layers[0])
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, cls))
    ids = torch.randint(0, config["vocab_size"], (BATCH, SEQ))

    def run():
        model(input_ids=ids, labels=ids).loss.backward()
        model.zero_grad(set_to_none=True)

    run()
    return run


def planned(config: dict, checkpointing: bool, **options) -> step.StepTime:
    spec = from_hf_config({"model_type": "llama", **config})
    setup = build_setup(
        spec, gpus=1, gpu_memory="1TB", seq_len=SEQ, micro_batch=BATCH, precision="fp32", **options
    )
    return step.estimate(setup, Strategy("full-shard", checkpointing=checkpointing))


def layer_params(hidden: int, total: float) -> list:
    ffn = 256 * round(8 * hidden / 3 / 256)
    shapes = [(hidden, hidden)] * 4 + [(ffn, hidden)] * 3 + [(hidden,)] * 2
    params, count = [], 0
    while count < total:
        for shape in shapes:
            p = torch.nn.Parameter(torch.randn(shape))
            p.grad = torch.randn(shape)
            params.append(p)
            count += p.numel()
    return params


def adamw_seconds(*param_sets: list) -> list:
    """The least thread CPU time of a fused AdamW step over each parameter set, the sets'
    steps interleaved so that a spell of memory-bandwidth contention from other processes
    (stalls count as CPU time) slows every set alike instead of skewing their ratio. A step
    takes tens of milliseconds, so 40 rounds cost under two seconds; with 10, a CI run under
    the parallel suite found no quiet step for the smaller set and read +21%."""
    optimizers = [torch.optim.AdamW(params, lr=1e-4, fused=True) for params in param_sets]
    for optimizer in optimizers:
        optimizer.step()
    best = [float("inf")] * len(optimizers)
    for _ in range(OPTIMIZER_ROUNDS):
        for i, optimizer in enumerate(optimizers):
            best[i] = min(best[i], cpu_seconds(optimizer.step, 1))
    return best


def main() -> None:
    torch.set_num_threads(1)
    peak = matmul_flops()
    runs = {
        (name, ac): train_step(c, ac)
        for name, c in (("small", SMALL), ("large", LARGE))
        for ac in (False, True)
    }
    rounds = []
    for _ in range(2 * REPEATS):  # interleaved, so a slow spell hits every run alike
        rounds.append({key: cpu_seconds(run, 1) for key, run in runs.items()})
    measured = {key: min(r[key] for r in rounds) for key in runs}
    # checkpointing's cost as the median of ratios timed back to back: a short step's least
    # time alone moves with every pause, the ratio within one round much less
    ac_ratio = {
        name: statistics.median(r[name, True] / r[name, False] for r in rounds)
        for name in ("small", "large")
    }
    peak = max(peak, matmul_flops())
    small = planned(SMALL, False)
    mfu = small.flops / (measured["small", False] * peak)
    compute = {
        f"{name}{'+ac' if ac else ''}": {
            "measured": measured[name, ac],
            "planned": planned(config, ac, gpu_flops=peak, mfu=min(mfu, 1.0)).compute,
            "ratio": ac_ratio[name] if ac else 1.0,
        }
        for name, config in (("small", SMALL), ("large", LARGE))
        for ac in (False, True)
    }
    # the fused kernel, which the planner's offload snippet uses (the per-tensor loop's
    # rate depends on tensor sizes through its temporaries: benchmarks/cpu_adam.py has it)
    first, second = layer_params(1024, 16e6), layer_params(1536, 48e6)
    first_seconds, second_seconds = adamw_seconds(first, second)
    rate = sum(p.numel() for p in first) / first_seconds
    count = sum(p.numel() for p in second)
    # the planner's CPU optimizer term for a model of that many parameters on one GPU
    setup = build_setup(from_param_count(count), gpus=1, gpu_memory="1TB", cpu_adam_rate=rate)
    offload = step.estimate(setup, Strategy("full-shard", offload=True))
    optimizer = {
        "rate": rate,
        "params": count,
        "measured": second_seconds,
        "planned": offload.optimizer,
    }
    print(
        "RESULT "
        + json.dumps(
            {"matmul_flops": peak, "mfu": mfu, "compute": compute, "optimizer": optimizer}
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
