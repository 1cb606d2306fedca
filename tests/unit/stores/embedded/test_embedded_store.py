from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

from knowledge.core.errors import (
    AnalysisMismatchError,
    ConfigurationError,
    EmbeddingMismatchError,
    StoreError,
    UnsupportedModeError,
    ValidationError,
)
from knowledge.core.identity import document_id
from knowledge.core.model import DocumentChunk, IndexState, SearchMode, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.base import Embedding
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import delete_document, reindex_source, upsert_document
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.ranking.analysis import ANALYSIS
from knowledge.stores.embedded import EmbeddedKnowledgeStore, fts_query
from knowledge.stores.protocol import (
    DocumentHeader,
    EmbeddedChunk,
    IndexWriter,
    KnowledgeStore,
    WriteSession,
)

SCOPE = KnowledgeScope("ops-bot", "runbooks")
OTHER_CONTEXT = KnowledgeScope("ops-bot", "oncall")
OTHER_AGENT = KnowledgeScope("sales-bot", "runbooks")

DEPLOY = (
    "# Deploy\n\nRollback a failed deployment with kubectl rollout undo, "
    "then check the pods of the service.\n"
)
BREAD = "# Bread\n\nBake bread with flour, water, salt and yeast in a hot oven.\n"
GARDEN = "# Garden\n\nWater the tomatoes in the morning and prune the roses in spring.\n"


class CountingEmbedder:
    """A HashingEmbedder under another name that counts calls and closes."""

    def __init__(self, name: str = "counting", dimensions: int = 64) -> None:
        self._inner = HashingEmbedder(dimensions)
        self._name = name
        self.embed_calls = 0
        self.closed = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimensions(self) -> int:
        return self._inner.dimensions

    def embed(self, text: str) -> Embedding:
        self.embed_calls += 1
        return self._inner.embed(text)

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        return [self._inner.embed(text) for text in texts]

    def close(self) -> None:
        self.closed = True


def source_doc(path: str, text: str, **metadata: str) -> SourceDocument:
    data = text.encode("utf-8")
    return SourceDocument(path=path, size=len(data), read=lambda: data, metadata=metadata)


def header(path: str, scope: KnowledgeScope = SCOPE, content_hash: str = "h") -> DocumentHeader:
    return DocumentHeader(
        path=path,
        document_id=document_id(scope, path),
        content_hash=content_hash,
        indexed_at=datetime.now(UTC),
    )


def chunks(path: str, texts: Sequence[str], embedder: HashingEmbedder | None = None):
    for index, text in enumerate(texts):
        vector = None if embedder is None else embedder.embed(text).vector
        yield EmbeddedChunk(DocumentChunk(path, index, text), vector)


def paths(results: Sequence[SearchResult]) -> list[str]:
    return [r.document_path for r in results]


def search(
    store: KnowledgeStore, text: str, mode: str = "keyword", scope: KnowledgeScope = SCOPE, **kw
) -> list[SearchResult]:
    return store.search(scope, SearchQuery(text, mode=SearchMode(mode), **kw))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "kb.db"


# The sessions of these tests are shorter than one batch, however slow the machine: they
# test what a batch guarantees (test_embedded_batches.py tests the batching itself).
ONE_BATCH = {"batch_seconds": 3600.0}


@pytest.fixture
def store(db: Path) -> Iterator[EmbeddedKnowledgeStore]:
    # No relevance floor: these tests look at how unrelated chunks rank too (the floor has
    # its own tests below and in the contract suite).
    opened = EmbeddedKnowledgeStore(
        db, embedder=HashingEmbedder(64), relevance_floor=0.0, **ONE_BATCH
    )
    yield opened
    opened.close()


@pytest.fixture
def filled(store: EmbeddedKnowledgeStore) -> EmbeddedKnowledgeStore:
    for path, text in (("deploy.md", DEPLOY), ("bread.md", BREAD), ("garden.md", GARDEN)):
        assert upsert_document(store, SCOPE, source_doc(path, text)).indexed_documents == 1
    return store


# --- persistence ------------------------------------------------------------------------


