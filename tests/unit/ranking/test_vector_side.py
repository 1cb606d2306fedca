"""Which embedder can read which query, and what a search then runs (``ranking.vector_side``)."""

from __future__ import annotations

import pytest

from knowledge.core.model import SearchMode
from knowledge.ranking.fusion import ENGLISH_ONLY_EMBEDDERS
from knowledge.ranking.relevance import Evidence, calibration
from knowledge.ranking.vector_side import (
    UNCOVERED_QUERY,
    SearchedMode,
    covers,
    searched_mode,
    vector_side_note,
)

MINILM = "local:sentence-transformers/all-MiniLM-L6-v2"
KOREAN = "데비안 패키지를 설치하는 방법"
JAPANESE = "パッケージのインストール"
CHINESE = "安装软件包"
ENGLISH = "how do I install a package"


def test_the_english_only_model_is_the_fusion_modules_one() -> None:
    assert MINILM in ENGLISH_ONLY_EMBEDDERS  # one copy of that knowledge: fusion's


@pytest.mark.parametrize(
    "name", [MINILM, "local:all-MiniLM-L6-v2", "local:/opt/models/all-minilm-l6-v2/"]
)
def test_an_english_only_model_does_not_cover_cjk_queries_whatever_its_spelling(
    name: str,
) -> None:
    for text in (KOREAN, JAPANESE, CHINESE, f"apt {KOREAN}"):
        assert not covers(name, text), text
    assert covers(name, ENGLISH)
    assert covers(name, "")


@pytest.mark.parametrize(
    "name",
    [
        "hashing",
        "multilingual:universal-sentence-encoder-multilingual-3",
        "openai:text-embedding-3-small",
        "local:all-MiniLM-L12-v2",  # not the model known to be English-only
        None,
    ],
)
def test_other_embedders_cover_every_query(name: str | None) -> None:
    for text in (KOREAN, JAPANESE, CHINESE, ENGLISH):
        assert covers(name, text)


def test_the_note_is_given_for_vector_and_hybrid_searches_only() -> None:
    assert vector_side_note(SearchMode.KEYWORD, MINILM, KOREAN) is None
    assert vector_side_note(SearchMode.VECTOR, MINILM, KOREAN) == UNCOVERED_QUERY
    assert vector_side_note(SearchMode.HYBRID, MINILM, KOREAN) == UNCOVERED_QUERY
    assert vector_side_note(SearchMode.VECTOR, MINILM, ENGLISH) is None
    assert vector_side_note(SearchMode.HYBRID, "hashing", KOREAN) is None
    assert UNCOVERED_QUERY == "query language not covered by the embedder; keyword used"


@pytest.mark.parametrize("mode", list(SearchMode), ids=lambda m: m.value)
def test_a_search_the_embedder_cannot_read_runs_in_keyword_mode(mode: SearchMode) -> None:
    searched = searched_mode(mode, MINILM, KOREAN)
    assert searched.requested is mode
    assert searched.mode is SearchMode.KEYWORD
    assert searched.vector_side == (None if mode is SearchMode.KEYWORD else UNCOVERED_QUERY)
    readable = searched_mode(mode, MINILM, ENGLISH)
    assert readable == SearchedMode(mode, mode, None)


def test_the_trace_names_the_mode_asked_for_and_why_the_vector_side_is_missing() -> None:
    record = {"store": "embedded", "mode": "keyword", "fusion": "keyword", "vector": None}
    dropped = searched_mode(SearchMode.HYBRID, MINILM, KOREAN)
    assert dropped.traced(record) == {
        **record,
        "mode": "hybrid",
        "vector_side": UNCOVERED_QUERY,
    }
    assert dropped.tracing(lambda: record)() == dropped.traced(record)
    kept = searched_mode(SearchMode.HYBRID, MINILM, ENGLISH)
    assert kept.traced(record) is record
    assert record["mode"] == "keyword"  # the store's record is not changed in place


def test_such_a_search_scores_as_a_keyword_search_in_every_family() -> None:
    # No vector evidence: the keyword coefficients, whichever mode was asked for.
    scale = calibration(MINILM)
    for mode in SearchMode:
        for coverage in (0.0, 0.3, 0.7, 1.0):
            assert scale.score(mode, Evidence(coverage)) == calibration("hashing").score(
                SearchMode.KEYWORD, Evidence(coverage)
            )
