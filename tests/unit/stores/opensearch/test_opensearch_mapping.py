"""The OpenSearch index layout: index body, chunk and document records, mapping checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from knowledge.core.errors import (
    AnalysisMismatchError,
    EmbeddingMismatchError,
    RecordsMismatchError,
)
from knowledge.core.model import DocumentChunk
from knowledge.core.origin import RECORDS
from knowledge.core.scope import KnowledgeScope
from knowledge.ranking.analysis import ANALYSIS, KOREAN_MORPHEMES, keyword_terms
from knowledge.stores.opensearch import mapping
from knowledge.stores.opensearch.mapping import IndexLayout, check_layout, index_body, layout_of
from knowledge.stores.opensearch.write.chunk_records import (
    chunk_document,
    document_record,
    is_zero_vector,
)
from knowledge.stores.protocol import DocumentHeader

SCOPE = KnowledgeScope("ops-bot", "runbooks")
HEADER = DocumentHeader(
    path="guides/deploy.md",
    document_id="d1",
    content_hash="h1",
    indexed_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
    version="0A",
    metadata={"source_key": "ops-bot/runbooks/guides/deploy.md", "team": "ops"},
)


def test_public_names_are_exported() -> None:
    assert set(mapping.__all__) <= set(dir(mapping))


def test_index_body_for_a_vector_store() -> None:
    body = index_body(
        vector_dimensions=384,
        embedding_model="openai:small",
        number_of_shards=1,
        number_of_replicas=0,
    )
    # No analyzer of ours: the writer sends the analysed terms (content_terms).
    assert body["settings"] == {
        "index": {"knn": True, "number_of_shards": 1, "number_of_replicas": 0}
    }
    mappings = body["mappings"]
    assert mappings["dynamic"] == "strict"
    assert mappings["_meta"] == {
        "knowledge": {
            "schema_version": 4,
            "analysis": ANALYSIS,
            "records": RECORDS,
            "embedding_model": "openai:small",
            "embedding_dimensions": 384,
        }
    }
    properties = mappings["properties"]
    for name in ("record", "agent", "context", "document_id", "document_path", "document_name"):
        assert properties[name] == {"type": "keyword"}
    # Returned, not searched; the keyword side is one field of pre-analysed terms.
    assert properties["content"] == {"type": "text", "index": False}
    assert properties["content_terms"] == {"type": "text", "analyzer": "whitespace"}
    for old in ("content_ko", "headings", "headings_ko"):  # analysis version 4's fields
        assert old not in properties
    assert properties["embedding"] == {
        "type": "knn_vector",
        "dimension": 384,
        "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
    }
    assert properties["chunk_index"] == {"type": "integer"}
    assert properties["chunk_count"] == {"type": "integer"}
    assert properties["content_hash"] == {"type": "keyword"}
    assert properties["version"] == {"type": "keyword"}
    assert properties["indexed_at"] == {"type": "date"}
    # User metadata makes no field (one tenant's keys cannot use up the index's fields):
    # kept in _source, filtered through key/value terms of two fixed keyword fields.
    assert properties["metadata"] == {"type": "object", "enabled": False}
    assert properties["metadata_terms"] == {"type": "keyword", "ignore_above": 8191}
    assert properties["metadata_numbers"] == {"type": "keyword", "ignore_above": 8191}
    assert "dynamic_templates" not in mappings


def test_index_body_without_embedder_has_no_vector_field() -> None:
    body = index_body(vector_dimensions=None, embedding_model=None)
    assert "embedding" not in body["mappings"]["properties"]
    assert body["mappings"]["_meta"] == {
        "knowledge": {"schema_version": 4, "analysis": ANALYSIS, "records": RECORDS}
    }


def test_serverless_index_body_leaves_shards_to_the_service() -> None:
    body = index_body(
        vector_dimensions=8,
        embedding_model="m",
        vector_engine="faiss",
        serverless=True,
        number_of_shards=1,
        number_of_replicas=0,
    )
    assert body["settings"]["index"] == {"knn": True}
    assert body["mappings"]["properties"]["embedding"]["method"]["engine"] == "faiss"


def _mapping_response(body: dict, name: str = "kb-000001") -> dict:
    return {name: {"mappings": body["mappings"]}}


def test_layout_is_read_back_from_the_mapping_even_through_an_alias() -> None:
    body = index_body(vector_dimensions=16, embedding_model="hashing")
    assert layout_of(_mapping_response(body), "kb") == IndexLayout(
        16, "hashing", "lucene", "cosinesimil", analysis=ANALYSIS
    )
    keyword_only = index_body(vector_dimensions=None, embedding_model=None)
    assert layout_of(_mapping_response(keyword_only, "kb"), "kb") == IndexLayout(
        None, None, None, None, analysis=ANALYSIS
    )


def test_matching_layout_passes() -> None:
    layout = IndexLayout(16, "hashing", "lucene", "cosinesimil", analysis=ANALYSIS)
    check_layout(layout, "kb", vector_dimensions=16, embedding_model="hashing")
    # A keyword-only store can read any index.
    check_layout(layout, "kb", vector_dimensions=None, embedding_model=None)


@pytest.mark.parametrize(
    ("layout", "dimensions", "model", "message"),
    [
        (
            IndexLayout(16, "hashing", "lucene", "cosinesimil", analysis=ANALYSIS),
            32,
            "hashing",
            "16-dimension",
        ),
        (
            IndexLayout(16, "hashing", "lucene", "cosinesimil", analysis=ANALYSIS),
            16,
            "openai",
            "'hashing'",
        ),
        (IndexLayout(None, None, None, None, analysis=ANALYSIS), 16, "hashing", "no vector field"),
        (IndexLayout(16, "hashing", "lucene", "l2", analysis=ANALYSIS), 16, "hashing", "'l2'"),
    ],
)
def test_a_different_embedding_is_a_clear_mismatch(layout, dimensions, model, message) -> None:
    with pytest.raises(EmbeddingMismatchError, match=message) as info:
        check_layout(layout, "kb", vector_dimensions=dimensions, embedding_model=model)
    assert "'kb'" in str(info.value)


def test_chunk_record_carries_scope_document_facts_content_and_vector() -> None:
    chunk = DocumentChunk(
        "guides/deploy.md",
        2,
        "Roll back.",
        {"title": "Deploy", "heading_path": ("Deploy", "Rollback"), "team": "platform"},
    )
    assert chunk_document(SCOPE, HEADER, chunk, vector=(0.5, 1), generation="g1") == {
        "record": "chunk",
        "agent": "ops-bot",
        "context": "runbooks",
        "document_id": "d1",
        "document_path": "guides/deploy.md",
        "document_name": "deploy.md",
        "content_hash": "h1",
        "version": "0A",
        "indexed_at": "2025-01-02T03:04:05+00:00",
        "generation": "g1",
        "chunk_index": 2,
        "content": "Roll back.",
        "metadata": {
            "source_key": "ops-bot/runbooks/guides/deploy.md",
            "team": "platform",  # the chunk's metadata wins
            "title": "Deploy",
            "heading_path": ["Deploy", "Rollback"],
        },
        # The same metadata as key/value terms, what filters read (metadata_pairs).
        "metadata_terms": [
            "source_key\x1fops-bot/runbooks/guides/deploy.md",
            "team\x1fplatform",
            "title\x1fDeploy",
            "heading_path\x1fDeploy",
            "heading_path\x1fRollback",
        ],
        # The keyword terms of the text, then of the title and heading path.
        "content_terms": "roll back deploy rollback",
        "embedding": [0.5, 1.0],
    }


def test_a_zero_vector_is_left_out() -> None:
    chunk = DocumentChunk("a.md", 0, "!!!")
    assert "embedding" not in chunk_document(
        SCOPE, HEADER, chunk, vector=[0.0, 0.0], generation="g1"
    )
    assert "embedding" not in chunk_document(SCOPE, HEADER, chunk, vector=None, generation="g1")
    assert is_zero_vector([0.0, -0.0])
    assert not is_zero_vector([0.0, 1e-9])


def test_times_are_stored_in_utc() -> None:
    seoul = timezone(timedelta(hours=9))
    header = DocumentHeader("a.md", "d", "h", datetime(2025, 1, 2, 12, 0, tzinfo=seoul))
    assert document_record(SCOPE, header, chunk_count=0, generation="g1")["indexed_at"] == (
        "2025-01-02T03:00:00+00:00"
    )
    naive = DocumentHeader("a.md", "d", "h", datetime(2025, 1, 2, 12, 0))
    assert document_record(SCOPE, naive, chunk_count=0, generation="g1")["indexed_at"] == (
        "2025-01-02T12:00:00+00:00"
    )


def test_document_record_has_no_text_or_vector() -> None:
    assert document_record(SCOPE, HEADER, chunk_count=3, generation="g1") == {
        "record": "document",
        "agent": "ops-bot",
        "context": "runbooks",
        "document_id": "d1",
        "document_path": "guides/deploy.md",
        "document_name": "deploy.md",
        "content_hash": "h1",
        "version": "0A",
        "indexed_at": "2025-01-02T03:04:05+00:00",
        "generation": "g1",
        "chunk_count": 3,
        "embedded_chunks": 0,
        "reused_chunks": 0,
        "format": None,
        "origin": None,
        "size": None,
        "problem": None,
        "problem_at": None,
    }
    counted = document_record(
        SCOPE, HEADER, chunk_count=3, generation="g1", embedded_chunks=1, reused_chunks=2
    )
    assert (counted["embedded_chunks"], counted["reused_chunks"]) == (1, 2)


def test_a_document_record_holds_its_page_row() -> None:
    # The chunks' text terms in chunk order (knowledge.ranking.page_signal), in one field
    # with the chunks' analyzer; a document without terms has none.
    record = document_record(
        SCOPE, HEADER, chunk_count=2, generation="g1", page_terms=["deploy", "배포", "deploy"]
    )
    assert record["page_terms"] == "deploy 배포 deploy"
    properties = index_body(vector_dimensions=None, embedding_model=None)["mappings"]["properties"]
    assert properties["page_terms"] == {
        "type": "text",
        "analyzer": "whitespace",
        "index_options": "freqs",  # matched, never phrase-searched
    }


def test_a_chunk_keeps_the_embedding_key_of_its_vector_even_a_zero_one() -> None:
    chunk = DocumentChunk("a.md", 0, "text")
    source = chunk_document(
        SCOPE, HEADER, chunk, vector=(0.5, 1), generation="g", embedding_key="k"
    )
    assert (source["embedding"], source["embedding_key"]) == ([0.5, 1.0], "k")
    zero = chunk_document(
        SCOPE, HEADER, chunk, vector=(0.0, 0.0), generation="g", embedding_key="z"
    )
    assert "embedding" not in zero
    assert zero["embedding_key"] == "z"
    # No vector (keyword only): nothing to reuse, no key.
    bare = chunk_document(SCOPE, HEADER, chunk, vector=None, generation="g", embedding_key="k")
    assert "embedding_key" not in bare


def test_the_embedding_key_is_kept_in_source_only_and_added_to_older_indexes() -> None:
    body = index_body(vector_dimensions=16, embedding_model="hashing")
    properties = body["mappings"]["properties"]
    assert properties["embedding_key"] == {"type": "keyword", "index": False, "doc_values": False}
    assert "excludes" not in body["mappings"].get("_source", {})  # reuse reads the vectors
    assert mapping.RECORD_PROPERTIES["embedding_key"] == properties["embedding_key"]
    del properties["embedding_key"]  # an index made by schema 2
    assert not layout_of(_mapping_response(body), "kb").has_generations


_ANALYSIS_5 = ANALYSIS.replace("-v6", "-v5")  # no page_terms on its document records


@pytest.mark.parametrize(
    ("analysis", "named"),
    [
        (None, "standard analyzer"),
        ("tokenize-v1", "'tokenize-v1'"),
        (_ANALYSIS_5, f"'{_ANALYSIS_5}'"),
    ],
)
@pytest.mark.parametrize("dimensions", [None, 16])
def test_an_index_of_another_keyword_analysis_is_refused(
    analysis: str | None, named: str, dimensions: int | None
) -> None:
    # An index made before analyses were recorded (no "analysis" in _meta) or with another
    # one: its keyword terms would not match this version's queries; even a keyword-only
    # store must not read it.
    layout = IndexLayout(16, "hashing", "lucene", "cosinesimil", analysis=analysis)
    with pytest.raises(AnalysisMismatchError, match=named) as caught:
        check_layout(layout, "kb", vector_dimensions=dimensions, embedding_model="hashing")
    assert "reindex" in str(caught.value)
    assert ANALYSIS in str(caught.value)


@pytest.mark.parametrize("dimensions", [None, 16])
def test_an_index_written_before_origins_is_refused_with_the_reindex_advice(
    dimensions: int | None,
) -> None:
    # Its chunks carry "source_type" and no "origin"/"format": a filter on either would
    # silently match nothing, so it is refused as another analysis is.
    body = index_body(vector_dimensions=16, embedding_model="hashing")
    del body["mappings"]["_meta"]["knowledge"]["records"]
    layout = layout_of(_mapping_response(body), "kb")
    assert layout.records is None
    with pytest.raises(RecordsMismatchError, match="origin and format") as caught:
        check_layout(layout, "kb", vector_dimensions=dimensions, embedding_model="hashing")
    assert isinstance(caught.value, AnalysisMismatchError)  # kb serve's move-aside, the CLI
    assert "reindex into a fresh index" in str(caught.value)
    fresh = layout_of(
        _mapping_response(index_body(vector_dimensions=16, embedding_model="h")), "kb"
    )
    assert fresh.records == RECORDS


def test_hnsw_parameters_go_into_the_method_and_are_read_back() -> None:
    body = index_body(
        vector_dimensions=16, embedding_model="hashing", hnsw_m=24, hnsw_ef_construction=200
    )
    method = body["mappings"]["properties"]["embedding"]["method"]
    assert method == {
        "name": "hnsw",
        "engine": "lucene",
        "space_type": "cosinesimil",
        "parameters": {"m": 24, "ef_construction": 200},
    }
    layout = layout_of(_mapping_response(body), "kb")
    assert (layout.hnsw_m, layout.hnsw_ef_construction) == (24, 200)


def test_without_hnsw_parameters_the_engine_chooses() -> None:
    body = index_body(vector_dimensions=16, embedding_model="hashing")
    assert "parameters" not in body["mappings"]["properties"]["embedding"]["method"]
    layout = layout_of(_mapping_response(body), "kb")
    assert (layout.hnsw_m, layout.hnsw_ef_construction) == (None, None)


def test_derived_source_is_an_index_setting_of_vector_indexes_off_serverless() -> None:
    def settings(**kwargs: Any) -> dict[str, Any]:
        body = index_body(embedding_model="hashing", derived_source=True, **kwargs)
        return dict(body["settings"]["index"])

    assert settings(vector_dimensions=16) == {"knn": True, "knn.derived_source.enabled": True}
    assert settings(vector_dimensions=None) == {"knn": True}  # no vector, nothing to derive
    assert settings(vector_dimensions=16, serverless=True) == {"knn": True}
    off = index_body(vector_dimensions=16, embedding_model="hashing")
    assert off["settings"]["index"] == {"knn": True}


def test_a_chunk_carries_its_keyword_terms_korean_ones_included() -> None:
    korean = DocumentChunk("ko.md", 0, "Debian 패키지를 설치했다 東京", {})
    source = chunk_document(SCOPE, HEADER, korean, vector=None, generation="g1")
    assert source["content_terms"] == " ".join(keyword_terms("Debian 패키지를 설치했다 東京"))
    if KOREAN_MORPHEMES:
        assert source["content_terms"] == "debian 패키지 설치 東京"
    empty = DocumentChunk("x.md", 0, "the of a", {})  # stop words only: no terms
    assert "content_terms" not in chunk_document(SCOPE, HEADER, empty, vector=None, generation="g1")


def test_a_chunk_carries_its_heading_terms_unless_told_not_to() -> None:
    titled = DocumentChunk(
        "ko.md", 0, "text", {"title": "배포 절차", "heading_path": ["배포 절차", "롤백했다"]}
    )
    source = chunk_document(SCOPE, HEADER, titled, vector=None, generation="g1")
    # Korean morphemes as in the text (MeCab-ko; Hangul bigrams without it).
    expected = "배포 절차 롤백" if KOREAN_MORPHEMES else "배포 절차 롤백 백했 했다"
    assert source["content_terms"] == "text " + expected
    assert source["content"] == "text"
    plain = chunk_document(SCOPE, HEADER, titled, vector=None, generation="g1", headings=False)
    assert plain["content_terms"] == "text"
    untitled = DocumentChunk("n.md", 0, "text", {"title": "3.1", "heading_path": ["1.2"]})
    bare = chunk_document(SCOPE, HEADER, untitled, vector=None, generation="g1")
    assert bare["content_terms"] == "text"