def test_reopened_file_gives_the_same_results_and_status(filled: EmbeddedKnowledgeStore, db):
    before = {mode: search(filled, "rollback deployment", mode) for mode in SearchMode}
    status = filled.status(SCOPE)
    filled.close()

    reopened = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64), relevance_floor=0.0)
    try:
        assert {mode: search(reopened, "rollback deployment", mode) for mode in SearchMode} == (
            before
        )
        assert reopened.status(SCOPE) == status
        assert status.document_count == 3
        assert status.state is IndexState.READY
        # The content hashes survived too: nothing is written again.
        result = upsert_document(reopened, SCOPE, source_doc("deploy.md", DEPLOY))
        assert result.indexed_documents == 0
        assert [p.reason for p in result.skipped] == ["unchanged"]
    finally:
        reopened.close()


def test_changed_document_is_rewritten_without_a_stale_tail(store: EmbeddedKnowledgeStore):
    long_text = "# A\n\nalpha words here\n\n# B\n\nbravo words here\n\n# C\n\ncharlie tail\n"
    assert upsert_document(store, SCOPE, source_doc("doc.md", long_text)).indexed_chunks == 3
    assert upsert_document(store, SCOPE, source_doc("doc.md", "# A\n\nalpha only\n")).ok
    assert search(store, "charlie") == []
    assert [r.chunk_index for r in search(store, "alpha")] == [0]
    assert store.status(SCOPE).chunk_count == 1
    assert [r.content for r in search(store, "alpha only words", "vector")] == ["# A\n\nalpha only"]


def test_status_of_empty_and_indexing_scopes(store: EmbeddedKnowledgeStore):
    empty = store.status(SCOPE)
    assert (empty.state, empty.document_count, empty.last_indexed_at) == (
        IndexState.EMPTY,
        0,
        None,
    )
    with store.write_session(SCOPE) as session:
        assert store.status(SCOPE).state is IndexState.INDEXING
        assert store.status(OTHER_CONTEXT).state is IndexState.EMPTY
        session.put_document(header("a.md"), chunks("a.md", ["some text"]))
    done = store.status(SCOPE)
    assert done.state is IndexState.READY
    assert (done.document_count, done.chunk_count) == (1, 1)
    assert done.last_indexed_at is not None
    assert done.last_indexed_at.tzinfo is not None


def test_creates_the_folder_of_the_file(tmp_path: Path):
    target = tmp_path / "deep" / "er" / "kb.db"
    EmbeddedKnowledgeStore(target).close()
    assert target.is_file()


def test_memory_store_works_without_a_file(tmp_path: Path):
    store = EmbeddedKnowledgeStore(":memory:", embedder=HashingEmbedder(32))
    try:
        upsert_document(store, SCOPE, source_doc("deploy.md", DEPLOY))
        assert paths(search(store, "rollback", "hybrid")) == ["deploy.md"]
        assert store.path == ":memory:"
    finally:
        store.close()
    assert list(tmp_path.iterdir()) == []


# --- embedder identity ------------------------------------------------------------------


def test_other_dimension_is_refused_naming_both(filled: EmbeddedKnowledgeStore, db: Path):
    filled.close()
    with pytest.raises(EmbeddingMismatchError) as caught:
        EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(128))
    message = str(caught.value)
    assert "hashing (64 dims)" in message
    assert "hashing (128 dims)" in message
    assert str(db) in message
    assert "--db" in message


def test_other_embedder_name_is_refused(filled: EmbeddedKnowledgeStore, db: Path):
    filled.close()
    with pytest.raises(EmbeddingMismatchError, match=r"hashing \(64 dims\).*counting \(64 dims\)"):
        EmbeddedKnowledgeStore(db, embedder=CountingEmbedder("counting", 64))


def test_keyword_only_store_reads_a_vector_file_but_never_writes_to_it(
    filled: EmbeddedKnowledgeStore, db: Path
):
    filled.close()
    keyword = EmbeddedKnowledgeStore(db)
    try:
        assert keyword.supported_modes == {SearchMode.KEYWORD}
        assert keyword.default_mode is SearchMode.KEYWORD
        assert paths(search(keyword, "bread")) == ["bread.md"]
        with pytest.raises(UnsupportedModeError):
            search(keyword, "bread", "vector")
        with pytest.raises(EmbeddingMismatchError, match="without vectors"):
            upsert_document(keyword, SCOPE, source_doc("bread.md", "# Bread\n\nrye and spelt\n"))
        assert paths(search(keyword, "flour")) == ["bread.md"]  # untouched
    finally:
        keyword.close()


