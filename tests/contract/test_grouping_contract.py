"""``group_by: "document"`` on every store and mode: one result per document, its best
chunk and the count of its matching chunks, paged consistently (knowledge.ranking.grouping)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.stores.protocol import KnowledgeStore

SCOPE = KnowledgeScope("agent-a", "ctx-x")
OTHER = KnowledgeScope("agent-b", "ctx-x")
DOCUMENTS = 9


def matching_sections(i: int) -> int:
    """How many sections of document i name the query's words (the keyword oracle)."""
    return i % 4 + 1


def document_text(i: int) -> str:
    parts = [
        f"## Step {j}\n\n" + "The deploy procedure " * (1 + (i + j) % 3) + f"of service {i}, "
        f"part {j}. " + "Filler words about other things. " * 6
        for j in range(matching_sections(i))
    ]
    parts.append("## Unrelated\n\nNothing in this section is about it. " + "Filler. " * 10)
    return f"# Service {i}\n\n" + "\n\n".join(parts)


@pytest.fixture
def corpus(store: KnowledgeStore, bucket: Path) -> KnowledgeStore:
    for scope in (SCOPE, OTHER):
        for i in range(DOCUMENTS if scope == SCOPE else 2):
            path = bucket / scope.key / f"services/service-{i}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(document_text(i), "utf-8")
        result = index_source(store, scope, BucketFolderSource(bucket), IndexOptions())
        assert result.errors == ()
    return store


def grouped(store: KnowledgeStore, mode: SearchMode, **fields: object) -> list[SearchResult]:
    query = SearchQuery("deploy procedure", mode=mode, group_by="document", **fields)
    return store.search(SCOPE, query)


def test_pages_of_documents_are_slices_of_one_order(corpus: KnowledgeStore, mode) -> None:
    whole = grouped(corpus, mode, max_results=50)
    assert whole, "the query matches"
    names = [r.document_path for r in whole]
    assert len(names) == len(set(names))  # each document once
    for size in (1, 2, 4):
        pages: list[SearchResult] = []
        for offset in range(0, len(whole) + size, size):
            page = grouped(corpus, mode, max_results=size, offset=offset)
            assert len(page) <= size
            pages.extend(page)
        assert [(r.document_path, r.chunk_index, r.matching_chunks) for r in pages] == [
            (r.document_path, r.chunk_index, r.matching_chunks) for r in whole
        ]
    scores = [r.score for r in whole]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert all("agent-b" not in str(r.metadata.get("source_key", "")) for r in whole)


def test_the_best_chunk_and_its_count_agree_with_the_chunk_level_search(
    corpus: KnowledgeStore, mode
) -> None:
    chunks = corpus.search(
        SCOPE,
        SearchQuery("deploy procedure", mode=mode, max_results=100, max_chunks_per_document=100),
    )
    counted = Counter(r.document_path for r in chunks)
    first: dict[str, SearchResult] = {}
    for result in chunks:
        first.setdefault(result.document_path, result)
    got = grouped(corpus, mode, max_results=50)
    assert [r.document_path for r in got] == list(first)
    for result in got:
        best = first[result.document_path]
        assert (result.chunk_index, result.score) == (best.chunk_index, best.score)
        assert result.matching_chunks == counted[result.document_path]
        assert result.to_dict()["matching_chunks"] == result.matching_chunks


@pytest.mark.modes(SearchMode.KEYWORD)
def test_keyword_counts_are_the_sections_that_name_the_words(corpus: KnowledgeStore, mode) -> None:
    got = grouped(corpus, mode, max_results=50)
    expected = {f"services/service-{i}.md": matching_sections(i) for i in range(DOCUMENTS)}
    assert {r.document_path: r.matching_chunks for r in got} == expected
    unit = grouped(corpus, mode, max_results=50, min_score=0.99)
    assert all(r.score >= 0.99 for r in unit)


def test_grouping_keeps_the_filters(corpus: KnowledgeStore, mode) -> None:
    got = grouped(corpus, mode, file_patterns=["services/service-1.md", "*-4.md"])
    assert sorted(r.document_path for r in got) == [
        "services/service-1.md",
        "services/service-4.md",
    ]
    assert all(r.matching_chunks is not None and r.matching_chunks >= 1 for r in got)


def test_a_chunk_level_search_has_no_count(corpus: KnowledgeStore, mode) -> None:
    results = corpus.search(SCOPE, SearchQuery("deploy procedure", mode=mode))
    assert results
    assert all(r.matching_chunks is None for r in results)
    assert all("matching_chunks" not in r.to_dict() for r in results)


@pytest.mark.parametrize("bad", ["file", "", 3, ["document"], True])
def test_a_bad_group_by_names_the_field(bad: object) -> None:
    with pytest.raises(ValidationError) as refused:
        SearchQuery("deploy", group_by=bad)  # type: ignore[arg-type]
    assert refused.value.field == "group_by"
