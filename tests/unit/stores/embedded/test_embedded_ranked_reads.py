"""The embedded store's keyword side read FTS5-first (``ranked_rows``), its terms counted by
FTS5 alone where the scope is every row of its tables, its page rows read either way:
each answers exactly what the statements joined to ``chunks`` answer, on real files with
several scopes, agents, libraries, filters, ties and deletes, in both isolation modes."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import delete_document, upsert_document
from knowledge.ranking.analysis import keyword_terms
from knowledge.ranking.synonym_expansion import compiled, expand, parse_synonyms
from knowledge.stores.embedded import EmbeddedKnowledgeStore, page_index
from knowledge.stores.embedded.candidates import Candidate, pairs_condition
from knowledge.stores.embedded.connections import MMAP_BYTES
from knowledge.stores.embedded.filter_sql import filter_sql
from knowledge.stores.embedded.keyword_index import (
    KeywordIndex,
    _matches,
    fts_match,
    table_rows,
    term_count_sql,
)
from knowledge.stores.embedded.ranked_rows import Row, SearchReads, best_candidates
from knowledge.stores.embedded.term_statistics import TermStatistics

A_X = KnowledgeScope("agent-a", "x")
A_Y = KnowledgeScope("agent-a", "y")
B_X = KnowledgeScope("agent-b", "x")
LIBRARY = KnowledgeScope("_shared", "lib")
WORDS = [f"w{n}" for n in range(24)]
QUERIES = ("w0", "w1 w2", "w3 w4 w5", "w7", "w20 w21", "w0 w23", "nothing here", "w2 w9 w0")


def _doc(path: str, text: str, **metadata: str) -> SourceDocument:
    data = text.encode("utf-8")
    return SourceDocument(path=path, size=len(data), read=lambda: data, metadata=metadata)


def _text(rng: random.Random, sections: int) -> str:
    """Sections of a few words, the common ones often, some sections repeated word for
    word (so that scores tie exactly)."""
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]
    parts = []
    for n in range(sections):
        if parts and rng.random() < 0.3:
            parts.append(parts[-1])
            continue
        words = rng.choices(WORDS, weights=weights, k=rng.randint(3, 9))
        parts.append(f"## Part {n % 3}\n\n{' '.join(words)}.")
    return "# Title\n\n" + "\n\n".join(parts)


def _fill(store: EmbeddedKnowledgeStore, seed: int = 7) -> None:
    rng = random.Random(seed)
    for scope, documents in ((A_X, 30), (A_Y, 8), (B_X, 12), (LIBRARY, 6)):
        for n in range(documents):
            team = "sre" if n % 3 else "dev"
            upsert_document(
                store, scope, _doc(f"d{n:02d}.md", _text(rng, rng.randint(1, 12)), team=team)
            )


@pytest.fixture(params=["shared", "agent"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedKnowledgeStore]:
    opened = EmbeddedKnowledgeStore(tmp_path / "kb.db", isolation=request.param)
    try:
        _fill(opened)
        yield opened
    finally:
        opened.close()


def _queries() -> list[SearchQuery]:
    options: list[dict[str, Any]] = [
        {},
        {"cross_context": True},
        {"shared_libraries": (LIBRARY,)},
        {"filter": {"field": "team", "op": "eq", "value": "dev"}},
        {"file_patterns": ("d0*.md",)},
        {"metadata": {"team": "sre"}},
        {"cross_context": True, "shared_libraries": (LIBRARY,), "file_patterns": ("d1*.md",)},
    ]
    return [SearchQuery(text, **option) for text in QUERIES for option in options]


def _joined(
    keywords: KeywordIndex,
    conn: sqlite3.Connection,
    scope: KnowledgeScope,
    query: SearchQuery,
    limit: int,
) -> list[Candidate]:
    """What the statement joined to ``chunks`` answers for ``query``."""
    matches = _matches(expand(query.text, None))
    groups = keywords._groups(conn, scope, query)
    if not matches or not groups:
        return []
    clause, params = "", list[object]()
    if query.filter is not None:
        condition, params = filter_sql(query.filter)
        clause = f" AND ({condition})"
    return keywords._joined_candidates(
        conn, groups, query, matches, search_filter=(clause, params), limit=limit
    )


@pytest.mark.parametrize("limit", [1, 3, 20, 200])
def test_ranked_candidates_are_the_joined_statements(
    store: EmbeddedKnowledgeStore, limit: int
) -> None:
    keywords = store._keywords
    found = 0
    with store._reading() as conn:
        for scope in (A_X, A_Y, B_X):
            for query in _queries():
                reads = SearchReads()
                terms = expand(query.text, None)
                ranked = keywords.candidates(conn, scope, query, terms, limit, reads=reads)
                assert ranked == _joined(keywords, conn, scope, query, limit), (scope, query)
                # A deeper read of the same search, from what the first one read.
                deeper = keywords.candidates(conn, scope, query, terms, 200, reads=reads)
                assert deeper == _joined(keywords, conn, scope, query, 200)
                found += len(ranked)
    assert found > 0


def test_scores_tie_and_the_key_breaks_the_tie(store: EmbeddedKnowledgeStore) -> None:
    with store._reading() as conn:
        ranked = store._keywords.candidates(conn, A_X, SearchQuery("w0"), expand("w0", None), 200)
    scores = [c.score for c in ranked]
    assert len(set(scores)) < len(scores)  # the corpus has exact ties
    assert ranked == sorted(ranked, key=lambda c: (-c.score, c.key))


def test_whole_searches_match_after_deletes(store: EmbeddedKnowledgeStore) -> None:
    keywords = store._keywords
    for n in range(0, 30, 4):
        assert delete_document(store, A_X, f"d{n:02d}.md")
    with store._reading() as conn:
        for query in _queries():
            terms = expand(query.text, None)
            assert keywords.candidates(conn, A_X, query, terms, 40) == _joined(
                keywords, conn, A_X, query, 40
            )


def _joined_counts(
    store: EmbeddedKnowledgeStore, scope: KnowledgeScope, query: SearchQuery, terms: list[str]
) -> dict[str, int]:
    """Each term's chunks in what a search of ``scope`` covers, counted joined to it."""
    keywords = store._keywords
    counts: dict[str, int] = {}
    with store._reading() as conn:
        groups = keywords._groups(conn, scope, query)
        for term in terms:
            counts[term] = 0
            for table, pairs in groups.items():
                scope_sql, params = pairs_condition(pairs, "c.")
                counts[term] += conn.execute(
                    term_count_sql(table, scope_sql), [fts_match([term]), *params]
                ).fetchone()[0]
    return counts


