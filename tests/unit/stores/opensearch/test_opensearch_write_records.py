"""The OpenSearch write side's requests and readers: chunk ids, document records read by
``_mget``, ``_bulk`` actions, problems, stored vectors, generations to remove; tested as
data (no node, no client)."""

from __future__ import annotations

from typing import Any

import pytest
from opensearch_requests import AGENT_TERM, CONTEXT_TERM, SCOPE

from knowledge.core.errors import StoreError
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch.read.queries import (
    chunks_by_id_body,
)
from knowledge.stores.opensearch.request_filters import (
    scope_query,
)
from knowledge.stores.opensearch.settings import OpenSearchConfig
from knowledge.stores.opensearch.write import records
from knowledge.stores.opensearch.write.generations import delete_by_query
from knowledge.stores.opensearch.write.records import (
    RecordState,
    bulk_delete_action,
    bulk_index_action,
    bulk_record_action,
    document_ids_page_body,
    generation_chunk_id,
    parse_problems,
    parse_records_mget,
    parse_stored_vectors,
    stored_vectors_body,
)


# --- writes -------------------------------------------------------------------------------
def test_a_record_is_created_or_replaced_only_if_unchanged_since_it_was_read() -> None:
    state = RecordState(seq_no=7, primary_term=2, version="01", generation="g1", chunk_count=3)
    assert bulk_record_action("doc1", {"record": "document"}, None) == {
        "_op_type": "create",
        "_id": "doc1",
        "_source": {"record": "document"},
    }
    assert bulk_record_action("doc1", {"record": "document"}, state) == {
        "_op_type": "index",
        "_id": "doc1",
        "if_seq_no": 7,
        "if_primary_term": 2,
        "_source": {"record": "document"},
    }


def test_records_read_by_mget_keep_the_condition_and_what_they_point_at() -> None:
    response = {
        "docs": [
            {
                "_id": "doc1",
                "found": True,
                "_seq_no": 4,
                "_primary_term": 1,
                "_source": {"version": "0A", "generation": "g2", "chunk_count": 5},
            },
            {"_id": "doc2", "found": False},
        ]
    }
    assert parse_records_mget(response) == {
        "doc1": RecordState(seq_no=4, primary_term=1, version="0A", generation="g2", chunk_count=5)
    }


def test_a_record_after_a_missing_one_in_the_mget_is_still_read() -> None:
    response = {
        "docs": [
            {"_id": "doc0", "found": False},
            {
                "_id": "doc1",
                "found": True,
                "_seq_no": 7,
                "_primary_term": 2,
                "_source": {"version": "0B", "generation": "g3", "chunk_count": 1},
            },
        ]
    }
    assert parse_records_mget(response) == {
        "doc1": RecordState(seq_no=7, primary_term=2, version="0B", generation="g3", chunk_count=1)
    }


def test_chunk_ids_are_per_generation() -> None:
    assert generation_chunk_id("doc1", "g7", 3) == "doc1:g7:3"


def test_problems_are_one_per_path_most_recent_first() -> None:
    response = {
        "hits": {
            "hits": [
                {"_id": "1", "_source": {"document_path": "b.pdf", "problem": "encrypted PDF"}},
                {"_id": "2", "_source": {"document_path": "a.md", "problem": "too large"}},
                {"_id": "3", "_source": {"document_path": "b.pdf", "problem": "older"}},
            ]
        }
    }
    assert parse_problems(response, 10) == [("b.pdf", "encrypted PDF"), ("a.md", "too large")]
    assert parse_problems(response, 1) == [("b.pdf", "encrypted PDF")]


@pytest.mark.parametrize(
    ("doc_id", "expected"),
    [
        ("doc1:0", {"_op_type": "index", "_id": "doc1:0", "_source": {"a": 1}}),
        # Serverless vector collections refuse client ids: the server picks one.
        (None, {"_op_type": "index", "_source": {"a": 1}}),
    ],
)
def test_bulk_index_action(doc_id: str | None, expected: dict) -> None:
    assert bulk_index_action(doc_id, {"a": 1}) == expected


