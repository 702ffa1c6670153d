"""Honest signatures: each pitfall's error signatures match what torch really prints.

Errors that happen on CPU are reproduced by ``repro/errors.py`` under torchrun; the saved
output (``fixtures/``) is checked fast, and the slow tests run the programs again with the
installed torch, so a reworded message fails here. Errors that need a GPU are checked against
the error line as published in the issue named by the pitfall's ``signature_source``.
"""

from __future__ import annotations

import pytest

from fsdp_skill import knowledge
from fsdp_skill.diagnose import explain
from fsdp_skill.diagnose.matching import CONSEQUENCE_TAG
from tests.diagnose.capture import (
    BATCH_EXPECTED,
    CASE_EXPECTED,
    ERROR_FIXTURES,
    FIXTURES,
    RENDEZVOUS_EXPECTED,
    capture_batch,
    capture_rendezvous_timeout,
    split_batch,
)

PUBLISHED = {
    # pitfall id: error lines as published in the issue its signature_source names
    "nccl-watchdog-timeout": [
        "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 "
        "milliseconds before timing out.",
        "[rank4]:[E318 07:39:53.792790830 ProcessGroupNCCL.cpp:630] [Rank 4] Some NCCL "
        "operations have failed or timed out.",
    ],
    "nccl-duplicate-gpu": [
        "Duplicate GPU detected : rank 3 and rank 0 both on CUDA device f000",
    ],
    "nccl-unhandled-system-error": [
        "NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275,"
        " unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1",
        "ncclSystemError: System call (socket, malloc, munmap, etc) failed",
    ],
    "nccl-internal-error": [
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1333, internal error - please report this issue to the NCCL "
        "developers, NCCL version 2.18.1",
        "ncclInternalError: Internal check failed.",
    ],
    "nccl-invalid-usage": [
        "torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/"
        "distributed/c10d/ProcessGroupNCCL.cpp:1727, invalid usage (run with NCCL_DEBUG=WARN for "
        "details), NCCL version 2.19.3",
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
    ],
    "nccl-unhandled-cuda-error": [
        "[rank7]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/"
        "c10d/NCCLUtils.hpp:275, unhandled cuda error (run with NCCL_DEBUG=INFO for details), "
        "NCCL version 2.20.5",
        "[rank7]: ncclUnhandledCudaError: Call to CUDA function failed.",
    ],
    "cuda-oom-under-fsdp": [
        "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 5 "
        "has a total capacity of 23.43 GiB of which 210.06 MiB is free.",
    ],
}


def _reproduced_texts() -> list[str]:
    texts = [(ERROR_FIXTURES / "rendezvous_timeout.log").read_text(encoding="utf-8")]
    texts += list(split_batch((ERROR_FIXTURES / "batch.log").read_text(encoding="utf-8")).values())
    texts += [
        (FIXTURES / case / "torchrun.log").read_text(encoding="utf-8") for case in CASE_EXPECTED
    ]
    return texts


def _assert_explained(text: str, expected: str) -> None:
    matches = explain(text)["matches"]
    ids = [m["id"] for m in matches]
    assert expected in ids, f"{expected} not found in {ids}\n{text[-2000:]}"
    if CONSEQUENCE_TAG not in knowledge.pitfall(expected).tags:
        assert ids[0] == expected, f"{expected} should rank first: {ids}"


@pytest.mark.parametrize("scenario", sorted(BATCH_EXPECTED))
def test_batch_scenarios_are_explained(scenario):
    texts = split_batch((ERROR_FIXTURES / "batch.log").read_text(encoding="utf-8"))
    _assert_explained(texts[scenario], BATCH_EXPECTED[scenario])


@pytest.mark.parametrize("case", sorted(CASE_EXPECTED))
def test_multi_rank_failures_are_explained(case):
    text = (FIXTURES / case / "torchrun.log").read_text(encoding="utf-8")
    _assert_explained(text, CASE_EXPECTED[case])


def test_rendezvous_timeout_is_explained():
    text = (ERROR_FIXTURES / "rendezvous_timeout.log").read_text(encoding="utf-8")
    _assert_explained(text, RENDEZVOUS_EXPECTED)


REPRODUCED = [
    p for p in knowledge.pitfalls() if p.signature_source.startswith("reproduced: tests/diagnose/")
]
DOCUMENTED = [p for p in knowledge.pitfalls() if p.signature_source.startswith("documented:")]


@pytest.mark.parametrize("pitfall", REPRODUCED, ids=[p.id for p in REPRODUCED])
def test_every_reproduced_signature_matches_real_output(pitfall):
    texts = _reproduced_texts()
    for pattern in pitfall.compiled_signatures():
        assert any(pattern.search(t) for t in texts), (
            f"{pitfall.id}: {pattern.pattern!r} matches none of the reproduced outputs"
        )


@pytest.mark.parametrize("pitfall", DOCUMENTED, ids=[p.id for p in DOCUMENTED])
def test_every_documented_signature_matches_published_text(pitfall):
    lines = PUBLISHED.get(pitfall.id)
    assert lines, f"{pitfall.id}: quote the published error line in PUBLISHED"
    for pattern in pitfall.compiled_signatures():
        assert any(pattern.search(line) for line in lines), (
            f"{pitfall.id}: {pattern.pattern!r} matches none of the published lines"
        )
    assert explain("\n".join(lines))["matches"][0]["id"] == pitfall.id


@pytest.mark.slow
def test_batch_scenarios_live():
    texts = split_batch(capture_batch())
    assert set(texts) == set(BATCH_EXPECTED)
    for scenario, expected in BATCH_EXPECTED.items():
        _assert_explained(texts[scenario], expected)


@pytest.mark.slow
def test_rendezvous_timeout_live():
    _assert_explained(capture_rendezvous_timeout(), RENDEZVOUS_EXPECTED)
