"""How search orders sections: BM25 over weighted columns, then a few general priors.

BM25 (SQLite FTS5) scores each column separately; the weights favour a section's own title
and sub-headings over its body, and prose over code. A question that describes a failure
weighs a pitfall's symptom like a title. The query's own words count twice, the words an
English glossary term stands in for once, and the words that only describe the setting
("multi-GPU training") not at all when it says anything more.

The best ``CANDIDATES`` are then re-ranked with priors that hold for any question: a title
whose words the question uses, or that names the identifier the query spells out, wins; raw
reference entries (docstrings, table rows) give way to explanations unless named; page
summaries and version histories give way to the sections that answer; a failure question that
names only its setting and its symptom ("NCCL error on multi-GPU training") gets the sections
that say what the user sees (triage guides) before the pitfalls that share one of its words; a
section that is only links or a heading comes after every section with content.

Last, the questions asked before (``asked.py``) lend their answers: the sections that
answered the earlier questions most like this one gain in proportion to the likeness, and
join the candidates when BM25 did not find them. A Chinese question is also compared with the
earlier Chinese ones by pairs of characters, which needs no glossary.

The constants were chosen on the tuned part of the question corpus
(``benchmarks/search_corpus.toml``); its hold-out part was never used to choose them.
"""

from __future__ import annotations

import re

from fsdp_skill.search.tokens import content_words, query_identifiers, title_identifiers

WEIGHTS = (8.0, 3.0, 0.5, 0.5, 0.5, 0.25, 1.0)
"""BM25 weights of the title, page title, sub-headings (and a pitfall's tags), identifier
words, prose, code and a pitfall's symptom (what the user sees). Sub-headings weigh like
prose: a long section's parts are searched under their own titles already, and tags list
every word a topic touches."""
SYMPTOM_WEIGHT = 6.0
"""The symptom column's weight for a question that describes a failure: there what the user
saw says more than any title."""
_FAILURE = re.compile(
    r"\b(errors?|exceptions?|fail(s|ed|ing|ure)?|crash(es|ed|ing)?|hang(s|ing)?|hung|stucks?"
    r"|freez(e|es|ing)|deadlocks?|time[ds] out|oom|nan|inf|killed|segfault"
    r"|broken|wrong|mismatch(es|ed)?|incorrect|raises?|traceback|not working"
    r"|(does|did|do|is|was)n'?t work)\b|\w(Error|Exception)\b"
    r"|报错|错误|卡住|卡死|卡在|超时|崩溃|失败|异常|溢出|不动|挂起|爆显存|不足|不够",
    re.IGNORECASE,
)
SETTING_WORDS = frozenset(
    """train training trained gpu gpus multi multiple single card cards model models run
    running runs script code python py main file fine tune tuning finetune finetuning sft
    pretrain pretraining deepspeed zero2 zero3""".split()
)
"""Words that say where a question is asked from (multi-GPU training of a model, under
DeepSpeed's ZeRO), not what it is about: a hang or an OOM asked about under DeepSpeed is the
same hang or OOM, and the DeepSpeed-to-FSDP sections took the first place of such questions."""

DOMAIN_WORDS = frozenset(
    "fsdp fsdp1 fsdp2 ddp nccl torch pytorch distributed parallel data node nodes dist".split()
)
"""Words every question of this domain may use: they say nothing about which problem it is."""
VAGUE_WORDS = 1
"""A failure question with at most this many words besides setting, domain and failure words
("NCCL error on multi-GPU training", "训练卡住") names a symptom, not a cause."""
VAGUE_PRIOR = 1.2
"""A guide section that says what the user sees (a triage), for a vague failure question: the
specific pitfalls it shares a word with each explain one cause among many."""