def test_bulk_delete_action() -> None:
    assert bulk_delete_action("x") == {"_op_type": "delete", "_id": "x"}


@pytest.mark.parametrize(
    ("after", "expected_after"),
    [(None, None), (["d", 3, 17], ["d", 3, 17])],
)
def test_serverless_delete_pages_ids_without_source(after, expected_after) -> None:
    body = document_ids_page_body(scope_query(SCOPE), 1000, after)
    expected = {
        "size": 1000,
        "_source": False,
        "track_total_hits": False,
        "query": scope_query(SCOPE),
        "sort": [
            {"document_id": "asc"},
            {"generation": "asc"},
            {"chunk_index": "asc"},
            {"indexed_at": "asc"},
        ],
    }
    if expected_after is not None:
        expected["search_after"] = expected_after
    assert body == expected


def test_stored_vectors_body_reads_one_document_of_the_scope_newest_generation_first() -> None:
    scope = KnowledgeScope("ops-bot", "runbooks")
    body = records.stored_vectors_body(scope, "doc-1", 500, ["g9", 3])
    assert body["_source"] == {"includes": ["embedding_key", "embedding"]}
    assert body["query"]["bool"]["filter"] == [
        {"term": {"agent": "ops-bot"}},
        {"term": {"context": "runbooks"}},
        {"term": {"document_id": "doc-1"}},
        {"term": {"record": "chunk"}},
    ]
    assert body["sort"] == [{"generation": "desc"}, {"chunk_index": "asc"}]
    assert (body["size"], body["search_after"]) == (500, ["g9", 3])


def test_parse_stored_vectors_keeps_the_first_of_a_key_and_right_sized_vectors() -> None:
    def hit(source: dict[str, object], sort: list[object]) -> dict[str, object]:
        return {"_source": source, "sort": sort}

    response = {
        "hits": {
            "hits": [
                hit({"embedding_key": "a", "embedding": [0.1, 0.2]}, ["g2", 0]),
                hit({"embedding_key": "zero"}, ["g2", 1]),  # stored without its zero vector
                hit({"embedding_key": "wide", "embedding": [1.0, 2.0, 3.0]}, ["g2", 2]),
                hit({"embedding": [0.5, 0.5]}, ["g2", 3]),  # no key: written before schema 3
                hit({"embedding_key": "a", "embedding": [9.0, 9.0]}, ["g1", 0]),  # older
            ]
        }
    }
    vectors, after, count = records.parse_stored_vectors(response, 2)
    assert vectors == {"a": [0.1, 0.2], "zero": [0.0, 0.0]}
    assert (after, count) == (["g1", 0], 5)
    assert records.parse_stored_vectors({"hits": {"hits": []}}, 2) == ({}, None, 0)


# --- bodies the store's write path sends, as literal data (issue 15) ----------------------
def test_problems_body_is_the_scopes_problem_records_most_recent_first() -> None:
    assert records.problems_body(SCOPE, 100) == {
        "size": 100,
        "track_total_hits": False,
        "_source": {"includes": ["document_path", "problem", "problem_at", "generation"]},
        "query": {
            "bool": {
                "filter": [
                    AGENT_TERM,
                    CONTEXT_TERM,
                    {"term": {"record": "document"}},
                    {"exists": {"field": "problem_at"}},
                ]
            }
        },
        "sort": [{"problem_at": "desc"}],
    }


def test_a_problem_is_merged_into_the_record_or_creates_one() -> None:
    fields = {"problem": "too large", "problem_at": "2026-01-01T00:00:00Z"}
    upsert = {"record": "document", **fields}
    assert records.bulk_problem_action("doc1", fields, upsert) == {
        "_op_type": "update",
        "_id": "doc1",
        "retry_on_conflict": 3,
        "doc": {"problem": "too large", "problem_at": "2026-01-01T00:00:00Z"},
        "upsert": {
            "record": "document",
            "problem": "too large",
            "problem_at": "2026-01-01T00:00:00Z",
        },
    }