def test_keyword_built_file_refuses_an_embedder(db: Path):
    keyword = EmbeddedKnowledgeStore(db)
    upsert_document(keyword, SCOPE, source_doc("bread.md", BREAD))
    keyword.close()
    with pytest.raises(EmbeddingMismatchError, match="without an embedder"):
        EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))


def test_a_file_without_chunks_takes_a_new_embedder(filled: EmbeddedKnowledgeStore, db: Path):
    for path in ("deploy.md", "bread.md", "garden.md"):
        assert delete_document(filled, SCOPE, path)
    filled.close()
    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(128))
    try:
        upsert_document(store, SCOPE, source_doc("bread.md", BREAD))
        assert paths(search(store, "bread", "vector")) == ["bread.md"]
    finally:
        store.close()
    with pytest.raises(EmbeddingMismatchError, match="128 dims"):
        EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))


def _set_analysis(db: Path, value: str | None) -> None:
    """Make the file look as another version left it (None: one that recorded none)."""
    import sqlite3

    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM meta WHERE key = 'analysis'")
        if value is not None:
            conn.execute("INSERT INTO meta (key, value) VALUES ('analysis', ?)", (value,))
    conn.close()


@pytest.mark.parametrize(("recorded", "named"), [(None, "tokenize-v1"), ("other-v9", "other-v9")])
@pytest.mark.parametrize("with_embedder", [True, False])
def test_a_file_of_another_keyword_analysis_is_refused(
    filled: EmbeddedKnowledgeStore, db: Path, recorded: str | None, named: str, with_embedder: bool
):
    filled.close()
    _set_analysis(db, recorded)
    with pytest.raises(AnalysisMismatchError) as caught:
        EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64) if with_embedder else None)
    message = str(caught.value)
    assert named in message
    assert ANALYSIS in message
    assert str(db) in message
    assert "Reindex" in message


def test_a_file_without_chunks_takes_this_analysis(filled: EmbeddedKnowledgeStore, db: Path):
    for path in ("deploy.md", "bread.md", "garden.md"):
        assert delete_document(filled, SCOPE, path)
    filled.close()
    _set_analysis(db, None)
    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))
    try:
        upsert_document(store, SCOPE, source_doc("bread.md", BREAD))
        assert paths(search(store, "bread", "keyword")) == ["bread.md"]
    finally:
        store.close()
    EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64)).close()  # recorded: accepted


def test_keyword_search_finds_other_inflections(store: EmbeddedKnowledgeStore):
    upsert_document(
        store, SCOPE, source_doc("net.md", "The installer detected two network interfaces.")
    )
    upsert_document(store, SCOPE, source_doc("other.md", "Bread rises in a warm kitchen."))
    assert paths(search(store, "detecting an interface", "keyword")) == ["net.md"]


def test_vector_of_the_wrong_length_is_refused(store: EmbeddedKnowledgeStore):
    with store.write_session(SCOPE) as session:
        bad = [EmbeddedChunk(DocumentChunk("a.md", 0, "text"), (0.5, 0.5))]
        with pytest.raises(EmbeddingMismatchError, match=r"a\.md"):
            session.put_document(header("a.md"), bad)
    assert store.stored_documents(SCOPE) == {}


# --- keyword matching -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rollback deployment", '"rollback" OR "deploy"'),
        ("the processes", '"process"'),
        ("Deploy deploy DEPLOY", '"deploy"'),
        ('say "hi" NEAR(a b)', '"say" OR "hi" OR "near"'),
        ("a * - : ^", None),
        ("배포실패", '"배포" OR "실패"'),  # Korean morphemes (MeCab-ko)
        ("東京都", '"東京" OR "京都"'),  # Han bigrams
    ],
)
def test_fts_query_is_quoted_terms_or_ed(text: str, expected: str | None):
    assert fts_query(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        '"',
        '"rollback',
        'rollback"',
        '"rollback" "',
        "NEAR(",
        "NEAR(rollback kubectl",
        "NEAR(rollback kubectl, 2)",
        "a OR b",
        "rollback OR",
        "rollback NOT",
        "NOT rollback",
        "*",
        "rollback*",
        "-",
        "-rollback",
        ":",
        "content:rollback",
        "terms:rollback",
        "^rollback",
        "(rollback",
        "rollback)",
        "{terms}: rollback",
        "+",
        "'; DROP TABLE chunks; --",
    ],
)
def test_fts_syntax_in_the_query_is_plain_text(filled: EmbeddedKnowledgeStore, text: str):
    for mode in SearchMode:
        results = search(filled, text, mode.value)
        assert all(0.0 <= r.score <= 1.0 for r in results)
    keyword = search(filled, text)
    if "rollback" in text:
        assert paths(keyword) == ["deploy.md"]
    else:
        assert keyword == []
    assert filled.status(SCOPE).chunk_count == 3