def _statistics(
    store: EmbeddedKnowledgeStore, scope: KnowledgeScope, query: SearchQuery, terms: list[str]
) -> dict[str, int]:
    with store._reading() as conn:
        _, counts = store._keywords.scope_statistics(conn, scope, query, terms, TermStatistics())
    return counts


def _whole_counts(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Records, per term counted, whether it was counted by FTS5 alone."""
    seen: list[bool] = []
    original = term_count_sql

    def recording(table: str, scope_sql: str | None) -> str:
        seen.append(scope_sql is None)
        return original(table, scope_sql)

    monkeypatch.setattr("knowledge.stores.embedded.keyword_index.term_count_sql", recording)
    return seen


@pytest.mark.parametrize("isolation", ["shared", "agent"])
def test_a_scope_that_is_every_row_counts_its_terms_by_fts5_alone(
    tmp_path: Path, isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    terms = keyword_terms(" ".join(WORDS[:8]) + " absent")
    whole = _whole_counts(monkeypatch)
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db", isolation=isolation)
    try:
        rng = random.Random(3)
        for n in range(20):
            upsert_document(store, A_X, _doc(f"d{n}.md", _text(rng, rng.randint(1, 6))))
        one = SearchQuery("x")
        assert _statistics(store, A_X, one, terms) == _joined_counts(store, A_X, one, terms)
        assert whole
        assert all(whole)
        for n in range(0, 20, 3):  # deletes leave FTS5's counts exact
            delete_document(store, A_X, f"d{n}.md")
        whole.clear()
        assert _statistics(store, A_X, one, terms) == _joined_counts(store, A_X, one, terms)
        assert whole
        assert all(whole)
        # Another agent's scope: under shared isolation the table is no longer A_X's alone.
        for n in range(5):
            upsert_document(store, B_X, _doc(f"b{n}.md", _text(rng, 4)))
        whole.clear()
        assert _statistics(store, A_X, one, terms) == _joined_counts(store, A_X, one, terms)
        assert all(whole) is (isolation == "agent")
        # Another context of the same agent: its table is no longer one context's.
        upsert_document(store, A_Y, _doc("y.md", _text(rng, 4)))
        every = SearchQuery("x", cross_context=True)
        for query in (one, every):
            whole.clear()
            assert _statistics(store, A_X, query, terms) == _joined_counts(store, A_X, query, terms)
            assert all(whole) is (isolation == "agent" and query.cross_context)
        for scope in (B_X, A_Y):
            assert _statistics(store, scope, one, terms) == _joined_counts(store, scope, one, terms)
    finally:
        store.close()


def test_counts_match_with_libraries_in_both_modes(store: EmbeddedKnowledgeStore) -> None:
    terms = keyword_terms(" ".join(WORDS))
    for scope in (A_X, A_Y, B_X):
        for query in (
            SearchQuery("x"),
            SearchQuery("x", cross_context=True),
            SearchQuery("x", shared_libraries=(LIBRARY,)),
        ):
            expected = _joined_counts(store, scope, query, terms)
            assert _statistics(store, scope, query, terms) == expected


def test_table_rows_counts_rows_not_yet_committed() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(terms, headings)")
    conn.execute("INSERT INTO t (rowid, terms, headings) VALUES (1, 'a b', '')")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO t (rowid, terms, headings) VALUES (?, 'a', '')", [(n,) for n in range(2, 9)]
    )
    conn.execute("DELETE FROM t WHERE rowid = 1")
    assert table_rows(conn, "t") == 7
    conn.execute("ROLLBACK")
    assert table_rows(conn, "t") == 1


def test_page_rows_read_either_way_score_the_same(
    store: EmbeddedKnowledgeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    keywords = store._keywords
    synonyms = compiled("w0, w22\nw1 => w23")
    assert parse_synonyms("w0, w22\nw1 => w23")  # the rules parse
    with store._reading() as conn:
        for scope in (A_X, B_X):
            for query in _queries():
                terms = expand(query.text, synonyms)
                chunks = keywords.candidates(conn, scope, query, terms, 40)
                groups = keywords._groups(conn, scope, query)
                matches = _matches(terms)
                if not chunks or not matches:
                    continue
                by_way = []
                for walk in (False, True):
                    monkeypatch.setattr(page_index, "walk_chunks", lambda *_, walk=walk: walk)
                    by_way.append(page_index.page_scores(conn, groups, matches, chunks))
                assert by_way[0] == by_way[1]
                assert by_way[0]


def test_chunk_terms_of_the_query_are_those_of_every_term(
    store: EmbeddedKnowledgeStore,
) -> None:
    keywords = store._keywords
    wanted = frozenset({"w0", "w3", "part", "titl", "absent"})
    with store._reading() as conn:
        chunks = keywords.candidates(conn, A_X, SearchQuery("w0 w3"), expand("w0 w3", None), 40)
        every = keywords.chunk_terms(conn, chunks)
        reads = SearchReads()
        some = keywords.chunk_terms(conn, chunks[:10], wanted=wanted, reads=reads)
        more = keywords.chunk_terms(conn, chunks, wanted=wanted, reads=reads)
    assert every
    assert set(every) == set(more)
    assert more == {key: wanted & terms for key, terms in every.items()}
    assert some == {c.key: more[c.key] for c in chunks[:10]}
    assert any("part" in terms for terms in more.values())  # headings count too


# --- best_candidates, on made-up rows ------------------------------------------------------


def _brute(rows: list[Row], passing: set[int], limit: int) -> list[Candidate]:
    kept = [Candidate(r, _key(r), s) for r, s, _ in rows if r in passing]
    return sorted(kept, key=lambda c: (-c.score, c.key))[:limit]


def _key(rowid: int) -> tuple[str, int, str, str]:
    return (f"p{rowid % 7}", rowid, "x", "a")


@pytest.mark.parametrize("seed", range(40))
def test_best_candidates_is_the_sorted_head_of_what_passes(seed: int) -> None:
    rng = random.Random(seed)
    count = rng.randint(0, 400)
    scores = [float(rng.randint(1, rng.choice([3, 10, 1000]))) for _ in range(count)]
    rows: list[Row] = sorted(
        ((n, s, 0) for n, s in enumerate(scores)), key=lambda r: -r[1]
    )  # ties in any order, as FTS5 gives them
    passing = {r for r, _, _ in rows if rng.random() < rng.choice([1.0, 0.5, 0.05])}
    limit = rng.choice([1, 5, 40, 200])
    reads: list[int] = []

    def read(depth: int) -> tuple[list[Row], bool]:
        reads.append(depth)
        head = rows[:depth]
        return head, len(head) < depth

    def check(head: Any) -> dict[int, Any]:
        return {r: (_key(r) if r in passing else None) for r, _, _ in head}

    depth = rng.choice([limit + 1, 2 * limit, 400])
    assert best_candidates(read, check, limit, depth) == _brute(rows, passing, limit)
    assert reads[0] >= depth


def test_searches_read_the_file_through_a_memory_map(tmp_path: Path) -> None:
    """Every pooled connection maps the file (``connections.MMAP_BYTES``), and a search
    sees what a later write committed, after the file shrank too."""
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db")
    try:
        _fill(store)
        before = {r.document_path for r in store.search(A_X, SearchQuery("w0"))}
        conn = store._pool.acquire()
        try:
            assert conn.execute("PRAGMA mmap_size").fetchone()[0] == MMAP_BYTES
        finally:
            store._pool.release(conn)
        for path in before:
            delete_document(store, A_X, path)
        store.maintain()
        after = {r.document_path for r in store.search(A_X, SearchQuery("w0"))}
        assert before
        assert after
        assert not before & after
    finally:
        store.close()
