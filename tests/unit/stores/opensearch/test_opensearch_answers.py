"""The readers of OpenSearch answers: hits and candidates, each document's newest generation,
scope facts, stored documents and scopes (their bodies too); tested as data (no node)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from opensearch_requests import AGENT_TERM, CONTEXT_TERM, SCOPE

from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch.hits import INCOMPLETE_HASH, Hit, parse_hits
from knowledge.stores.opensearch.read import answers, queries
from knowledge.stores.opensearch.read.answers import (
    ScopeStats,
    chunk_id_facts,
    newest_generations,
    parse_candidates,
    parse_scope_stats,
    parse_scopes_page,
    parse_stored_document,
    parse_stored_documents,
)
from knowledge.stores.opensearch.read.queries import (
    scope_stats_body,
    stored_document_body,
    stored_documents_body,
)
from knowledge.stores.opensearch.request_filters import (
    scope_query,
)
from knowledge.stores.protocol import StoredDocument


@pytest.mark.parametrize(
    ("chunk_id", "expected"),
    [
        (
            "3f2a:0000001764500000000-9c1d2e3f:12",
            {
                "document_id": "3f2a",
                "generation": "0000001764500000000-9c1d2e3f",
                "chunk_index": 12,
            },
        ),
        ("3f2a:7", {"document_id": "3f2a", "chunk_index": 7}),  # schema 1
        ("1%3A0%3ApX8mQo", {}),  # server-made (Serverless)
        ("a:b:c", {}),
        (":gen:3", {}),
        ("doc::3", {}),
        ("doc:gen:3:4", {}),
        (":7", {}),  # schema 1 without a document
        ("3f2a:x", {}),
        ("", {}),
    ],
)
def test_chunk_id_facts(chunk_id: str, expected: dict[str, object]) -> None:
    assert chunk_id_facts(chunk_id) == expected


def test_parse_candidates_reads_the_id_and_lets_doc_values_win() -> None:
    response = {
        "hits": {
            "hits": [
                {"_id": "d1:g2:0", "_score": 3.5},
                {"_id": "d1:g2:1", "_score": None, "fields": {"document_path": ["a.md"]}},
                {
                    "_id": "srv-made",
                    "_score": 1.0,
                    "fields": {"document_id": ["d9"], "generation": ["g9"], "chunk_index": [4]},
                },
            ]
        }
    }
    assert parse_candidates(response) == [
        Hit("d1:g2:0", 3.5, {"document_id": "d1", "generation": "g2", "chunk_index": 0}),
        Hit(
            "d1:g2:1",
            0.0,
            {"document_id": "d1", "generation": "g2", "chunk_index": 1, "document_path": "a.md"},
        ),
        Hit("srv-made", 1.0, {"document_id": "d9", "generation": "g9", "chunk_index": 4}),
    ]
    assert parse_candidates({}) == []


def test_parse_hits_reads_doc_values_in_place_of_a_source() -> None:
    response = {
        "hits": {
            "hits": [
                {
                    "_id": "a:0",
                    "_score": 1.5,
                    "fields": {"document_path": ["a.md"], "chunk_index": [0], "generation": []},
                },
                {"_id": "b:1", "_score": 0.5},
            ]
        }
    }
    assert parse_hits(response) == [
        Hit("a:0", 1.5, {"document_path": "a.md", "chunk_index": 0}),
        Hit("b:1", 0.5, {}),
    ]


def test_parse_hits() -> None:
    response = {
        "hits": {
            "hits": [
                {"_id": "a:0", "_score": 2.5, "_source": {"content": "x"}},
                {"_id": "b:1", "_score": None, "_source": {}},
            ]
        }
    }
    assert parse_hits(response) == [
        Hit("a:0", 2.5, {"content": "x"}),
        Hit("b:1", 0.0, {}),
    ]
    assert parse_hits({}) == []


def test_each_document_shows_only_its_newest_generation_among_the_hits() -> None:
    def hit(i: str, doc: str, gen: str | None) -> Hit:
        source = {"document_id": doc, "chunk_index": int(i)}
        source |= {} if gen is None else {"generation": gen}
        return Hit(id=i, score=1.0, source=source)

    hits = [hit("1", "a", "g1"), hit("2", "a", "g2"), hit("3", "b", "g1"), hit("4", "c", None)]
    assert [h.id for h in newest_generations(hits)] == ["2", "3", "4"]


def test_a_chunk_stored_twice_in_one_generation_is_one_hit() -> None:
    def hit(i: str, chunk: int) -> Hit:
        source = {"document_id": "a", "generation": "g1", "chunk_index": chunk}
        return Hit(id=i, score=1.0, source=source)

    assert [h.id for h in newest_generations([hit("1", 0), hit("2", 0), hit("3", 1)])] == [
        "1",
        "3",
    ]


# --- status and stored documents ------------------------------------------------------------
INDEXED_RECORD = {
    "bool": {"filter": [{"term": {"record": "document"}}, {"exists": {"field": "generation"}}]}
}


def test_scope_stats_body() -> None:
    assert scope_stats_body(SCOPE) == {
        "size": 0,
        "track_total_hits": False,
        "query": scope_query(SCOPE),
        "aggs": {
            "chunks": {"filter": {"term": {"record": "chunk"}}},
            "unread": {
                "filter": {"term": {"record": "unread"}},
                "aggs": {
                    "latest": {
                        "top_hits": {
                            "size": 1,
                            "sort": [{"indexed_at": "desc"}],
                            "_source": {"includes": ["unread_files"]},
                        }
                    }
                },
            },
            "records": {
                "filter": INDEXED_RECORD,
                "aggs": {
                    "documents": {
                        "cardinality": {"field": "document_id", "precision_threshold": 40000}
                    },
                    "last_indexed": {"max": {"field": "indexed_at"}},
                    "embedded": {"sum": {"field": "embedded_chunks"}},
                    "reused": {"sum": {"field": "reused_chunks"}},
                },
            },
        },
    }


@pytest.mark.parametrize(
    ("aggs", "expected"),
    [
        ({}, ScopeStats(0, 0, None)),
        (
            {
                "chunks": {"doc_count": 7},
                "records": {
                    "documents": {"value": 3},
                    "last_indexed": {
                        "value": 1.7e12,
                        "value_as_string": "2023-11-14T22:13:20.000Z",
                    },
                },
            },
            ScopeStats(3, 7, datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)),
        ),
        (
            # The formatted value wins over the number (it keeps the index's precision).
            {
                "chunks": {"doc_count": 1},
                "records": {
                    "documents": {"value": 1},
                    "last_indexed": {"value": 0, "value_as_string": "2024-05-01T10:00:00.5Z"},
                },
            },
            ScopeStats(1, 1, datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=UTC)),
        ),
        (
            {
                "chunks": {"doc_count": 0},
                # two empty documents: records, no chunks
                "records": {"documents": {"value": 2}, "last_indexed": {"value": 1.7e12}},
            },
            ScopeStats(2, 0, datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)),
        ),
        (
            # sums come as doubles (0.0 when no record has the field)
            {
                "chunks": {"doc_count": 9},
                "records": {
                    "documents": {"value": 2},
                    "last_indexed": {"value": 1.7e12},
                    "embedded": {"value": 2.0},
                    "reused": {"value": 7.0},
                },
            },
            ScopeStats(2, 9, datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC), 2, 7),
        ),
    ],
)
def test_parse_scope_stats(aggs: dict, expected: ScopeStats) -> None:
    assert parse_scope_stats({"aggregations": aggs}) == expected


DOCUMENT_AGGS = {
    "record": {
        "filter": INDEXED_RECORD,
        "aggs": {
            "latest": {
                "top_hits": {
                    "size": 1,
                    "sort": [{"generation": "desc"}],
                    "_source": {
                        "includes": [
                            "content_hash",
                            "version",
                            "chunk_count",
                            "generation",
                            "replaces",
                        ]
                    },
                }
            }
        },
    },
    "chunks": {
        "filter": {"term": {"record": "chunk"}},
        "aggs": {"generations": {"terms": {"field": "generation", "size": 20}}},
    },
}


@pytest.mark.parametrize(
    ("after", "composite_after"),
    [(None, {}), ({"path": "b.md"}, {"after": {"path": "b.md"}})],
)
def test_stored_documents_body_pages_a_composite_aggregation(after, composite_after) -> None:
    assert stored_documents_body(SCOPE, 500, after) == {
        "size": 0,
        "track_total_hits": False,
        "query": scope_query(SCOPE),
        "aggs": {
            "documents": {
                "composite": {
                    "size": 500,
                    "sources": [{"path": {"terms": {"field": "document_path"}}}],
                    **composite_after,
                },
                "aggs": DOCUMENT_AGGS,
            }
        },
    }


def test_stored_document_body() -> None:
    assert stored_document_body(SCOPE, "a.md") == {
        "size": 0,
        "track_total_hits": False,
        "query": {
            "bool": {"filter": [AGENT_TERM, CONTEXT_TERM, {"term": {"document_path": "a.md"}}]}
        },
        "aggs": DOCUMENT_AGGS,
    }


def _bucket(path: str, records: list[dict], chunks: int | dict[str, int]) -> dict:
    by_generation = {"g1": chunks} if isinstance(chunks, int) else chunks
    total = sum(by_generation.values())
    return {
        "key": {"path": path},
        "doc_count": len(records) + total,
        "record": {
            "doc_count": len(records),
            "latest": {"hits": {"hits": [{"_source": r} for r in records[:1]]}},
        },
        "chunks": {
            "doc_count": total,
            "generations": {
                "buckets": [{"key": g, "doc_count": n} for g, n in by_generation.items() if n]
            },
        },
    }


RECORD = {"content_hash": "h1", "version": "0A", "chunk_count": 2, "generation": "g1"}


@pytest.mark.parametrize(
    ("records", "chunks", "expected"),
    [
        ([RECORD], 2, StoredDocument("a.md", "h1", "0A", 2, "g1")),
        (
            [{**RECORD, "chunk_count": 0, "version": None}],
            0,
            StoredDocument("a.md", "h1", None, 0, "g1"),
        ),
        # A newer generation being written (or an older one not yet removed) beside it.
        ([RECORD], {"g1": 2, "g2": 3}, StoredDocument("a.md", "h1", "0A", 5, "g1")),
        ([RECORD, RECORD], 2, StoredDocument("a.md", "h1", "0A", 2, "g1")),
        # A write that died half-way: chunks without their record, or fewer than declared.
        ([], 2, StoredDocument("a.md", INCOMPLETE_HASH, None, 2)),
        ([RECORD], 1, StoredDocument("a.md", INCOMPLETE_HASH, "0A", 1, "g1")),
        ([RECORD], {"g0": 2}, StoredDocument("a.md", INCOMPLETE_HASH, "0A", 2, "g1")),
    ],
)
def test_stored_documents_report_incomplete_writes(records, chunks, expected) -> None:
    response = {
        "aggregations": {
            "documents": {
                "buckets": [_bucket("a.md", records, chunks)],
                "after_key": {"path": "a.md"},
            }
        }
    }
    assert parse_stored_documents(response) == ({"a.md": expected}, {"path": "a.md"})
    single = {"aggregations": _bucket("a.md", records, chunks)}
    assert parse_stored_document(single, "a.md") == expected


def test_last_stored_documents_page_ends_the_paging() -> None:
    response = {"aggregations": {"documents": {"buckets": [], "after_key": {"path": "z"}}}}
    assert parse_stored_documents(response) == ({}, None)


def test_missing_document_is_none() -> None:
    assert parse_stored_document({"aggregations": _bucket("a.md", [], 0)}, "a.md") is None
    assert parse_stored_document({}, "a.md") is None


def test_scopes_page_body_is_a_composite_on_agent_and_context() -> None:
    assert queries.scopes_page_body(50, {"agent": "a", "context": "b"}) == {
        "size": 0,
        "track_total_hits": False,
        "query": {"bool": {"must_not": [{"terms": {"record": ["unread", "synonyms"]}}]}},
        "aggs": {
            "scopes": {
                "composite": {
                    "size": 50,
                    "sources": [
                        {"agent": {"terms": {"field": "agent"}}},
                        {"context": {"terms": {"field": "context"}}},
                    ],
                    "after": {"agent": "a", "context": "b"},
                }
            }
        },
    }
    assert "after" not in queries.scopes_page_body(50)["aggs"]["scopes"]["composite"]


def test_parse_scopes_page_skips_pairs_that_are_no_scope() -> None:
    response = {
        "aggregations": {
            "scopes": {
                "buckets": [
                    {"key": {"agent": "ops-bot", "context": "runbooks"}, "doc_count": 3},
                    {"key": {"agent": "Bad Agent", "context": "x"}, "doc_count": 1},
                ],
                "after_key": {"agent": "ops-bot", "context": "runbooks"},
            }
        }
    }
    scopes, after = answers.parse_scopes_page(response)
    assert scopes == [KnowledgeScope("ops-bot", "runbooks")]
    assert after == {"agent": "ops-bot", "context": "runbooks"}
    assert answers.parse_scopes_page({"aggregations": {"scopes": {"buckets": []}}}) == ([], None)


# --- readers of responses that lack a part (an empty index, a missing aggregation) --------
@pytest.mark.parametrize(
    "response",
    [{}, {"aggregations": {}}, {"aggregations": {"chunks": {}, "records": {}}}],
)
def test_scope_stats_of_a_response_without_aggregations_are_empty(response: dict) -> None:
    assert parse_scope_stats(response) == ScopeStats(0, 0, None)


@pytest.mark.parametrize(
    "response",
    [
        {},
        {"aggregations": {}},
        {"aggregations": {"documents": {}}},
        {"aggregations": {"documents": {"after_key": {"path": "z"}}}},
    ],
)
def test_stored_documents_of_a_response_without_buckets_end_the_paging(response: dict) -> None:
    assert parse_stored_documents(response) == ({}, None)


def test_a_record_without_source_or_counts_is_an_incomplete_write() -> None:
    aggs = {"record": {"latest": {"hits": {"hits": [{}]}}}, "chunks": {"doc_count": 2}}
    assert parse_stored_document({"aggregations": aggs}, "a.md") == StoredDocument(
        "a.md", INCOMPLETE_HASH, None, 2
    )


def test_a_record_of_no_chunks_without_generation_buckets_is_complete() -> None:
    record = {"content_hash": "h1", "chunk_count": 0, "generation": "g1"}
    aggs = {"record": {"latest": {"hits": {"hits": [{"_source": record}]}}}}
    assert parse_stored_document({"aggregations": aggs}, "a.md") == StoredDocument(
        "a.md", "h1", None, 0, "g1"
    )
    # A generation bucket without a count counts no chunk.
    aggs["chunks"] = {"generations": {"buckets": [{"key": "g1"}]}}
    assert parse_stored_document({"aggregations": aggs}, "a.md") == StoredDocument(
        "a.md", "h1", None, 0, "g1"
    )


def test_a_complete_record_without_a_hash_reports_an_empty_hash() -> None:
    record = {"chunk_count": 1, "generation": "g1", "version": 3}
    aggs = {
        "record": {"latest": {"hits": {"hits": [{"_source": record}]}}},
        "chunks": {"doc_count": 1, "generations": {"buckets": [{"key": "g1", "doc_count": 1}]}},
    }
    assert parse_stored_document({"aggregations": aggs}, "a.md") == StoredDocument(
        "a.md", "", "3", 1, "g1"
    )


def test_scopes_page_of_a_response_without_buckets_ends_the_paging() -> None:
    assert answers.parse_scopes_page({}) == ([], None)
    assert answers.parse_scopes_page({"aggregations": {}}) == ([], None)
    empty = {"aggregations": {"scopes": {"buckets": [], "after_key": {"agent": "a"}}}}
    assert answers.parse_scopes_page(empty) == ([], None)


def test_a_pair_that_is_no_scope_does_not_hide_the_ones_after_it() -> None:
    response = {
        "aggregations": {
            "scopes": {
                "buckets": [
                    {"key": {"agent": "Bad Agent", "context": "x"}},
                    {"key": {"agent": "ops-bot", "context": "runbooks"}},
                ]
            }
        }
    }
    assert answers.parse_scopes_page(response) == (
        [KnowledgeScope("ops-bot", "runbooks")],
        None,
    )


@pytest.mark.parametrize(
    "key",
    [{}, {"agent": None, "context": None}, {"agent": "ops-bot"}, {"context": "runbooks"}],
)
def test_a_bucket_without_an_agent_and_context_is_no_scope(key: dict) -> None:
    # Not the scope "None/None" or "ops-bot/None": a missing value names no scope (a
    # composite aggregation with missing buckets would send null).
    response = {"aggregations": {"scopes": {"buckets": [{"key": key}, {}]}}}
    assert answers.parse_scopes_page(response) == ([], None)


def test_scope_buckets_missing_a_part_are_skipped_and_the_rest_read() -> None:
    response = {
        "aggregations": {
            "scopes": {
                "buckets": [
                    {"key": {"agent": "ops-bot"}},
                    {"key": {"context": "runbooks"}},
                    {"key": {"agent": "ops-bot", "context": "runbooks"}},
                ],
                "after_key": {"agent": "ops-bot", "context": "runbooks"},
            }
        }
    }
    assert parse_scopes_page(response) == (
        [KnowledgeScope("ops-bot", "runbooks")],
        {"agent": "ops-bot", "context": "runbooks"},
    )


def test_the_newest_generation_wins_whatever_the_order_of_the_hits() -> None:
    def hit(i: str, doc: str, gen: str | None) -> Hit:
        source = {"document_id": doc, "chunk_index": int(i)}
        source |= {} if gen is None else {"generation": gen}
        return Hit(id=i, score=1.0, source=source)

    # The newest first, then an older one: the older is left out.
    assert [h.id for h in newest_generations([hit("1", "a", "g2"), hit("2", "a", "g1")])] == ["1"]
    # A generation that sorts before any letter is still a generation.
    assert [h.id for h in newest_generations([hit("3", "b", "1")])] == ["3"]
    # A hit without a generation is kept, and so are the hits after it.
    assert [h.id for h in newest_generations([hit("4", "c", None), hit("5", "d", "g1")])] == [
        "4",
        "5",
    ]


def test_newest_generations_edge_hits_keep_their_meaning() -> None:
    def hit(i: str, source: dict[str, object]) -> Hit:
        return Hit(id=i, score=1.0, source=source)

    # Every hit of one generation, no chunk twice: all kept, in order, in a new list.
    alike = [hit("1", {"document_id": "a", "generation": "g1", "chunk_index": 0})]
    alike.append(hit("2", {"document_id": "b", "generation": "g9", "chunk_index": 0}))
    kept = newest_generations(alike)
    assert [h.id for h in kept] == ["1", "2"]
    assert kept is not alike
    # A generation without a document is no document's newest: left out, wherever it is.
    orphan = hit("3", {"generation": "g1", "chunk_index": 0})
    assert [h.id for h in newest_generations([*alike, orphan])] == ["1", "2"]
    assert [h.id for h in newest_generations([orphan, *alike])] == ["1", "2"]
    # Hits without a generation (schema 1) are all kept, even two alike.
    old = [hit("4", {"document_id": "c", "chunk_index": 0}) for _ in range(2)]
    assert [h.id for h in newest_generations(old)] == ["4", "4"]
    # A hit without a generation first does not hide an older generation after it.
    newer = hit("6", {"document_id": "a", "generation": "g2", "chunk_index": 1})
    assert [h.id for h in newest_generations([old[0], *alike, newer])] == ["4", "2", "6"]
    # A chunk stored twice is one hit even when nothing else is dropped.
    twice = [alike[0], hit("5", {"document_id": "a", "generation": "g1", "chunk_index": 0})]
    assert [h.id for h in newest_generations(twice)] == ["1"]


def test_a_scope_without_documents_has_no_last_indexed_time_even_if_a_number_comes() -> None:
    response = {
        "aggregations": {
            "chunks": {"doc_count": 0},
            "records": {"documents": {"value": 0}, "last_indexed": {"value": 1.7e12}},
        }
    }
    assert parse_scope_stats(response) == ScopeStats(
        document_count=0, chunk_count=0, last_indexed_at=None
    )
