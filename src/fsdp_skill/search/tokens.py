"""Words for the index and for queries: identifiers split, stop words dropped, glossary applied.

The index's tokenizer (FTS5 ``porter unicode61``) already splits on ``_`` and ``.``, so
``init_device_mesh`` and ``device mesh`` meet. What it cannot do is split ``CamelCase``
(``MixedPrecisionPolicy``) or read Chinese, so this module adds those words explicitly.
"""

from __future__ import annotations

import re
from functools import lru_cache

from fsdp_skill.search.glossary import CJK_TERMS, ENGLISH_TERMS

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b)|[A-Z]?[a-z]+|[A-Z]+|\d+")
_WORD = re.compile(r"[A-Za-z0-9]+")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)*[a-zA-Z]*(?![\w.])")
_MESSAGE = re.compile(
    r"\b\w*(?:Error|Exception|Warning)\s*:\s*([^\n.!?:;()\[\]{}\u3000-\u303f\u3400-\u9fff\uff00-\uffef]+)"
    r"|[\"'`\u201c\u300c]([^\"'`\u201d\u300d\n]{8,160})[\"'`\u201d\u300d]"
)
MESSAGE_WORDS = 8
"""At most this many leading words of a quoted error message are matched as one phrase."""

STOP_WORDS = frozenset(
    """a about after all also am an and any are as at be been before being but by can could
    did do does doing done during each else for from get gets getting got had has have how
    i if in into is it its just me more most my need needs no not of on one only or other our
    out over same should so some such than that the their them then there these they this
    those to too under up use used uses using very via want was way we were what when where
    which while who why will with without would you your yet again please help does anyone
    still instead work works working happen happens problem problems issue issues question
    questions bug bugs sure hi hello thanks thank know wonder wondering kindly try tries tried
    trying attempt attempts attempted attempting seem seems seemed encounter encountered
    encountering meet met however because like possible ask asks asked asking""".split()
)
"""English words too common in questions to say what a question is about."""


_SPELLED = re.compile(r"[a-z][a-z0-9]+")
TYPO_MIN = 5
"""Only words at least this long are corrected: one letter off in a shorter word names
another word too often ("dpp" is one letter from ddp, dp and dpo)."""
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def document_frequencies(texts: list[str]) -> list[tuple[str, int]]:
    """``(word, number of texts using it)`` for every lower-case word of ``texts``."""
    counts: dict[str, int] = {}
    for text in texts:
        for word in set(_SPELLED.findall(text.lower())):
            counts[word] = counts.get(word, 0) + 1
    return sorted(counts.items())