def test_cjk_compound_matches_words_written_apart(store: EmbeddedKnowledgeStore):
    upsert_document(
        store, SCOPE, source_doc("ko.md", "# 장애\n\n배포 실패 시 이전 버전으로 롤백한다.")
    )
    upsert_document(store, SCOPE, source_doc("ja.md", "# 障害\n\n本番環境のデプロイ手順"))
    upsert_document(store, SCOPE, source_doc("en.md", DEPLOY))
    assert paths(search(store, "배포실패")) == ["ko.md"]
    assert paths(search(store, "롤백")) == ["ko.md"]
    assert paths(search(store, "本番環境")) == ["ja.md"]
    assert paths(search(store, "k8s배포"))[0] == "ko.md"
    assert paths(search(store, "배포실패", "hybrid"))[0] == "ko.md"


def test_more_matching_terms_rank_higher(filled: EmbeddedKnowledgeStore):
    results = search(filled, "water flour yeast", min_score=0.0)
    assert paths(results) == ["bread.md", "garden.md"]
    assert results[0].rank_score == 1.0
    assert results[1].rank_score is not None
    assert 0.0 < results[1].rank_score < 1.0
    assert results[0].keyword_score == 1.0
    assert results[0].vector_score is None
    # The absolute score agrees: all three terms are stronger evidence than one.
    assert results[0].score > results[1].score


def test_very_long_query_works(filled: EmbeddedKnowledgeStore):
    text = "".join(chr(0xAC00 + i) for i in range(4000)) + " rollback"
    # One term of thousands: weak evidence, asked for with min_score 0.
    assert paths(search(filled, text, min_score=0.0)) == ["deploy.md"]


# --- vector and hybrid ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_document_sharing_words_with_the_query_ranks_first(
    filled: EmbeddedKnowledgeStore, mode: str
):
    assert paths(search(filled, "rollback failed deployment", mode))[0] == "deploy.md"
    assert paths(search(filled, "bake bread with yeast", mode))[0] == "bread.md"
    assert paths(search(filled, "prune roses", mode))[0] == "garden.md"


