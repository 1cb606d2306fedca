"""Keyword tokenization shared by every keyword index and by the hashing embedder.

Rules (the seed's, plus CJK):

- split on whitespace, punctuation and symbols; lower-case;
- drop tokens of one character;
- runs of CJK characters (Hangul, Han, Kana) become overlapping character bigrams,
  so a compound written without spaces ("배포실패") shares terms with the same
  words written apart ("배포 실패"): 배포, 포실, 실패 vs 배포, 실패;
- a run of Latin letters/digits that touches a CJK run is split from it
  ("k8s배포" -> "k8s", "배포").

The same function is used at indexing and at query time.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["is_cjk", "tokenize"]

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


_FIRST_CJK = _CJK_RANGES[0][0]


def is_cjk(char: str) -> bool:
    code = ord(char)
    # Fast path: called for every character indexed; most text is below the first range.
    if code < _FIRST_CJK:
        return False
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


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