def one_letter_off(word: str) -> set[str]:
    """The words one deletion, swap of neighbours, substitution or insertion away."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deleted = {a + b[1:] for a, b in splits if b}
    swapped = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaced = {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    inserted = {a + c + b for a, b in splits for c in _LETTERS}
    return (deleted | swapped | replaced | inserted) - {word}


def typo_candidates(terms: dict[str, int]) -> list[str]:
    """The single words of a query that a spelling fix may apply to."""
    return [t for t in terms if len(t) >= TYPO_MIN and t.isascii() and t.isalpha()]


def split_identifier(name: str) -> list[str]:
    """``MixedPrecisionPolicy`` -> mixed, precision, policy; ``init_device_mesh`` -> 3 words."""
    words: list[str] = []
    for part in re.split(r"[._]+", name):
        words.extend(w.lower() for w in _CAMEL.findall(part))
    return [w for w in words if w]


def identifier_words(text: str) -> str:
    """The split words of every CamelCase or snake_case identifier in ``text``, space-joined.

    Indexed in a column of their own, so a section that names ``FullyShardedDataParallel``
    is also found by "fully sharded data parallel".
    """
    seen: dict[str, None] = {}
    for match in _IDENT.finditer(text):
        name = match.group(0)
        if "_" not in name and "." not in name and name.islower():
            continue
        for word in split_identifier(name):
            seen.setdefault(word, None)
    return " ".join(seen)


def _expansion(words: str) -> list[str]:
    """A glossary expansion's words and, when several, the phrase itself (quoted by the
    caller), so that sections saying "mixed precision" outrank "mixed ... precision"."""
    parts = words.split()
    return parts + ([words] if len(parts) > 1 else [])


def _chinese_terms(query: str) -> tuple[list[str], str]:
    """Index words for the Chinese terms of ``query``, and the query without them."""
    added: list[str] = []
    rest = query
    for term in CJK_TERMS:  # longest first, so 混合精度 wins over 精度
        if term in rest:
            added.extend(_expansion(CJK_TERMS[term]))
            rest = rest.replace(term, " ")
    return added, rest


_HAN_RUN = re.compile(_CJK.pattern + "+")  # a run of the characters _CJK finds


def han_bigrams(text: str) -> list[str]:
    """Every pair of adjacent Chinese characters of ``text``, in order (a lone character
    between other scripts gives none): the usual index unit for Chinese, which has no spaces
    between words, so that questions meet in words the glossary does not list."""
    return [run[i : i + 2] for run in _HAN_RUN.findall(text) for i in range(len(run) - 1)]


def _plain(word: str) -> str:
    """A light stem (plural s dropped) for comparing words of titles, glossary terms and queries."""
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def _plain_words(text: str) -> str:
    """The words of ``text``, lower-cased and lightly stemmed, space-padded for phrase lookup."""
    return f" {' '.join(_plain(w) for w in _WORD.findall(text.lower()))} "


_ENGLISH_KEYS = {term: _plain_words(term) for term in ENGLISH_TERMS}


def english_triggers(query: str) -> dict[str, list[str]]:
    """``{everyday term: index words}`` for the English glossary terms ``query`` uses (in any
    inflection the light stem joins: "stucks", "hangs")."""
    lowered = _plain_words(query)
    return {
        term: _expansion(ENGLISH_TERMS[term])
        for term, key in _ENGLISH_KEYS.items()
        if key in lowered
    }


_SPELLING = re.compile(r"([a-z]{3,})i([sz])(e|es|ed|ing|ation|ations|er|ers)$")


def spelling_variant(word: str) -> str:
    """The other spelling of an -ise/-ize word ("initialise" for "initialize"), or ''.

    The guides write British English and the API docstrings American; a question in either
    spelling must find both."""
    match = _SPELLING.match(word)
    if not match:
        return ""
    stem, letter, ending = match.groups()
    return f"{stem}i{'z' if letter == 's' else 's'}{ending}"


ASKED, STAND_IN = 2, 1
"""Weights of a query's own words (Chinese terms included: they are its words, translated) and
of the words an English glossary term stands in for."""


def query_terms(query: str) -> list[str]:
    """The distinct lower-case terms a query is searched with, in query order.

    A term is a word or a phrase (space-separated words): identifiers also count as the
    phrase of their parts (``init_device_mesh`` -> "init device mesh"), versions as the
    phrase of their numbers ("2.4" -> "2 4"), a quoted error message as the phrase of its
    first words. Chinese terms are replaced by their glossary words; an English glossary term
    adds its words after the query's own.
    """
    return list(weighted_terms(query))


def weighted_terms(query: str) -> dict[str, int]:
    """``query_terms`` with the weight of each: ``ASKED`` for the query's own words, else
    ``STAND_IN`` (the words an English glossary term adds: "frozen" asks about a hang, but
    less surely than "hang" would)."""
    added, rest = _chinese_terms(query)
    words: list[str] = []
    for match in _IDENT.finditer(rest):
        name = match.group(0)
        plain = name.islower() or name.isupper() or name.istitle()
        parts = [name.lower()] if plain and not set("_.") & set(name) else split_identifier(name)
        if len(parts) > 1 and name.lower() not in STOP_WORDS:
            words.append(" ".join(parts) if ("_" in name or "." in name) else name.lower())
        words.extend(parts)
    for number in _NUMBER.findall(rest):
        pieces = re.findall(r"[0-9]+|[a-z]+", number.lower())
        words.append(" ".join(pieces) if len(pieces) > 1 else pieces[0])
    words.extend(added)
    words.extend([v for v in map(spelling_variant, words) if v])
    words[:0] = message_phrases(query)
    stand_ins: list[str] = []
    for expansion in english_triggers(rest).values():
        stand_ins.extend(expansion)
    out: dict[str, int] = {}
    for weight, group in ((ASKED, words), (STAND_IN, stand_ins)):
        for word in group:
            # a lone digit too: "4 GPUs" matched "4-bit" (codes and versions have more digits)
            if word in STOP_WORDS or len(word) < 2:
                continue
            out.setdefault(word, weight)
    return out


def message_phrases(query: str) -> list[str]:
    """The error messages a query quotes (after ``SomeError:``, or in quotes), each as the
    phrase of its first ``MESSAGE_WORDS`` words: a section that has the same words in the
    same order is about that error."""
    phrases = []
    for match in _MESSAGE.finditer(query):
        words = _WORD.findall((match.group(1) or match.group(2)).lower())[:MESSAGE_WORDS]
        if len(words) >= 3:
            phrases.append(" ".join(words))
    return phrases


def _is_camel(name: str) -> bool:
    """``FSDPModule``, ``ShardedGradScaler``: mixed case inside the name, not an acronym."""
    return len(name) > 3 and name[1:] != name[1:].lower() and name != name.upper()


def query_identifiers(query: str) -> set[str]:
    """Code names the query spells out (``fully_shard``, ``FSDPModule``), lower-cased."""
    names: set[str] = set()
    for match in _IDENT.finditer(query):
        name = match.group(0)
        if "_" in name or "." in name or _is_camel(name):  # not an acronym (NCCL)
            names.add(name.lower())
            names.add(name.rsplit(".", 1)[-1].lower())
    return names


@lru_cache(maxsize=4096)
def title_identifiers(title: str) -> frozenset[str]:
    """The code names in a section title, lower-cased (``torch.x.FSDPModule.unshard`` gives
    ``unshard`` and ``fsdpmodule.unshard`` as well as the full name)."""
    names: set[str] = set()
    for match in _IDENT.finditer(title):
        name = match.group(0).lower()
        names.add(name)
        parts = name.split(".")
        names.add(parts[-1])
        if len(parts) > 1:
            names.add(".".join(parts[-2:]))
    return frozenset(names)


def has_cjk(text: str) -> bool:
    """True if ``text`` contains Chinese (CJK) characters."""
    return bool(_CJK.search(text))


@lru_cache(maxsize=4096)
def content_words(text: str) -> frozenset[str]:
    """The lower-cased words of ``text`` that are not stop words, lightly stemmed."""
    return frozenset(
        _plain(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP_WORDS
    )