def test_other_generations_are_every_record_and_chunk_but_the_kept_one() -> None:
    document = [AGENT_TERM, CONTEXT_TERM, {"term": {"document_id": "doc1"}}]
    assert records.other_generations_query(SCOPE, "doc1", "g2") == {
        "bool": {"filter": document, "must_not": [{"term": {"generation": "g2"}}]}
    }
    assert records.other_generations_query(SCOPE, "doc1", None) == {"bool": {"filter": document}}


def test_chunk_generations_pages_the_document_generation_pairs_of_the_scopes_chunks() -> None:
    query = {
        "bool": {
            "filter": [
                AGENT_TERM,
                CONTEXT_TERM,
                {"term": {"record": "chunk"}},
                {"terms": {"document_id": ["doc1", "doc2"]}},
            ]
        }
    }
    sources = [
        {"document": {"terms": {"field": "document_id"}}},
        {"generation": {"terms": {"field": "generation"}}},
    ]
    assert records.chunk_generations_body(SCOPE, ("doc1", "doc2")) == {
        "size": 0,
        "track_total_hits": False,
        "query": query,
        "aggs": {"pairs": {"composite": {"size": 1000, "sources": sources}}},
    }
    after = {"document": "doc1", "generation": "g2"}
    paged = records.chunk_generations_body(SCOPE, ["doc1", "doc2"], after)
    assert paged["aggs"]["pairs"]["composite"] == {
        "size": 1000,
        "sources": sources,
        "after": {"document": "doc1", "generation": "g2"},
    }
    assert paged["query"] == query


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        ({}, ([], None)),
        ({"aggregations": {"pairs": {"buckets": []}}}, ([], None)),
        # The last page: no buckets, even if an after key came with it.
        ({"aggregations": {"pairs": {"buckets": [], "after_key": {"x": 1}}}}, ([], None)),
        (
            {
                "aggregations": {
                    "pairs": {
                        "buckets": [
                            {"key": {"document": "doc1", "generation": "g1"}, "doc_count": 3},
                            {"key": {"document": "doc1", "generation": "g2"}, "doc_count": 3},
                        ],
                        "after_key": {"document": "doc1", "generation": "g2"},
                    }
                }
            },
            ([("doc1", "g1"), ("doc1", "g2")], {"document": "doc1", "generation": "g2"}),
        ),
        (
            # Buckets without an after key (or a malformed one): no next page.
            {
                "aggregations": {
                    "pairs": {
                        "buckets": [{"key": {"document": "d", "generation": "g"}}],
                        "after_key": "not a key",
                    }
                }
            },
            ([("d", "g")], None),
        ),
    ],
)
def test_read_generation_pairs(found: dict, expected: tuple) -> None:
    assert records.read_generation_pairs(found) == expected


def test_named_generations_are_terms_per_document_never_a_range() -> None:
    body = records.named_generations_query(SCOPE, {"doc1": ["g1", "g2"], "doc2": ("g0",)})
    assert body == {
        "bool": {
            "filter": [AGENT_TERM, CONTEXT_TERM, {"term": {"record": "chunk"}}],
            "should": [
                {
                    "bool": {
                        "filter": [
                            {"term": {"document_id": "doc1"}},
                            {"terms": {"generation": ["g1", "g2"]}},
                        ]
                    }
                },
                {
                    "bool": {
                        "filter": [
                            {"term": {"document_id": "doc2"}},
                            {"terms": {"generation": ["g0"]}},
                        ]
                    }
                },
            ],
            "minimum_should_match": 1,
        }
    }


def test_stale_generations_are_the_chunks_older_than_each_documents_bound() -> None:
    body = records.stale_generations_query(SCOPE, {"doc1": "g5", "doc2": "0193"})
    assert body == {
        "bool": {
            # Chunks only, of this scope: the records stay.
            "filter": [AGENT_TERM, CONTEXT_TERM, {"term": {"record": "chunk"}}],
            # Each document with its own bound, strictly older than it; one must hold.
            "should": [
                {
                    "bool": {
                        "filter": [
                            {"term": {"document_id": "doc1"}},
                            {"range": {"generation": {"lt": "g5"}}},
                        ]
                    }
                },
                {
                    "bool": {
                        "filter": [
                            {"term": {"document_id": "doc2"}},
                            {"range": {"generation": {"lt": "0193"}}},
                        ]
                    }
                },
            ],
            "minimum_should_match": 1,
        }
    }


