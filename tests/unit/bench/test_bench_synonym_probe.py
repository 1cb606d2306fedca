"""bench.runs.synonym_probe: the query rewriting and the synonyms file it measures with."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.report.synonyms import _moved
from bench.runs.synonym_probe import ABBREVIATIONS, KOREAN, rewrite, synonyms_file
from knowledge.ranking.synonym_expansion import expand, parse_synonyms


def test_abbreviations_replace_whole_words_in_any_case() -> None:
    assert rewrite("Duplicate a file descriptor", ABBREVIATIONS, whole_words=True) == (
        "Duplicate a fd"
    )
    assert rewrite("get Directory entries", ABBREVIATIONS, whole_words=True) == "get dir entries"
    # Not inside a word, nor a hyphenated one.
    assert rewrite("subdirectory wide-character", ABBREVIATIONS, whole_words=True) == (
        "subdirectory wide-character"
    )


def test_korean_words_are_replaced_inside_words() -> None:
    assert rewrite("데비안을 설치하려면?", KOREAN, whole_words=False) == "Debian을 인스톨하려면?"


def test_the_file_maps_each_rewritten_query_back_to_the_documents_words() -> None:
    for pairs in (ABBREVIATIONS, KOREAN):
        synonyms = parse_synonyms(synonyms_file(pairs))
        assert synonyms.lines == len(pairs)
    terms = expand("Duplicate a fd", parse_synonyms(synonyms_file(ABBREVIATIONS)))
    assert terms.expanded == ("file", "descriptor")
    terms = expand("Debian을 인스톨하려면?", parse_synonyms(synonyms_file(KOREAN)))
    assert set(terms.expanded) == {"데비안", "설치"}


def test_queries_moved_count_the_top_ten_only() -> None:
    assert _moved([1, 3, None, 12, 2], [1, 2, 4, None, 5]) == (2, 1)
