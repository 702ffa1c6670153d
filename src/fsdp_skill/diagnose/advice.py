"""What to do about each hang verdict, which pitfalls explain it, what to turn on next time."""

from __future__ import annotations

from fsdp_skill import knowledge
from fsdp_skill.diagnose import align

ADVICE = {
    align.MISSING: [
        "Look at the culprit ranks' own logs around the first divergence: an exception, an early "
        "exit, a data-loader stall or a branch on the rank (`if rank == 0:` around a collective, "
        "an uneven number of batches) kept them from the collective the others are waiting in.",
        "Every rank must run the same collectives in the same order: move collectives out of "
        "rank-dependent branches, give every rank the same number of steps (e.g. a "
        "DistributedSampler with drop_last=True), and make checkpoint and logging code that "
        "calls collectives run on all ranks.",
    ],
    align.EXTRA: [
        "The culprit ranks ran a collective that the other ranks never reached: look for a "
        "collective under a rank-dependent branch (an extra all_reduce for logging, a "
        "barrier only rank 0 runs) or for ranks that ran more steps than the others.",
    ],
    align.OP_MISMATCH: [
        "The ranks called different collectives at the same point: a branch on the rank or on "
        "data that differs per rank chose a different code path. Make the sequence of "
        "collectives identical on every rank.",
    ],
    align.SIZE_MISMATCH: [
        "The ranks called the same collective with different sizes or dtypes: check per-rank "
        "shapes (uneven last batch, padding, a model built differently on one rank, a tensor "
        "cast only on some ranks) and that every rank wraps the same modules the same way.",
    ],
    align.ALL_WAITING: [
        "Every rank waits in the same collective, so the program agrees with itself: suspect the "
        "transport (network interface, InfiniBand/RoCE, a dead or slow node, a GPU fault) or a "
        "collective that is too slow for the timeout.",
        "Check that the intended network interface is used (NCCL_SOCKET_IFNAME / "
        "GLOO_SOCKET_IFNAME), run a standalone all_reduce test between the same nodes, and "
        "look at the NCCL WARN lines and the system log of each node.",
    ],
    align.ALONE: [
        "Only one rank's output was given, and it waits in the collective named above (its "
        "sequence number and the last one it completed tell how far it got). A hang is decided "
        "by the ranks that are not there: give every rank's log (torchrun --log-dir DIR --tee 3, "
        "or one file per rank) or their flight-recorder dumps, and run `fsdp-skill hang` on all "
        "of them.",
        "The rank that never reached this collective is the culprit; the timed-out rank itself "
        "is usually innocent.",
    ],
    align.NO_DIVERGENCE: [
        "No divergence between the ranks was found in these inputs. Give the logs of every rank "
        "(including the quiet ones) and rerun with the settings below so the next hang leaves a "
        "trace of each rank's collectives.",
    ],
}

NEXT_RUN_ENV = {
    "TORCH_DISTRIBUTED_DEBUG": (
        "DETAIL",
        "checks every collective's op, shapes and dtypes across ranks and names the mismatch "
        "(slow: for debugging runs only)",
        "c10d-detail",
    ),
    "NCCL_DEBUG": ("INFO", "NCCL logs communicator set-up and warnings", "nccl-coll"),
    "NCCL_DEBUG_SUBSYS": (
        "COLL",
        "with NCCL_DEBUG=INFO, one line per collective per rank",
        "nccl-coll",
    ),
    "TORCH_FR_BUFFER_SIZE": (
        "2000",
        "turns on the flight recorder: the last N collectives of every rank, with stacks",
        "flight-recorder",
    ),
    "TORCH_NCCL_DUMP_ON_TIMEOUT": (
        "1",
        "writes each rank's flight-recorder buffer when the watchdog times out",
        "flight-recorder",
    ),
    "TORCH_FR_DUMP_TEMP_FILE": (
        "/tmp/fr_trace_rank_",
        "where the dumps go (the rank number is appended); analyse them with `fsdp-skill hang`",
        "flight-recorder",
    ),
}


def pitfalls_for(verdict: str) -> list[str]:
    """Ids of the pitfalls whose ``hang_verdicts`` name this verdict."""
    return [p.id for p in knowledge.pitfalls() if verdict in p.hang_verdicts]


def next_run_env(kinds_seen: set[str]) -> list[dict]:
    """Settings for the next run that would have produced the evidence these inputs lack."""
    return [
        {"name": name, "value": value, "why": why}
        for name, (value, why, kind) in NEXT_RUN_ENV.items()
        if kind not in kinds_seen
    ]