def test_records_are_read_once_each_in_order() -> None:
    assert records.records_mget_body(["b", "a", "b", "c", "a"]) == {"ids": ["b", "a", "c"]}
    assert records.records_mget_body([]) == {"ids": []}


def test_a_record_without_a_count_or_version_reads_as_none_and_zero() -> None:
    response = {
        "docs": [
            {"_id": 7, "found": True, "_seq_no": "3", "_primary_term": "2", "_source": None},
            {
                "_id": "x",
                "found": True,
                "_seq_no": 0,
                "_primary_term": 1,
                "_source": {"version": 12, "generation": 5, "chunk_count": "4"},
            },
        ]
    }
    assert parse_records_mget(response) == {
        "7": RecordState(seq_no=3, primary_term=2, version=None, generation=None, chunk_count=0),
        "x": RecordState(seq_no=0, primary_term=1, version="12", generation="5", chunk_count=0),
    }
    assert parse_records_mget({}) == {}


def test_problems_without_a_path_or_reason_are_skipped() -> None:
    response = {
        "hits": {
            "hits": [
                {"_id": "1", "_source": {"document_path": "a.md"}},
                {"_id": "2", "_source": {"problem": "too large"}},
                {"_id": "3", "_source": {"document_path": 5, "problem": "x"}},
                {"_id": "4", "_source": {"document_path": "c.md", "problem": "corrupt file"}},
                {"_id": "5", "_source": {"document_path": "d.md", "problem": "too large"}},
            ]
        }
    }
    assert parse_problems(response, 2) == [("c.md", "corrupt file"), ("d.md", "too large")]
    assert parse_problems(response, 1) == [("c.md", "corrupt file")]


def test_reads_by_id_and_vector_pages_do_not_count_total_hits() -> None:
    assert chunks_by_id_body(["c1"], [])["track_total_hits"] is False
    assert stored_vectors_body(SCOPE, "doc1", 10)["track_total_hits"] is False


def test_a_vector_page_without_hits_is_empty() -> None:
    assert parse_stored_vectors({}, 2) == ({}, None, 0)
    assert parse_stored_vectors({"hits": {}}, 2) == ({}, None, 0)


def test_a_vector_hit_without_a_key_is_skipped_and_the_next_one_read() -> None:
    response = {
        "hits": {
            "hits": [
                {"_source": {}, "sort": ["g2", 0]},
                {"_source": {"embedding_key": "k1", "embedding": [1, 2]}, "sort": ["g2", 1]},
            ]
        }
    }
    assert parse_stored_vectors(response, 2) == ({"k1": [1.0, 2.0]}, ["g2", 1], 2)


class _DeleteAnswer:
    """What ``generations.delete_by_query`` uses of a ``Connection``: its config and the
    node's answer to a ``_delete_by_query``."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.config = OpenSearchConfig(url="http://127.0.0.1:9200")
        self.answer = answer

    def delete_by_query(self, index: str, query: dict[str, Any], action: str) -> dict[str, Any]:
        return self.answer


def test_a_delete_by_query_counts_what_it_deleted_and_refuses_what_it_left() -> None:
    query = {"match_all": {}}
    done = _DeleteAnswer({"deleted": 3, "failures": []})
    assert delete_by_query(done, "knowledge", query, "remove stale chunks") == 3  # type: ignore[arg-type]
    assert delete_by_query(_DeleteAnswer({}), "knowledge", query, "remove") == 0  # type: ignore[arg-type]
    left = _DeleteAnswer({"deleted": 1, "failures": [{"id": "a"}, {"id": "b"}]})
    with pytest.raises(
        StoreError, match=r"failed to remove stale chunks: 2 record\(s\) not deleted"
    ):
        delete_by_query(left, "knowledge", query, "remove stale chunks")  # type: ignore[arg-type]