CANDIDATES = 40
"""How many BM25 leaders are re-ranked with the priors below."""
NAME_BOOST = 1.3
"""A section whose title names a code identifier the query spells out (``fully_shard``)."""
REFERENCE_PRIOR = 0.6
"""API entries (raw docstrings) and environment-variable rows (one table row each) are looked
up by name; for a question in words the guides and pitfalls explain more."""
TITLE_BOOST = 1.3
"""Every word of a section's title (two or more) is in the question: it is about that."""
TITLE_SHARE = 0.25
"""Each word of a section's title that the question uses adds this share of its title length."""
PITFALL_PRIOR = 1.2
"""A pitfall (a symptom, its cause and fix), or a section that says what the user sees, for a
question that describes a failure."""
INTRO_PRIOR = 0.8
"""A page's opening summary mentions everything its sections explain."""
HISTORY_PRIOR = 0.7
"""Version-history sections name every API of their page; they answer version questions
(and get the inverse boost for those)."""
FLAVOUR_PRIOR = 0.7
"""A section titled for the other FSDP (FSDP1's wrapper class, FSDP2's fully_shard) than the
one the question names: its advice does not carry over."""
_FLAVOURS = {
    "fsdp2": re.compile(r"fsdp2|fsdp[ -]?v2|fully_shard|fsdpmodule|composable", re.IGNORECASE),
    "fsdp1": re.compile(
        r"fsdp1|fsdp[ -]?v1|fullyshardeddataparallel|use_orig_params", re.IGNORECASE
    ),
}
_HISTORY_TITLE = re.compile(r"\b(older|versions?)\b", re.IGNORECASE)
_VERSION_NUMBER = re.compile(r"(?<![\w.])v?\d+\.\d+(?:\.\d+)?(?![\w.])")
_VERSION_WORDS = {"older", "old", "version", "versions", "since", "deprecated", "removed"}
_VERSION_WORDS |= {"legacy", "introduced"}


def match_expression(terms: list[str]) -> str:
    """The FTS5 query for a list of terms: any of them, each quoted."""
    return " OR ".join('"' + term.replace('"', "") + '"' for term in terms)


def weighted_expression(terms: dict[str, int]) -> str:
    """The FTS5 query that ranks ``{term: weight}``: a term named twice counts twice in BM25.

    Setting words are left out when the query has other terms: they match the long pages that
    mention every setting and say nothing about the problem.
    """
    key = {t: w for t, w in terms.items() if not set(t.split()) <= SETTING_WORDS}
    kept = key or terms
    return match_expression([t for t, w in kept.items() for _ in range(w)])


def specific_words(terms: list[str]) -> set[str]:
    """The words of ``terms`` that say which problem a question is about: neither setting,
    domain nor failure words, nor numbers."""
    words = {word for term in terms for word in term.split()}
    return {
        w
        for w in words
        if w not in SETTING_WORDS
        and w not in DOMAIN_WORDS
        and not w.isdigit()
        and not _FAILURE.fullmatch(w)
    }


def describes_failure(query: str) -> bool:
    """The question tells what went wrong (an error, a hang, a crash), not what to do."""
    return bool(_FAILURE.search(query))


def weights(query: str) -> tuple[float, ...]:
    """The BM25 column weights for ``query``."""
    if describes_failure(query):
        return (*WEIGHTS[:-1], SYMPTOM_WEIGHT)
    return WEIGHTS


