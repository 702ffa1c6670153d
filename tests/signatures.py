"""Whether a pitfall's error signatures recognise a text, as ``explain`` matches them."""

from __future__ import annotations

from fsdp_skill import knowledge
from fsdp_skill.diagnose.matching import signature_matches


def signature_hits(pitfall: knowledge.Pitfall | str, text: str) -> list[bool]:
    """For each of the pitfall's signatures (given by id or as the pitfall), whether it finds
    ``text``."""
    found = knowledge.pitfall(pitfall) if isinstance(pitfall, str) else pitfall
    assert found is not None and found.signatures, pitfall
    return [signature_matches(sig, text) for sig in found.signatures]


def recognises(pitfall: knowledge.Pitfall | str, text: str) -> bool:
    """Whether at least one of the pitfall's signatures finds ``text``."""
    return any(signature_hits(pitfall, text))
