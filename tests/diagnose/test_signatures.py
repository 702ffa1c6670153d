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
from fsdp_skill.diagnose.matching import CONSEQUENCE_TAG, signature_matches
from fsdp_skill.diagnose.normalize import QUOTES
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
from tests.diagnose.published import NEAR_MISSES, PUBLISHED


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
    """Each signature matches what torch printed, or (an older wording) a published line."""
    texts = _reproduced_texts() + PUBLISHED.get(pitfall.id, [])
    for signature in pitfall.signatures:
        assert any(signature_matches(signature, t) for t in texts), (
            f"{pitfall.id}: {signature!r} matches none of the reproduced outputs; quote the "
            "published line it is for in tests/diagnose/published.py"
        )


@pytest.mark.parametrize("pitfall", DOCUMENTED, ids=[p.id for p in DOCUMENTED])
def test_every_documented_signature_matches_published_text(pitfall):
    lines = PUBLISHED.get(pitfall.id)
    assert lines, f"{pitfall.id}: quote the published error line in tests/diagnose/published.py"
    for signature in pitfall.signatures:
        assert any(signature_matches(signature, line) for line in lines), (
            f"{pitfall.id}: {signature!r} matches none of the published lines"
        )
    assert explain("\n".join(lines))["matches"][0]["id"] == pitfall.id


@pytest.mark.parametrize("pitfall", knowledge.pitfalls(), ids=lambda p: p.id)
def test_signatures_hold_no_characters_that_normalising_removes(pitfall):
    """Quotes and backticks are dropped from the text before matching, so a signature that
    holds one can never match."""
    for signature in pitfall.signatures:
        assert not QUOTES.search(signature), (
            f"{pitfall.id}: {signature!r} holds a quote or backtick; write it without"
        )


@pytest.mark.parametrize("pitfall_id", sorted(NEAR_MISSES))
def test_near_misses_are_not_taken_for_the_error(pitfall_id):
    assert knowledge.pitfall(pitfall_id) is not None, pitfall_id
    for text in NEAR_MISSES[pitfall_id]:
        ids = [m["id"] for m in explain(text)["matches"]]
        assert pitfall_id not in ids, f"{pitfall_id} claimed the near miss {text!r}"


def test_every_new_signature_has_a_near_miss():
    """Pitfalls whose signatures were written against published text carry a near miss."""
    documented = {p.id for p in DOCUMENTED}
    missing = sorted(documented - set(NEAR_MISSES) - _OLDER_DOCUMENTED)
    assert not missing, f"add a near miss to tests/diagnose/published.py for {missing}"


_OLDER_DOCUMENTED = {
    # documented before near misses were required; their signatures are NCCL's fixed codes
    "nccl-watchdog-timeout",
    "nccl-duplicate-gpu",
    "nccl-unhandled-system-error",
    "nccl-internal-error",
    "nccl-unhandled-cuda-error",
    "cuda-oom-under-fsdp",
}


@pytest.mark.slow
def test_batch_scenarios_live():
    texts = split_batch(capture_batch())
    assert set(texts) == set(BATCH_EXPECTED)
    for scenario, expected in BATCH_EXPECTED.items():
        _assert_explained(texts[scenario], expected)


@pytest.mark.slow
def test_rendezvous_timeout_live():
    _assert_explained(capture_rendezvous_timeout(), RENDEZVOUS_EXPECTED)