def test_vector_scores_are_cosine_in_unit_range(filled: EmbeddedKnowledgeStore):
    results = search(filled, "rollback failed deployment", "vector", max_results=3, min_score=0.0)
    assert len(results) == 3
    scores = [r.rank_score for r in results]
    assert all(s is not None and 0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert all(r.vector_score == r.rank_score and r.keyword_score is None for r in results)
    # Not rescaled: an absolute similarity, below 1.0 for an inexact match.
    assert results[0].vector_score is not None
    assert results[0].vector_score < 1.0
    assert all(0.0 <= r.score <= 1.0 for r in results)


def test_hybrid_results_explain_both_sides(filled: EmbeddedKnowledgeStore):
    results = search(filled, "rollback failed deployment", "hybrid", max_results=3, min_score=0.0)
    assert results[0].rank_score == 1.0
    for r in results:
        assert r.keyword_score is not None
        assert r.vector_score is not None
        assert 0.0 <= r.keyword_score <= 1.0
        assert 0.0 <= r.vector_score <= 1.0
    assert results[0].keyword_score == 1.0
    # Only deploy.md has the words: the other candidates come from the vector side.
    assert [r.keyword_score for r in results[1:]] == [0.0, 0.0]


def test_vector_candidates_below_the_floor_are_not_results(db: Path):
    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))  # the calibrated floor
    try:
        for path, text in (("deploy.md", DEPLOY), ("bread.md", BREAD), ("garden.md", GARDEN)):
            upsert_document(store, SCOPE, source_doc(path, text))
        unrelated = "zeppelin xylophone quasar"
        # min_score 0: the floor alone (the absolute score would drop these too).
        assert search(store, unrelated, "vector", min_score=0.0) == []
        assert search(store, unrelated, "hybrid", min_score=0.0) == []
        # Without a floor the same search "finds" every chunk.
        raw = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64), relevance_floor=0.0)
        try:
            assert len(search(raw, unrelated, "vector", max_results=50, min_score=0.0)) >= 3
        finally:
            raw.close()
        # Related text still passes, in both modes; min_score still cuts on top of it.
        related = search(store, "kubectl rollout", "vector", min_score=0.0)
        assert paths(related)[0] == "deploy.md"
        assert paths(search(store, "kubectl rollout", "hybrid", min_score=0.0))[0] == "deploy.md"
        above = min(1.0, max(r.score for r in related) + 1e-6)
        assert search(store, "kubectl rollout", "vector", min_score=above) == []
    finally:
        store.close()


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan])
def test_a_bad_relevance_floor_is_refused(db: Path, bad: float):
    with pytest.raises(ValidationError) as info:
        EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64), relevance_floor=bad)
    assert info.value.field == "relevance_floor"


def test_rrf_fusion_option(db: Path):
    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64), fusion="rrf")
    try:
        upsert_document(store, SCOPE, source_doc("deploy.md", DEPLOY))
        upsert_document(store, SCOPE, source_doc("bread.md", BREAD))
        results = search(store, "rollback deployment", "hybrid")
        assert paths(results)[0] == "deploy.md"
        assert results[0].rank_score == 1.0
    finally:
        store.close()


def test_query_is_embedded_once_and_only_when_needed(db: Path):
    embedder = CountingEmbedder()
    store = EmbeddedKnowledgeStore(db, embedder=embedder)
    try:
        upsert_document(store, SCOPE, source_doc("deploy.md", DEPLOY))
        embedder.embed_calls = 0
        search(store, "rollback")
        assert embedder.embed_calls == 0
        search(store, "rollback", "vector")
        assert embedder.embed_calls == 1
        search(store, "rollback", "hybrid")
        assert embedder.embed_calls == 2
    finally:
        store.close()
    assert not embedder.closed


def test_query_without_terms_has_no_vector_candidates(filled: EmbeddedKnowledgeStore):
    # The hashing embedder gives "?!" the zero vector: no similarity to anything.
    assert search(filled, "?!", "vector") == []
    assert search(filled, "?!", "hybrid") == []


@pytest.mark.parametrize("cache_bytes", [0, 1 << 20])
def test_vector_search_sees_every_commit(db: Path, cache_bytes: int):
    store = EmbeddedKnowledgeStore(
        db, embedder=HashingEmbedder(64), vector_cache_bytes=cache_bytes, relevance_floor=0.0
    )
    other = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))  # another writer
    # No floor and min_score 0: every chunk is a result, however unrelated.
    try:
        upsert_document(store, SCOPE, source_doc("bread.md", BREAD))
        assert paths(search(store, "kubectl rollout", "vector", min_score=0.0)) == ["bread.md"]
        upsert_document(store, SCOPE, source_doc("deploy.md", DEPLOY))
        assert paths(search(store, "kubectl rollout", "vector", min_score=0.0))[0] == "deploy.md"
        upsert_document(other, SCOPE, source_doc("garden.md", GARDEN))
        assert "garden.md" in paths(search(store, "kubectl rollout", "vector", min_score=0.0))
        assert delete_document(other, SCOPE, "deploy.md")
        assert "deploy.md" not in paths(search(store, "kubectl rollout", "vector", min_score=0.0))
        # A rolled-back session changes nothing, cached or not.
        with pytest.raises(RuntimeError), other.write_session(SCOPE, replace_scope=True):
            raise RuntimeError("abandon")
        assert sorted(paths(search(store, "kubectl rollout", "vector", min_score=0.0))) == [
            "bread.md",
            "garden.md",
        ]
    finally:
        store.close()
        other.close()


