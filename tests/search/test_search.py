"""Search and show over a bundle's reference pages."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from fsdp_skill.errors import UsageError
from fsdp_skill.search import build_index, index, search, sections, show
from fsdp_skill.search.tokens import (
    ASKED,
    STAND_IN,
    identifier_words,
    query_terms,
    split_identifier,
    weighted_terms,
)


def _ids(query: str, bundle, k: int = 3) -> list[str]:
    return [r["id"] for r in search(query, k=k, bundle=bundle)["results"]]


def test_section_ids_follow_files_and_headings(bundle):
    ids = [s.id for s in sections.bundle_sections(bundle)]
    assert "fsdp2#reshard-after-forward" in ids
    assert "fsdp2#meshes-for-hsdp" in ids
    assert "fsdp2" in ids  # the page intro
    assert "fsdp2#contents" not in ids
    assert "pitfall:collective-order-mismatch" in ids
    assert "env:NCCL_SOCKET_IFNAME" in ids
    assert "api:torch.distributed.device_mesh.init_device_mesh" in ids
    assert not any(i.startswith("fsdp2#with-an-int") for i in ids)  # ### stays inside its ##


def test_identifiers_and_words_find_the_same_section(bundle):
    api = "api:torch.distributed.device_mesh.init_device_mesh"
    assert _ids("init_device_mesh", bundle)[0] == api
    assert api in _ids("device mesh init", bundle)
    assert _ids("MixedPrecisionPolicy", bundle)[0] == "fsdp2#mixed-precision"
    assert _ids("reshard after forward", bundle)[0] == "fsdp2#reshard-after-forward"


def test_index_pages_are_shown_but_never_ranked(bundle):
    assert show("pitfalls", bundle=bundle)["text"].startswith("# FSDP pitfalls")
    for query in ("pitfalls", "hang", "memory checkpoint", "lint category"):
        assert "pitfalls" not in _ids(query, bundle, k=10)


def test_title_outranks_body(bundle):
    assert _ids("hang", bundle)[0] == "pitfall:collective-order-mismatch"


def test_chinese_and_everyday_words_use_the_glossary(bundle):
    assert _ids("训练卡住了怎么办", bundle)[0] == "pitfall:collective-order-mismatch"
    assert _ids("保存检查点时显存不足", bundle)[0] == "pitfall:full-state-dict-oom"
    assert _ids("my job is frozen", bundle)[0] == "pitfall:collective-order-mismatch"
    assert _ids("which 网卡 does nccl use", bundle)[0] == "env:NCCL_SOCKET_IFNAME"


def test_results_carry_the_contract_fields_and_a_snippet(bundle):
    found = search("reshard after forward", k=2, bundle=bundle)
    assert found["query"] == "reshard after forward"
    top = found["results"][0]
    assert set(top) == {"id", "title", "path", "url", "score", "snippet", "summary"}
    assert top["summary"].startswith("`fully_shard(module, reshard_after_forward=True)` frees")
    assert top["path"] == "references/fsdp2.md"
    assert top["url"].startswith("https://docs.pytorch.org/")
    highlighted = re.findall(r"\*\*([^*]+)\*\*", top["snippet"].lower())
    assert any("reshard" in h or "forward" in h for h in highlighted), top["snippet"]
    assert top["score"] > 0


def test_show_prints_the_whole_section_for_every_id(bundle):
    for section in sections.searchable_sections(bundle):
        shown = show(section.id, bundle=bundle)
        assert shown["text"] == section.text
        assert shown["title"] == section.title
    hsdp = show("fsdp2#meshes-for-hsdp", bundle=bundle)["text"]
    assert hsdp.startswith("## Meshes for HSDP") and "from torch.distributed" in hsdp
    env = show("env:TORCH_DISTRIBUTED_DEBUG", bundle=bundle)["text"]
    assert "Extra checks | logs." in env


def test_a_page_id_lists_the_page_sections_to_show_next(bundle):
    page = show("fsdp2", bundle=bundle)
    ids = [part["id"] for part in page["sections"]]
    expected = [
        s.id
        for s in sections.searchable_sections(bundle)
        if s.id.startswith("fsdp2#") and "/" not in s.id
    ]
    assert ids == expected and len(ids) >= 2  # every section, in page order
    assert all(
        show(sid, bundle=bundle)["title"] == part["title"]
        for sid, part in zip(ids, page["sections"], strict=True)
    )
    assert "sections" not in show(ids[0], bundle=bundle)  # a section is shown whole
    assert "sections" not in show("env:TORCH_DISTRIBUTED_DEBUG", bundle=bundle)


def test_cli_show_of_a_page_prints_the_show_commands(bundle, monkeypatch):
    from click.testing import CliRunner

    from fsdp_skill.cli import cli

    monkeypatch.setenv("FSDP_SKILL_BUNDLE", str(bundle))
    printed = CliRunner().invoke(cli, ["show", "fsdp2"]).output
    listed = printed.split("Sections of this page:\n", 1)[1]
    first = show("fsdp2", bundle=bundle)["sections"][0]
    assert listed.startswith(f"  fsdp-skill show {first['id']}  - {first['title']}\n")


def test_bad_input_is_a_usage_error(bundle):
    with pytest.raises(UsageError):
        search("  ", bundle=bundle)
    with pytest.raises(UsageError):
        search("fsdp", k=0, bundle=bundle)
    with pytest.raises(UsageError, match="did you mean fsdp2#reshard-after-forward"):
        show("reshard-after-forward", bundle=bundle)
    assert search("的 了 吗", bundle=bundle)["results"] == []  # nothing to search with


def test_index_follows_the_content_and_is_written_atomically(bundle, tmp_path):
    first = index.build(bundle)
    assert build_index(bundle) == first
    page = bundle / "references" / "fsdp2.md"
    page.write_text(page.read_text() + "\n## Prefetching\n\nExplicit prefetch of all-gathers.\n")
    assert index.build(bundle) != first
    assert _ids("explicit prefetch", bundle)[0] == "fsdp2#prefetching"
    leftovers = [p.name for p in first.parent.iterdir() if not p.name.endswith(".sqlite")]
    assert leftovers == []


def test_identifier_splitting():
    assert split_identifier("MixedPrecisionPolicy") == ["mixed", "precision", "policy"]
    assert split_identifier("init_device_mesh") == ["init", "device", "mesh"]
    assert split_identifier("NCCL_DEBUG_SUBSYS") == ["nccl", "debug", "subsys"]
    assert split_identifier("FSDPModule") == ["fsdp", "module"]
    assert "sharded" in identifier_words("use FullyShardedDataParallel here").split()
    assert query_terms("How do I use the FSDPModule?") == ["fsdpmodule", "fsdp", "module"]
    assert "hang" in query_terms("训练卡住")


def test_a_lone_digit_is_no_term_but_codes_and_versions_are():
    """A lone digit ("4 GPUs") is not about "4-bit"; an exit code or a version still counts."""
    assert "4" not in query_terms("training on 4 GPUs is slower than on 1")
    assert "4" not in query_terms("尝试过 4 卡 进行实验")
    assert "137" in query_terms("exit code 137")
    assert "2 4" in query_terms("works in torch 2.4")


def test_cli_search_and_show_never_import_torch(bundle):
    env = {**os.environ, "FSDP_SKILL_BUNDLE": str(bundle)}
    code = (
        "import sys, runpy\n"
        "sys.argv = ['fsdp-skill', *sys.argv[1:]]\n"
        "try:\n"
        "    runpy.run_module('fsdp_skill', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert 'torch' not in sys.modules, 'torch was imported'\n"
        "    raise\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", code, "search", "device", "mesh", "--json", "-k", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert found.returncode == 0, found.stderr
    results = json.loads(found.stdout)["results"]
    assert len(results) == 2
    shown = subprocess.run(
        [sys.executable, "-c", code, "show", results[0]["id"]],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("## ")
    missing = subprocess.run(
        [sys.executable, "-c", code, "show", "nope#nothing"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith("fsdp-skill: error: no section 'nope#nothing'")


def test_a_damaged_index_file_is_rebuilt(bundle):
    path = index.build(bundle)
    path.write_bytes(b"not a database at all" * 100)
    index._OPEN.clear()
    assert _ids("reshard after forward", bundle)[0] == "fsdp2#reshard-after-forward"


def test_english_glossary_words_weigh_less_than_the_words_asked():
    frozen = weighted_terms("my job is frozen")
    assert frozen["frozen"] == ASKED and frozen["hang"] == STAND_IN < ASKED
    assert weighted_terms("训练卡住")["hang"] == ASKED  # Chinese: the question's own words
    assert "hang" in query_terms("training stucks at step 3")  # inflections find the term
    # the references say both "hangs" and "is stuck": each word finds the other
    assert (
        weighted_terms("the job hung")["stuck"] == weighted_terms("it hangs")["stuck"] == STAND_IN
    )
    assert weighted_terms("stuck at init")["hang"] == STAND_IN
    assert "stuck" not in weighted_terms("frozen parameters of the base model")


def test_a_model_that_does_not_fit_asks_for_sharding_and_asking_says_nothing():
    terms = weighted_terms("Can I please ask whether the model doesn't fit on one GPU?")
    assert terms["memory"] == terms["shard"] == STAND_IN
    assert not {"ask", "please"} & set(terms)  # politeness: in a pitfall it is another word
    assert "shard" in weighted_terms("it won't fit in 24 GB")


def test_version_history_sections_answer_version_questions(bundle):
    page = bundle / "references" / "fsdp2.md"
    page.write_text(
        page.read_text()
        + "\n## Older versions\n\nBefore 2.4 fully_shard lived in a private module; "
        "reshard after forward was the default too.\n"
    )
    assert _ids("reshard after forward", bundle)[0] == "fsdp2#reshard-after-forward"
    assert _ids("which torch version has fully_shard", bundle)[0] == "fsdp2#older-versions"
    # a version number alone states the asker's setup, not a question about versions
    assert _ids("reshard after forward on torch 2.4", bundle)[0] == "fsdp2#reshard-after-forward"


def test_a_bundle_without_references_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no references/ folder"):
        search("fsdp", bundle=tmp_path)
    with pytest.raises(UsageError, match="no references/ folder"):
        show("fsdp2", bundle=tmp_path)


def test_rerank_priors_on_equal_bm25_scores():
    from fsdp_skill.search import rank

    def row(rowid, sid, title, kind="guide", intro=0, lean=0, bm25=-10.0):
        return (rowid, sid, title, "references/x.md", "", kind, intro, lean, 0, bm25)

    rows = [
        row(1, "x#other", "Something else entirely"),
        row(2, "x#bf16-or-fp16", "bf16 or fp16"),
        row(3, "api:torch.x.fully_shard", "torch.x.fully_shard", kind="api"),
        row(4, "x", "The page", intro=1),
    ]
    query = "bf16 or fp16 for training"
    ranked = [r[1] for r in rank.rerank(rows, query, query_terms(query), 4)]
    assert ranked[0] == "x#bf16-or-fp16"  # every title word asked for
    assert set(ranked[-2:]) == {"api:torch.x.fully_shard", "x"}  # reference entry, page intro
    named = "how to call fully_shard"
    assert rank.rerank(rows, named, query_terms(named), 1)[0][1] == "api:torch.x.fully_shard"
    links = row(5, "x#related-pitfalls", "bf16 or fp16 pitfalls", lean=1, bm25=-100.0)
    ranked = [r[1] for r in rank.rerank([links, *rows], query, query_terms(query), 5)]
    assert ranked[-1] == "x#related-pitfalls"  # only links: after every section with content


def test_a_failure_question_weighs_a_pitfall_symptom_like_a_title(bundle):
    page = bundle / "references" / "fsdp2.md"
    page.write_text(
        page.read_text() + "\n## Watchdog timeouts\n\nTraining hangs forever until the NCCL "
        "watchdog timeout fires: the watchdog fires when a collective runs too long.\n"
    )
    from fsdp_skill.search import rank

    assert rank.describes_failure("training hangs, then the watchdog fires")
    assert rank.describes_failure("训练卡住") and rank.describes_failure("got a ValueError")
    assert not rank.describes_failure("how do I set the watchdog timeout")
    assert _ids("training hangs forever, then the watchdog timeout fires", bundle)[0] == (
        "pitfall:collective-order-mismatch"
    )
    assert rank.weights("training hangs")[-1] == rank.SYMPTOM_WEIGHT > rank.weights("how")[-1]
    assert _ids("how long until the NCCL watchdog timeout fires", bundle)[0] == (
        "fsdp2#watchdog-timeouts"
    )


def test_a_quoted_error_message_is_matched_as_a_phrase(bundle):
    from fsdp_skill.search.tokens import message_phrases

    assert message_phrases("RuntimeError: CUDA out of memory. Tried to allocate 2 GiB") == [
        "cuda out of memory"
    ]
    assert message_phrases('it says "Expected all tensors to be on the same device, but"') == [
        "expected all tensors to be on the same"
    ]
    assert message_phrases("ValueError: bad") == []  # too short to say which error
    assert "cuda out of memory" in query_terms("torch.OutOfMemoryError: CUDA out of memory")
    assert _ids("torch.OutOfMemoryError: CUDA out of memory", bundle)[0] == (
        "pitfall:full-state-dict-oom"
    )


def test_setting_words_do_not_decide_when_the_question_says_more():
    from fsdp_skill.search import rank

    assert rank.weighted_expression({"multi gpu": 2, "training": 2, "hang": 2}) == (
        '"hang" OR "hang"'
    )
    assert rank.weighted_expression({"training": 2, "gpu": 1}) == (
        '"training" OR "training" OR "gpu"'
    )


def test_british_and_american_spellings_find_each_other():
    from fsdp_skill.search.tokens import spelling_variant

    assert spelling_variant("initialize") == "initialise"
    assert spelling_variant("utilisation") == "utilization"
    assert spelling_variant("size") == spelling_variant("rise") == ""  # not an -ise ending
    terms = query_terms("how to initialize weights after sharding")
    assert {"initialize", "initialise"} <= set(terms)


def test_an_acronym_is_not_an_identifier_the_question_names():
    from fsdp_skill.search import rank
    from fsdp_skill.search.tokens import query_identifiers

    assert not query_identifiers("FSDP hangs with NCCL on CUDA")
    assert {"fsdpmodule", "shardedgradscaler"} <= query_identifiers(
        "FSDPModule with ShardedGradScaler"
    )

    def score(query: str, title: str) -> float:
        row = (1, "x#a", title, "references/x.md", "", "guide", 0, 0, 0, -10.0)
        return rank.rerank([row], query, query_terms(query), 1)[0][-1]

    # an acronym in capitals weighs what it weighs in lower case: no name boost
    assert score("FSDP job stuck", "Memory under FSDP") == score(
        "fsdp job stuck", "Memory under FSDP"
    )
    # a CamelCase name still pulls up the section titled by it
    assert score("FSDPModule job", "torch.distributed.fsdp.FSDPModule") > score(
        "fsdpmodule job", "torch.distributed.fsdp.FSDPModule"
    )


def test_gpus_named_by_count_or_position_are_gpus_and_stuck_stays_a_hang():
    assert "other gpus" in query_terms("其余卡没有显存占用")
    assert "gpu" in query_terms("每张卡使用显存相差较多")
    stuck = query_terms("训练卡住")
    assert "hang" in stuck and not {"gpu", "gpus"} & set(stuck)


def test_words_that_only_narrate_are_not_search_terms():
    # "tries" would match "Tried to allocate" in every out-of-memory symptom
    terms = query_terms("training hangs when the program tries to save the model")
    assert "tries" not in terms and {"save", "hangs"} <= set(terms)
    assert "attempting" not in query_terms("I encountered this when attempting a resume")
    # an error message keeps them: it is matched as the phrase it is
    assert "attempting to unscale fp16 gradients" in query_terms(
        "ValueError: Attempting to unscale FP16 gradients."
    )


def test_a_vague_failure_question_gets_the_triage_before_one_specific_pitfall():
    from fsdp_skill.search import rank

    def row(rowid, sid, title, kind, bm25):
        return (rowid, sid, title, "references/x.md", "", kind, 0, 0, 1, bm25)

    rows = [
        row(1, "pitfall:nccl-system-error", "NCCL unhandled system error", "pitfall", -11.0),
        row(2, "debugging#nccl-errors", "When NCCL fails", "guide", -10.0),
    ]

    def first(query: str) -> str:
        return rank.rerank(rows, query, query_terms(query), 2)[0][1]

    assert rank.specific_words(query_terms("NCCL error on multi-GPU training")) == set()
    assert first("NCCL error on multi-GPU training") == "debugging#nccl-errors"
    assert first("多机多卡训练报错") == "debugging#nccl-errors"
    # a question that names more than the setting and the failure is about that cause
    assert first("NCCL error: unhandled system error on multi-GPU training") == (
        "pitfall:nccl-system-error"
    )
    # and a question that asks how, not what went wrong, is not a triage question
    assert first("NCCL on multi-GPU training") == "pitfall:nccl-system-error"


def test_a_pitfalls_tags_do_not_outweigh_a_section_that_explains(bundle, make_pitfall):
    from fsdp_skill.skill import render

    refs = bundle / "references"
    tagged = make_pitfall(
        refs,
        "ranks-hang-in-barrier",
        "Ranks hang in a barrier",
        "Every rank waits in a barrier forever.",
        "hang",
        tags=("save", "checkpoint", "resume"),
    )
    (refs / "pitfalls.md").write_text(render.render_pitfalls((tagged,)))
    page = refs / "fsdp2.md"
    page.write_text(
        page.read_text() + "\n## Writing state to disk\n\nSave a checkpoint with `dcp.save`: every "
        "rank saves its own shards, and a resume loads the checkpoint the same way.\n"
    )
    assert _ids("save and resume a checkpoint", bundle)[0] == "fsdp2#writing-state-to-disk"
    # the tags are still searched: a question in their words alone finds the pitfall
    assert "pitfall:ranks-hang-in-barrier" in _ids("barrier hang on resume", bundle)


def test_a_misspelt_word_is_searched_as_the_word_one_letter_away(bundle):
    right = _ids("reshard after forward", bundle, k=1)
    assert _ids("resahrd after froward", bundle, k=1) == right  # swapped letters
    assert _ids("reshard aftr forward", bundle, k=1) == right  # a letter left out
    assert _ids("mixed precison", bundle, k=1) == _ids("mixed precision", bundle, k=1)


def test_words_the_index_knows_or_short_ones_are_not_respelt(bundle):
    from fsdp_skill.search import _spelling_fixes

    def fixes(query: str) -> dict:
        return index.run(bundle, lambda db: _spelling_fixes(db, weighted_terms(query)))

    assert fixes("resahrd") == {"reshard": STAND_IN}
    assert fixes("reshards") == {}  # the index stems it: reshard
    assert fixes("meshs") == {}  # stemmed to mesh, which the index holds
    assert fixes("dpp") == {}  # too short to tell ddp from dp
    assert fixes("zzzzzz") == {}  # nothing one letter away


def test_frozen_parameters_are_not_a_hang():
    from fsdp_skill.search.tokens import english_triggers

    assert "requires_grad" in weighted_terms("FSDP with most of the params frozen")
    assert "hang" not in weighted_terms("FSDP with most of the params frozen")
    assert "hang" in weighted_terms("my training is frozen after the first step")
    assert not english_triggers("frozen base model")