def rerank(rows: list[tuple], query: str, terms: list[str], k: int) -> list[tuple]:
    """Re-rank BM25 leaders ``(rowid, id, title, path, url, kind, intro, lean, seen, bm25)`` with
    priors; sections without content of their own come after every section with content."""
    named = query_identifiers(query)
    about_versions = bool(_VERSION_WORDS.intersection(terms))
    asked = frozenset().union(*(content_words(term) for term in terms))
    failure = describes_failure(query)
    asked_flavours = {name for name, pattern in _FLAVOURS.items() if pattern.search(query)}
    vague = failure and len(specific_words(terms)) <= VAGUE_WORDS
    scored = []
    for row in rows:
        _, _, title, _, _, kind, intro, _, seen, bm25 = row
        score = -bm25
        title_words = content_words(title)
        if len(title_words) >= 2 and title_words <= asked:
            score *= TITLE_BOOST
        if title_words:
            score *= 1 + TITLE_SHARE * len(title_words & asked) / len(title_words)
        if failure and (kind == "pitfall" or seen):
            score *= PITFALL_PRIOR
        if _HISTORY_TITLE.search(title):
            score *= 1 / HISTORY_PRIOR if about_versions else HISTORY_PRIOR
        if named and named & title_identifiers(title):
            score *= NAME_BOOST
        elif kind in ("api", "env"):
            score *= REFERENCE_PRIOR
        if vague and seen and kind != "pitfall":
            score *= VAGUE_PRIOR
        if intro and not seen:
            score *= INTRO_PRIOR
        if len(asked_flavours) == 1:
            titled = {name for name, pattern in _FLAVOURS.items() if pattern.search(title)}
            if titled and not titled & asked_flavours:
                score *= FLAVOUR_PRIOR
        scored.append((score, row))
    scored.sort(key=lambda pair: (pair[1][7], -pair[0]))
    return [(*row[:-1], score) for score, row in scored[:k]]


ASKED_NEIGHBOURS = 10
"""How many of the earlier questions most like the new one lend it their answers."""
ASKED_WEIGHT = 0.3
"""An answer of the most alike earlier question gains this share of the best section's score;
answers of less alike ones gain in proportion to their BM25 score against the best's."""


def asked_votes(alike: list[tuple[str, float]]) -> dict[str, float]:
    """``{section id: likeness}`` from ``(section id, bm25)`` rows of earlier questions, most
    alike first: a section's likeness is its most alike question's score over the best's."""
    if not alike:
        return {}
    best = alike[0][1] or -1.0
    votes: dict[str, float] = {}
    for section_id, bm25 in alike:
        votes.setdefault(section_id, bm25 / best)
    return votes


HAN_NEIGHBOURS = 10
"""How many answers of earlier Chinese questions, matched by character pairs, lend votes."""
HAN_WEIGHT = 1.0
"""A character-pair vote's weight next to a vote of the glossary-read words: Chinese questions
name their problem in words no glossary lists, and earlier questions worded alike are the
evidence that is left."""


def joined_votes(votes: dict[str, float], han: dict[str, float]) -> dict[str, float]:
    """``votes`` with the character-pair votes ``han`` added at ``HAN_WEIGHT``."""
    out = dict(votes)
    for section_id, likeness in han.items():
        out[section_id] = out.get(section_id, 0.0) + HAN_WEIGHT * likeness
    return out


def lend_answers(ranked: list[tuple], more: list[tuple], votes: dict[str, float]) -> list[tuple]:
    """``ranked`` (re-ranked rows) and ``more`` (rows of voted sections BM25 did not find, as
    ``index.rows`` gives them) re-scored with ``votes``, best first; sections without content
    of their own still come last."""
    top = max((row[-1] for row in ranked), default=1.0) or 1.0
    scored = [(*row[:-1], row[-1] + ASKED_WEIGHT * top * votes.get(row[1], 0.0)) for row in ranked]
    scored += [(*row[:-1], ASKED_WEIGHT * top * votes[row[1]]) for row in more]
    return sorted(scored, key=lambda row: (row[7], -row[-1]))


def first(leading: list[tuple], ranked: list[tuple], k: int) -> list[tuple]:
    """``leading`` (rows as ``leaders`` returns them) before the re-ranked ``ranked``, each
    row once, scored above every row after it."""
    ids = {row[1] for row in leading}
    rest = [row for row in ranked if row[1] not in ids]
    top = max((row[-1] for row in rest), default=1.0)
    n = len(leading)
    lead = [(*row[:-1], top * (1 + 0.1 * (n - i))) for i, row in enumerate(leading)]
    return (lead + rest)[:k]