# --- scope and filters ------------------------------------------------------------------


def test_scope_isolation_and_cross_context(store: EmbeddedKnowledgeStore):
    upsert_document(store, SCOPE, source_doc("a.md", "shared word rollback"))
    upsert_document(store, OTHER_CONTEXT, source_doc("b.md", "shared word rollback"))
    upsert_document(store, OTHER_AGENT, source_doc("c.md", "shared word rollback"))
    for mode in SearchMode:
        assert paths(search(store, "rollback", mode.value)) == ["a.md"]
        crossed = search(store, "rollback", mode.value, cross_context=True)
        assert sorted(paths(crossed)) == ["a.md", "b.md"]
        assert paths(search(store, "rollback", mode.value, scope=OTHER_AGENT)) == ["c.md"]
    assert store.status(SCOPE).document_count == 1
    assert set(store.stored_documents(OTHER_CONTEXT)) == {"b.md"}


def test_same_path_in_two_contexts_stays_apart(store: EmbeddedKnowledgeStore):
    upsert_document(store, SCOPE, source_doc("same.md", "rollback one"))
    upsert_document(store, OTHER_CONTEXT, source_doc("same.md", "rollback two"))
    crossed = search(store, "rollback", "hybrid", cross_context=True)
    assert sorted(r.content for r in crossed) == ["rollback one", "rollback two"]
    assert delete_document(store, SCOPE, "same.md")
    assert [r.content for r in search(store, "rollback", cross_context=True)] == ["rollback two"]


@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
def test_filters_apply_before_normalising(store: EmbeddedKnowledgeStore, mode: str):
    upsert_document(store, SCOPE, source_doc("runbooks/deploy.md", DEPLOY, team="ops"))
    upsert_document(
        store, SCOPE, source_doc("notes/deploy.txt", "deployment notes rollback", team="dev")
    )
    by_pattern = search(store, "rollback deployment", mode, file_patterns=("*.txt",))
    assert paths(by_pattern) == ["notes/deploy.txt"]
    by_metadata = search(store, "rollback deployment", mode, metadata={"team": "ops"})
    assert paths(by_metadata) == ["runbooks/deploy.md"]
    if mode != "vector":
        # The best chunk the caller may see ranks at 1.0 (vector scores are absolute).
        assert by_pattern[0].rank_score == 1.0
        assert by_metadata[0].rank_score == 1.0
    assert search(store, "rollback", mode, metadata={"team": "nobody"}) == []


def test_result_metadata_comes_from_the_indexer(store: EmbeddedKnowledgeStore):
    upsert_document(store, SCOPE, source_doc("runbooks/deploy.md", DEPLOY, team="ops"))
    (result,) = search(store, "kubectl")
    assert result.metadata["title"] == "Deploy"
    assert list(result.metadata["heading_path"]) == ["Deploy"]
    assert result.metadata["team"] == "ops"
    # The source gave no key: the bucket-style one, so the hit names its scope.
    assert result.metadata["source_key"] == "ops-bot/runbooks/runbooks/deploy.md"
    assert result.metadata["content_type"] == "text/markdown"


def test_max_results_and_min_score(filled: EmbeddedKnowledgeStore):
    assert len(search(filled, "water", "vector", max_results=2, min_score=0.0)) == 2
    every = search(filled, "water flour yeast", min_score=0.0)
    assert paths(every) == ["bread.md", "garden.md"]
    # min_score applies to the absolute score: one between the two keeps the stronger.
    floor = (every[0].score + every[1].score) / 2
    assert every[1].score < floor <= every[0].score
    high = search(filled, "water flour yeast", min_score=floor)
    assert paths(high) == ["bread.md"]
    assert all(r.score >= floor for r in high)


# --- write sessions ---------------------------------------------------------------------


def test_a_session_that_raises_rolls_back_entirely(filled: EmbeddedKnowledgeStore):
    embedder = HashingEmbedder(64)
    before = search(filled, "rollback", "hybrid")

    def write_then_fail() -> None:
        with filled.write_session(SCOPE) as session:
            session.put_document(header("new.md"), chunks("new.md", ["new rollback"], embedder))
            session.put_document(
                header("deploy.md"), chunks("deploy.md", ["replaced content"], embedder)
            )
            assert session.delete_document("bread.md")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_then_fail()
    assert set(filled.stored_documents(SCOPE)) == {"deploy.md", "bread.md", "garden.md"}
    assert search(filled, "rollback", "hybrid") == before
    assert search(filled, "replaced") == []
    assert filled.status(SCOPE).state is IndexState.READY


