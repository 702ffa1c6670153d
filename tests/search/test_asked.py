"""Questions asked before: the shipped file, how it is indexed, and how it moves the ranking."""

from __future__ import annotations

import sys
from pathlib import Path

from fsdp_skill.bundle_files import BUNDLE_DIR
from fsdp_skill.search import asked, index, rank, search, sections

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import search_asked  # noqa: E402
import search_bench  # noqa: E402


def _ids(query: str, bundle: Path, k: int = 3) -> list[str]:
    return [r["id"] for r in search(query, k=k, bundle=bundle)["results"]]


def test_the_shipped_questions_are_the_tuned_corpus_as_the_script_writes_it():
    assert asked.ASKED_FILE.read_text(encoding="utf-8") == search_asked.render(), (
        "knowledge/asked.toml is stale: run python benchmarks/search_asked.py"
    )


def test_no_hold_out_question_is_shipped():
    entries = asked.load_entries()
    held = {
        q.text
        for q in search_bench.questions_of(search_bench.CORPUS)
        if search_bench.is_holdout(q.source)
    }
    assert len(entries) > 300 and held
    assert not [e["source"] for e in entries if search_bench.is_holdout(e["source"])]
    assert not held & {e["q"] for e in entries}


def test_every_shipped_answer_is_a_section_of_the_bundle():
    # what search ranks, and the index lends answers to: sections and the parts of long ones
    known = {s.id for s in sections.searchable_sections(BUNDLE_DIR)}
    missing = {sid for _, ids in asked.load() for sid in ids if sid not in known}
    assert not missing


def test_a_guide_label_is_stored_as_the_guides_opening_section():
    assert asked.section_id("guide:trainer-fsdp") == "trainer-fsdp"
    assert asked.section_id("pitfall:x") == "pitfall:x"


def test_an_earlier_question_lends_its_answer_to_one_that_reads_like_it(
    bundle, tmp_path, monkeypatch
):
    # No section says "zorblax": only the earlier question, answered by the OOM pitfall.
    assert _ids("zorblax quux crashed", bundle) == []
    earlier = tmp_path / "asked.toml"
    earlier.write_text(
        '[[asked]]\nq = "zorblax quux crashed again"\nsource = "https://example.org/1"\n'
        'ids = ["pitfall:full-state-dict-oom", "guide:fsdp2", "pitfall:not-in-this-bundle"]\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(asked, "ASKED_FILE", earlier)
    got = _ids("zorblax quux crashed", bundle)
    assert got[:2] == ["pitfall:full-state-dict-oom", "fsdp2"]
    # a question it does not read like is left as the text ranks it
    assert _ids("reshard after forward", bundle, k=1) == ["fsdp2#reshard-after-forward"]


def test_a_changed_question_file_gives_a_fresh_index(bundle, tmp_path, monkeypatch):
    before = index.index_path(bundle)
    earlier = tmp_path / "asked.toml"
    earlier.write_text('[[asked]]\nq = "a"\nsource = "s"\nids = ["fsdp2"]\n', encoding="utf-8")
    monkeypatch.setattr(asked, "ASKED_FILE", earlier)
    assert index.index_path(bundle) != before


def test_votes_follow_the_likeness_of_the_most_alike_question():
    rows = [("a", -10.0), ("b", -5.0), ("a", -4.0), ("c", -1.0)]
    assert rank.asked_votes(rows) == {"a": 1.0, "b": 0.5, "c": 0.1}
    assert rank.asked_votes([]) == {}


def test_lent_answers_never_lift_a_section_without_content_above_one_with_content():
    # rows as rerank gives them: (rowid, id, title, path, url, kind, intro, lean, seen, score)
    ranked = [
        (1, "links", "Related pitfalls", "p", "u", "guide", 0, 1, 0, 9.0),
        (2, "text", "Text", "p", "u", "guide", 0, 0, 0, 5.0),
    ]
    more = [(3, "voted", "Voted", "p", "u", "pitfall", 0, 0, 1, 0.0)]
    out = rank.lend_answers(ranked, more, {"links": 1.0, "voted": 1.0})
    assert [row[1] for row in out] == ["text", "voted", "links"]  # 11.7 for links, still last
    assert out[1][-1] == rank.ASKED_WEIGHT * 9.0


def test_chinese_text_is_cut_into_pairs_of_characters():
    from fsdp_skill.search.tokens import han_bigrams

    assert han_bigrams("多卡训练 OOM 了") == ["多卡", "卡训", "训练"]
    assert han_bigrams("fsdp hangs") == []
    assert asked.han_rows([("显存不均衡", ("a", "a", "gone")), ("no chinese", ("a",))], {"a"}) == [
        ("a", "显存 存不 不均 均衡")
    ]


def test_an_earlier_chinese_question_lends_its_answer_through_words_no_glossary_lists(
    bundle, tmp_path, monkeypatch
):
    # No glossary lists 噼啪咕噜 and no section says "zorblax": only the pairs of characters
    # can tie the question to the earlier one.
    question = "zorblax 噼啪咕噜怎么办"
    earlier = tmp_path / "asked.toml"
    earlier.write_text("", encoding="utf-8")
    monkeypatch.setattr(asked, "ASKED_FILE", earlier)
    assert _ids(question, bundle) == []
    earlier.write_text(
        '[[asked]]\nq = "又遇到噼啪咕噜"\nsource = "https://example.org/2"\n'
        'ids = ["pitfall:full-state-dict-oom"]\n',
        encoding="utf-8",
    )
    assert _ids(question, bundle) == ["pitfall:full-state-dict-oom"]
    # an English question does not consult the pairs
    assert "pitfall:full-state-dict-oom" not in _ids("reshard after forward", bundle)


def test_character_pair_votes_add_to_the_word_votes():
    joined = rank.joined_votes({"a": 1.0, "b": 0.5}, {"b": 1.0, "c": 0.2})
    assert joined == {"a": 1.0, "b": 0.5 + rank.HAN_WEIGHT, "c": 0.2 * rank.HAN_WEIGHT}
