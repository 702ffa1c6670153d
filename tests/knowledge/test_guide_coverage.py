"""The guides of the FSDP topics meet the issue's bar: runnable example, docs links, history.

Each guide must carry at least one example that runs on CPU/gloo, link to the official
PyTorch docs, say what differs on older torch versions, and date its version-specific APIs.
"""

from __future__ import annotations

import pytest

from fsdp_skill import knowledge, markdown

TOPIC_GUIDES = (
    "fsdp2",
    "fsdp1",
    "hsdp",
    "migrate-fsdp1-to-fsdp2",
    "mixed-precision",
    "cpu-offload",
    "activation-checkpointing",
    "meta-device-init",
    "checkpointing",
    "grad-clipping-accumulation",
    "torch-compile",
)
GUIDES = {g.id: g for g in knowledge.guides()}


@pytest.mark.parametrize("guide_id", TOPIC_GUIDES)
def test_guide_exists_with_a_runnable_example(guide_id):
    guide = GUIDES.get(guide_id)
    assert guide is not None, f"guide {guide_id} is missing"
    modes = [b.tags[0] for b in markdown.code_blocks(guide.body) if b.language == "python"]
    assert any(mode.startswith("ws=") for mode in modes), f"{guide_id}: no runnable example"


@pytest.mark.parametrize("guide_id", TOPIC_GUIDES)
def test_guide_links_official_docs_and_covers_older_versions(guide_id):
    guide = GUIDES[guide_id]
    assert any(link.startswith("https://docs.pytorch.org/") for link in guide.links), guide_id
    titles = [title.lower() for _, level, title in markdown.headings(guide.body) if level == 2]
    assert len(titles) >= 4, f"{guide_id}: too few searchable sections"
    assert any("version" in title for title in titles), f"{guide_id}: no section on versions"
    assert guide.versions, f"{guide_id}: no version facts in the front matter"