def test_a_replace_scope_session_that_raises_keeps_the_scope(filled: EmbeddedKnowledgeStore):

    def replace_then_fail() -> None:
        with filled.write_session(SCOPE, replace_scope=True):
            assert filled.status(SCOPE).state is IndexState.INDEXING
            assert search(filled, "rollback") != []  # the drop is not visible yet
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        replace_then_fail()
    assert filled.status(SCOPE).document_count == 3


def test_a_document_failing_half_way_keeps_its_previous_version(filled: EmbeddedKnowledgeStore):
    embedder = HashingEmbedder(64)

    def failing() -> Iterator[EmbeddedChunk]:
        yield from chunks("deploy.md", ["first new chunk"], embedder)
        raise StoreError("the stream broke")

    with filled.write_session(SCOPE) as session:
        with pytest.raises(StoreError, match="stream broke"):
            session.put_document(header("deploy.md", content_hash="new"), failing())
        # The session is still usable after the failed document.
        session.put_document(header("other.md"), chunks("other.md", ["zebra text"], embedder))
    assert filled.stored_document(SCOPE, "deploy.md").content_hash != "new"
    assert search(filled, "first") == []
    assert paths(search(filled, "kubectl")) == ["deploy.md"]
    assert paths(search(filled, "zebra")) == ["other.md"]


def test_session_used_outside_its_block_is_refused(store: EmbeddedKnowledgeStore):
    session = store.write_session(SCOPE)
    with pytest.raises(StoreError, match="not open"):
        session.put_document(header("a.md"), [])
    with session:
        pass
    with pytest.raises(StoreError, match="not open"):
        session.delete_document("a.md")


def test_reindex_replaces_the_scope_only(store: EmbeddedKnowledgeStore, tmp_path: Path):
    upsert_document(store, SCOPE, source_doc("old.md", "old rollback"))
    upsert_document(store, OTHER_CONTEXT, source_doc("keep.md", "keep rollback"))
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "new.md").write_text(DEPLOY, encoding="utf-8")
    result = reindex_source(store, SCOPE, LocalDirectorySource(folder))
    assert (result.indexed_documents, result.deleted_documents) == (1, 1)
    assert set(store.stored_documents(SCOPE)) == {"new.md"}
    assert set(store.stored_documents(OTHER_CONTEXT)) == {"keep.md"}
    assert search(store, "old") == []


# --- concurrency ------------------------------------------------------------------------


def test_search_during_an_open_session_sees_the_last_commit(filled: EmbeddedKnowledgeStore):
    embedder = HashingEmbedder(64)
    before = {mode: search(filled, "rollback kubectl", mode) for mode in SearchMode}
    with ThreadPoolExecutor(max_workers=2) as pool:
        with filled.write_session(SCOPE) as session:
            session.put_document(
                header("deploy.md"), chunks("deploy.md", ["rollback kubectl v2"], embedder)
            )
            session.put_document(
                header("new.md"), chunks("new.md", ["rollback kubectl new"], embedder)
            )
            # Other threads read while the write lock is held: no waiting, old state.
            during = {
                mode: pool.submit(search, filled, "rollback kubectl", mode).result(timeout=30)
                for mode in SearchMode
            }
            assert during == before
            assert pool.submit(filled.status, SCOPE).result(timeout=30).document_count == 3
        after = pool.submit(search, filled, "rollback kubectl", "keyword").result(timeout=30)
    assert sorted(r.content for r in after) == ["rollback kubectl new", "rollback kubectl v2"]


