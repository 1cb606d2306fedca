"""The page-level keyword signal (``knowledge.ranking.page_signal``) on every store.

Each chunk here matches a fifth of the query at most: weak evidence on the absolute scale
(``knowledge.ranking.relevance``), so every search asks for every candidate (``min_score``
0); the ranking is the subject.

A page whose chunks each match a little of the query but which matches most of it as a
whole outranks a page with one lucky chunk (each store ranked the lucky one first before
the signal: its chunk is the best single chunk); the order is the same in every store
and mode that has a keyword side; the trace recomputes every score from the chunk's
and the page's parts; the filters that choose the candidates choose the pages; another
scope's page never lifts anything; a page row goes with its document.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from knowledge.core.model import IndexOptions, SearchMode, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.ranking import explain
from knowledge.ranking.page_signal import PAGE_WEIGHT
from knowledge.stores.protocol import KnowledgeStore

SCOPE = KnowledgeScope("page-bot", "team")
OTHER = KnowledgeScope("other-bot", "team")

QUERY = "walrus otter badger heron lynx marten osprey puffin stoat vole"

LUCKY = "# Zoo\n\nwalrus walrus otter.\n"
"""One chunk that matches two of the query's terms, one of them twice: the best chunk
(every term of the query is in one document only, so each weighs the same)."""

SPREAD = (
    "# Park\n\n"
    "## South\n\nbadger heron.\n\n"
    "## East\n\nlynx marten.\n\n"
    "## West\n\nosprey puffin.\n\n"
    "## Hill\n\nstoat vole.\n"
)
"""Four sections (chunks), each matching two other terms: the page matches eight."""

FILLER = {
    f"filler-{n}.md": f"# Note {n}\n\nThe weekly rota of the kitchen, number {n}.\n"
    for n in range(6)
}


def put(bucket: Path, scope: KnowledgeScope, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = bucket / scope.agent / scope.context / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def indexed(store: KnowledgeStore, bucket: Path) -> KnowledgeStore:
    put(bucket, SCOPE, {"a-lucky.md": LUCKY, "b-spread.md": SPREAD, **FILLER})
    result = index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert result.errors == ()
    return store


def documents(results: list[SearchResult]) -> list[str]:
    order: list[str] = []
    for result in results:
        if result.document_path not in order:
            order.append(result.document_path)
    return order


@pytest.mark.modes(SearchMode.KEYWORD)
def test_a_page_that_matches_as_a_whole_outranks_one_lucky_chunk(
    indexed: KnowledgeStore, mode: SearchMode
) -> None:
    with explain.explaining() as trace:
        results = indexed.search(
            SCOPE, SearchQuery(QUERY, mode=mode, max_results=10, min_score=0.0)
        )
    # The page that matches the whole query ranks first, in every store alike, ...
    assert documents(results) == ["b-spread.md", "a-lucky.md"]
    assert results[0].rank_score == 1.0
    # ... though the best single chunk is the lucky page's.
    body = trace.to_dict(results)
    entries = {
        (r.document_path, r.chunk_index): e for r, e in zip(results, body["results"], strict=True)
    }
    chunk_scores = {key: entry["keyword"]["chunk"] for key, entry in entries.items()}
    assert max(chunk_scores, key=lambda k: chunk_scores[k]) == ("a-lucky.md", 0)
    (search,) = body["searches"]
    assert search["keyword"]["page_weight"] == PAGE_WEIGHT
    pages = {
        r.document_path: e["keyword"]["page"] for r, e in zip(results, body["results"], strict=True)
    }
    assert pages["b-spread.md"] == search["keyword"]["page_max"] > pages["a-lucky.md"] > 0


def test_the_trace_recomputes_the_page_part(indexed: KnowledgeStore, mode: SearchMode) -> None:
    with explain.explaining() as trace:
        results = indexed.search(
            SCOPE, SearchQuery(QUERY, mode=mode, max_results=10, min_score=0.0)
        )
    body = trace.to_dict(results)
    assert results
    for index, result in enumerate(results):
        recomputed = explain.recompute(result.to_dict(), body, index)
        assert result.rank_score is not None
        assert math.isclose(recomputed, result.rank_score, abs_tol=1e-9), (index, body)
        relevance = explain.recompute_relevance(body, index)
        assert math.isclose(relevance, result.score, abs_tol=1e-9), (index, body)
    if mode is not SearchMode.VECTOR:
        (search,) = body["searches"]
        assert {"chunk_max", "page_max", "page_weight"} <= set(search["keyword"])
        assert "x page /" in explain.format_trace(body, [r.to_dict() for r in results])


@pytest.mark.modes(SearchMode.KEYWORD)
def test_a_filter_keeps_its_pages_out_of_the_page_part(
    indexed: KnowledgeStore, mode: SearchMode
) -> None:
    with explain.explaining() as trace:
        results = indexed.search(
            SCOPE,
            SearchQuery(QUERY, mode=mode, max_results=10, file_patterns=("a-*",), min_score=0.0),
        )
    assert documents(results) == ["a-lucky.md"]
    (search,) = trace.to_dict(results)["searches"]
    # The page part's best is the lucky page's own: the filtered-out page set nothing.
    assert search["keyword"]["page_max"] == trace.to_dict(results)["results"][0]["keyword"]["page"]


@pytest.mark.modes(SearchMode.KEYWORD)
def test_another_scopes_page_lifts_nothing(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    put(bucket, SCOPE, {"a-lucky.md": LUCKY, **FILLER})
    put(bucket, OTHER, {"b-spread.md": SPREAD})
    for scope in (SCOPE, OTHER):
        assert index_source(store, scope, BucketFolderSource(bucket), IndexOptions()).errors == ()
    with explain.explaining() as trace:
        results = store.search(SCOPE, SearchQuery(QUERY, mode=mode, max_results=10, min_score=0.0))
    assert documents(results) == ["a-lucky.md"]
    body = trace.to_dict(results)
    # Its page is the best page the search saw: the other scope's was never read.
    assert body["searches"][0]["keyword"]["page_max"] == body["results"][0]["keyword"]["page"]


@pytest.mark.modes(SearchMode.KEYWORD)
def test_a_deleted_page_leaves_no_page_part(
    indexed: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    (bucket / SCOPE.agent / SCOPE.context / "b-spread.md").write_text(
        "# Park\n\nNothing of the animals now.\n", encoding="utf-8"
    )
    result = index_source(indexed, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert result.errors == ()
    results = indexed.search(SCOPE, SearchQuery(QUERY, mode=mode, max_results=10, min_score=0.0))
    assert documents(results) == ["a-lucky.md"]
    assert results[0].rank_score == 1.0