def test_concurrent_searches_never_see_half_a_session(db: Path):
    embedder = HashingEmbedder(64)
    store = EmbeddedKnowledgeStore(db, embedder=embedder, **ONE_BATCH)
    documents = 6
    generations = 30
    done = threading.Event()
    seen: set[str] = set()
    problems: list[str] = []

    def write() -> None:
        try:
            for generation in range(generations):
                marker = f"generation{generation}"
                with store.write_session(SCOPE, replace_scope=generation % 2 == 0) as session:
                    for n in range(documents):
                        path = f"doc{n}.md"
                        text = f"common {marker} part {n}"
                        session.put_document(header(path), chunks(path, [text], embedder))
        finally:
            done.set()

    def read() -> None:
        try:
            while not done.is_set():
                for mode in ("keyword", "hybrid"):
                    results = search(store, "common", mode, max_results=20)
                    markers = {r.content.split()[1] for r in results}
                    seen.update(markers)
                    if results and (len(results) != documents or len(markers) != 1):
                        problems.append(f"{mode}: {[r.content for r in results]}")
        except Exception as exc:  # a failing reader must fail the test, not die quietly
            problems.append(repr(exc))

    try:
        readers = [threading.Thread(target=read) for _ in range(3)]
        for reader in readers:
            reader.start()
        write()
        for reader in readers:
            reader.join(timeout=60)
        assert problems == []
        assert len(seen) >= 1
        final = search(store, "common", max_results=20)
        assert {r.content.split()[1] for r in final} == {f"generation{generations - 1}"}
    finally:
        store.close()


def test_two_stores_on_one_file_see_each_others_commits(filled: EmbeddedKnowledgeStore, db: Path):
    second = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))
    try:
        upsert_document(second, SCOPE, source_doc("late.md", "late arrival rollback"))
        assert "late.md" in paths(search(filled, "rollback"))
    finally:
        second.close()


# --- lifecycle and configuration --------------------------------------------------------


def test_close_is_idempotent_and_final(db: Path):
    embedder = CountingEmbedder()
    store = EmbeddedKnowledgeStore(db, embedder=embedder)
    store.close()
    store.close()
    assert not embedder.closed
    with pytest.raises(StoreError, match="closed"):
        search(store, "anything")
    with pytest.raises(StoreError, match="closed"):
        store.status(SCOPE)


def test_default_mode(db: Path, tmp_path: Path):
    with_vectors = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))
    keyword = EmbeddedKnowledgeStore(tmp_path / "other.db")
    try:
        assert with_vectors.default_mode is SearchMode.HYBRID
        assert with_vectors.supported_modes == frozenset(SearchMode)
        assert keyword.default_mode is SearchMode.KEYWORD
        assert with_vectors.name == "embedded"
    finally:
        with_vectors.close()
        keyword.close()
    chosen = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64), default_mode="vector")
    chosen.close()
    assert chosen.default_mode is SearchMode.VECTOR
    with pytest.raises(UnsupportedModeError):
        EmbeddedKnowledgeStore(tmp_path / "third.db", default_mode="hybrid")


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"fusion": "max"}, "fusion"),
        ({"keyword_weight": -1.0}, "keyword_weight"),
        ({"keyword_weight": 0.0, "vector_weight": 0.0}, "keyword_weight"),
        ({"rrf_k": -3}, "k"),
        ({"vector_cache_bytes": -1}, "vector_cache_bytes"),
        ({"isolation": "tenant"}, "isolation"),
        ({"batch_documents": 0}, "batch_documents"),
        ({"batch_seconds": 0.0}, "batch_seconds"),
        ({"batch_seconds": float("nan")}, "batch_seconds"),
        ({"headings_weight": -0.5}, "headings_weight"),
        ({"headings_weight": float("inf")}, "headings_weight"),
        ({"headings_weight": "0.5"}, "headings_weight"),
    ],
)
def test_bad_options_are_refused(db: Path, options: dict, field: str):
    with pytest.raises(ValidationError) as caught:
        EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64), **options)
    assert caught.value.field == field


def test_a_file_that_is_not_an_index_is_refused(tmp_path: Path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(ConfigurationError, match=r"garbage\.db"):
        EmbeddedKnowledgeStore(garbage)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE people (name TEXT)")
    conn.close()
    with pytest.raises(ConfigurationError, match="not a knowledge index"):
        EmbeddedKnowledgeStore(foreign)


def test_conforms_to_the_store_protocols(store: EmbeddedKnowledgeStore):
    assert isinstance(store, KnowledgeStore)
    assert isinstance(store, IndexWriter)
    assert isinstance(store.write_session(SCOPE), WriteSession)
