from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType

import pytest

from knowledge.core.errors import (
    EmbeddingError,
    NotFoundError,
    StoreError,
    StoreUnavailableError,
    ValidationError,
)
from knowledge.core.identity import content_hash, document_id
from knowledge.core.model import DocumentChunk, FileProblem, IndexOptions
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.base import Embedding
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.chunking import MarkdownSectionChunker
from knowledge.ingest.pipeline import (
    Indexer,
    document_fingerprint,
    embeds_context_by_default,
    upsert_document,
)
from knowledge.ingest.sources import Listing
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk, StoredDocument

SCOPE = KnowledgeScope("agent", "ctx")
FIVE_SECTIONS = "\n\n".join(f"## Part {i}\n\nbody of part {i}" for i in range(5))


# --- fakes ------------------------------------------------------------------------------------


class FakeEmbedder:
    """Counts calls; a text containing ``fail_on`` makes its batch fail."""

    name = "fake:embedder"
    dimensions = 3

    def __init__(self, fail_on: str | None = None, drop_one: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.fail_on = fail_on
        self.drop_one = drop_one

    def embed(self, text: str) -> Embedding:
        return self.embed_batch([text])[0]

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        self.batches.append(list(texts))
        if self.fail_on and any(self.fail_on in t for t in texts):
            raise EmbeddingError("provider failed after retries")
        embeddings = [Embedding((1.0, 0.0, float(len(t))), len(t.split())) for t in texts]
        return embeddings[1:] if self.drop_one else embeddings


class FakeSession:
    def __init__(self, writer: FakeWriter, replace: bool) -> None:
        self.writer = writer
        self.replace = replace
        self.put_paths: list[str] = []
        self.deleted: list[str] = []
        self.exit_exception: type[BaseException] | None = None
        self._failures: list[FileProblem] = []

    @property
    def failures(self) -> Sequence[FileProblem]:
        return self._failures

    def __enter__(self) -> FakeSession:
        if self.replace:
            self.writer.documents.clear()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.exit_exception = exc_type
        # As a bulk backend would: item errors are known only when the batch is flushed.
        self._failures = [
            FileProblem(p, "bulk item rejected") for p in self.put_paths if p in self.writer.reject
        ]

    def put_document(self, header: DocumentHeader, chunks: Iterable[EmbeddedChunk]) -> int:
        if header.path in self.writer.unavailable:
            raise StoreUnavailableError("connection refused")
        if header.path in self.writer.broken:
            raise StoreError("mapping conflict")
        items = list(chunks)
        self.writer.documents[header.path] = (header, items)
        self.put_paths.append(header.path)
        return len(items)

    def delete_document(self, path: str) -> bool:
        self.deleted.append(path)
        self.writer.problems.pop(path, None)
        return self.writer.documents.pop(path, None) is not None

    def record_problem(self, path: str, reason: str) -> None:
        self.writer.problems[path] = reason

    def record_unread(self, counts: Mapping[str, int]) -> None:
        self.writer.unread = dict(counts)

    def put_synonyms(self, text: str | None) -> None:
        self.writer.synonyms = text

    def stored_vectors(self, path: str) -> Mapping[str, Sequence[float]]:
        if self.writer.vectors_fail is not None:
            raise self.writer.vectors_fail
        _, items = self.writer.documents.get(path, (None, []))
        return {
            item.embedding_key: item.vector
            for item in items
            if item.embedding_key is not None and item.vector is not None
        }


class FakeWriter:
    def __init__(
        self,
        *,
        reject: Iterable[str] = (),
        unavailable: Iterable[str] = (),
        broken: Iterable[str] = (),
    ) -> None:
        self.documents: dict[str, tuple[DocumentHeader, list[EmbeddedChunk]]] = {}
        self.problems: dict[str, str] = {}
        self.unread: dict[str, int] | None = None
        self.synonyms: str | None = None
        self.sessions: list[FakeSession] = []
        self.reject = set(reject)
        self.unavailable = set(unavailable)
        self.broken = set(broken)
        self.vectors_fail: Exception | None = None

    def stored_documents(self, scope: KnowledgeScope) -> dict[str, StoredDocument]:
        return {
            path: StoredDocument(path, header.content_hash, header.version, len(chunks))
            for path, (header, chunks) in self.documents.items()
        }

    def stored_document(self, scope: KnowledgeScope, path: str) -> StoredDocument | None:
        return self.stored_documents(scope).get(path)

    def problem_paths(self, scope: KnowledgeScope) -> set[str]:
        return set(self.problems)

    def write_session(self, scope: KnowledgeScope, *, replace_scope: bool = False) -> FakeSession:
        session = FakeSession(self, replace_scope)
        self.sessions.append(session)
        return session

    def chunks(self, path: str) -> list[EmbeddedChunk]:
        return self.documents[path][1]


def doc(
    path: str,
    text: str | bytes,
    *,
    version: str | None = None,
    metadata: dict[str, str | list[str]] | None = None,
    source_key: str | None = None,
    size: int | None = None,
) -> SourceDocument:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return SourceDocument(
        path=path,
        size=len(data) if size is None else size,
        read=lambda: data,
        version=version,
        metadata=metadata or {},
        source_key=source_key,
    )


class ListSource:
    """A source over given documents; optionally reports listing problems like ``Listing``."""

    def __init__(
        self,
        documents: Iterable[SourceDocument],
        *,
        skipped: Iterable[FileProblem] = (),
        errors: Iterable[FileProblem] = (),
        fail: Exception | None = None,
    ) -> None:
        self.docs = list(documents)
        self.skipped = list(skipped)
        self.errors = list(errors)
        self.fail = fail

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Listing[SourceDocument]:
        def produce(listing: Listing[SourceDocument]) -> Iterator[SourceDocument]:
            yield from self.docs
            if self.fail is not None:
                raise self.fail
            listing.skipped.extend(self.skipped)
            listing.errors.extend(self.errors)

        return Listing(produce)


def indexer(embedder: FakeEmbedder | None = None, batch: int = 64, size: int = 500) -> Indexer:
    # What the embedder sees is the chunk's text alone here (embed_context has its tests).
    return Indexer(
        MarkdownSectionChunker(chunk_size=size, overlap=0),
        embedder,
        embed_batch_size=batch,
        embed_context=False,
    )


# --- embedding ----------------------------------------------------------------------------------


def test_chunks_are_embedded_in_batches_and_tokens_summed() -> None:
    embedder = FakeEmbedder()
    writer = FakeWriter()
    result = indexer(embedder, batch=2).index(
        writer, SCOPE, ListSource([doc("a.md", FIVE_SECTIONS), doc("b.md", "## One\n\nword")])
    )
    assert [len(b) for b in embedder.batches] == [2, 2, 1, 1]
    assert (result.indexed_documents, result.indexed_chunks) == (2, 6)
    expected_tokens = sum(len(t.split()) for batch in embedder.batches for t in batch)
    assert result.embedding_tokens == expected_tokens > 0
    for item in writer.chunks("a.md"):
        assert item.vector == (1.0, 0.0, float(len(item.chunk.content)))


# --- embedding reuse --------------------------------------------------------------------------


def sections(count: int, edited: Iterable[int] = ()) -> str:
    changed = set(edited)
    return "\n\n".join(
        f"## Part {i}\n\n{'edited' if i in changed else 'body'} of part {i}" for i in range(count)
    )


def test_an_edit_sends_only_the_changed_chunks_to_the_embedder_and_counts_both() -> None:
    embedder = FakeEmbedder()
    writer = FakeWriter()
    first = indexer(embedder).upsert(writer, SCOPE, doc("a.md", sections(10)))
    assert (first.embedded_chunks, first.reused_chunks) == (10, 0)
    before = {item.chunk.chunk_index: item for item in writer.chunks("a.md")}
    embedder.batches.clear()

    second = indexer(embedder).upsert(writer, SCOPE, doc("a.md", sections(10, edited=[3, 7])))

    assert embedder.batches == [["## Part 3\n\nedited of part 3", "## Part 7\n\nedited of part 7"]]
    assert (second.embedded_chunks, second.reused_chunks) == (2, 8)
    assert second.to_dict()["embedded_chunks"] == 2
    assert second.to_dict()["reused_chunks"] == 8
    after = {item.chunk.chunk_index: item for item in writer.chunks("a.md")}
    for index in set(range(10)) - {3, 7}:
        assert after[index].vector is before[index].vector  # the stored object itself
        assert after[index].embedding_key == before[index].embedding_key
    for index in (3, 7):
        assert after[index].embedding_key != before[index].embedding_key
        assert after[index].vector == (1.0, 0.0, float(len(after[index].chunk.content)))


def test_the_key_is_the_embedded_text_with_the_embedder_name_and_dimension() -> None:
    from knowledge.core.identity import embedding_key

    embedder = FakeEmbedder()
    writer = FakeWriter()
    indexer(embedder).upsert(writer, SCOPE, doc("a.md", "## One\n\nword"))
    (item,) = writer.chunks("a.md")
    expected = hashlib.sha256(b"fake:embedder\x1f3\x1f## One\n\nword").hexdigest()
    assert item.embedding_key == expected
    assert embedding_key("fake:embedder", 3, "## One\n\nword") == expected
    assert embedding_key("fake:other", 3, "## One\n\nword") != expected
    assert embedding_key("fake:embedder", 4, "## One\n\nword") != expected


def test_another_embedder_reuses_nothing() -> None:
    writer = FakeWriter()
    indexer(FakeEmbedder()).upsert(writer, SCOPE, doc("a.md", sections(6)))

    class OtherEmbedder(FakeEmbedder):
        name = "fake:other-model"

    other = OtherEmbedder()
    result = indexer(other).upsert(writer, SCOPE, doc("a.md", sections(6, edited=[0])))
    assert sum(len(batch) for batch in other.batches) == 6
    assert (result.embedded_chunks, result.reused_chunks) == (6, 0)


def test_with_reuse_a_batch_still_carries_embed_batch_size_texts() -> None:
    embedder = FakeEmbedder()
    writer = FakeWriter()
    indexer(embedder, batch=2).upsert(writer, SCOPE, doc("a.md", sections(12)))
    embedder.batches.clear()
    indexer(embedder, batch=2).upsert(writer, SCOPE, doc("a.md", sections(12, edited=[1, 6, 11])))
    # Changed chunks 1 and 6 wait for each other across reused ones; 11 goes alone.
    assert [len(batch) for batch in embedder.batches] == [2, 1]
    assert [c.chunk.chunk_index for c in writer.chunks("a.md")] == list(range(12))


def test_a_batch_holds_a_bounded_number_of_reused_chunks() -> None:
    embedder = FakeEmbedder()
    writer = FakeWriter()
    indexer(embedder, batch=2).upsert(writer, SCOPE, doc("a.md", sections(40)))
    embedder.batches.clear()
    indexer(embedder, batch=2).upsert(writer, SCOPE, doc("a.md", sections(40, edited=[0, 39])))
    # Not one batch of 2 texts: at most 8 x embed_batch_size chunks wait for a text.
    assert embedder.batches == [
        ["## Part 0\n\nedited of part 0"],
        ["## Part 39\n\nedited of part 39"],
    ]


def test_a_new_document_and_a_reindex_do_not_ask_for_stored_vectors() -> None:
    embedder = FakeEmbedder()
    writer = FakeWriter()
    writer.vectors_fail = AssertionError("stored_vectors must not be called")
    indexer(embedder).upsert(writer, SCOPE, doc("a.md", sections(3)))
    result = indexer(embedder).reindex(writer, SCOPE, ListSource([doc("a.md", sections(3))]))
    assert (result.embedded_chunks, result.reused_chunks) == (3, 0)


def test_a_failed_read_of_stored_vectors_costs_the_reuse_not_the_document(
    caplog: pytest.LogCaptureFixture,
) -> None:
    embedder = FakeEmbedder()
    writer = FakeWriter()
    indexer(embedder).upsert(writer, SCOPE, doc("a.md", sections(4)))
    writer.vectors_fail = StoreError("search rejected")
    result = indexer(embedder).upsert(writer, SCOPE, doc("a.md", sections(4, edited=[0])))
    assert result.ok
    assert (result.embedded_chunks, result.reused_chunks) == (4, 0)
    assert "no embedding reuse for a.md: search rejected" in caplog.text


def test_an_unavailable_store_while_reading_stored_vectors_stops_the_run() -> None:
    embedder = FakeEmbedder()
    writer = FakeWriter()
    indexer(embedder).upsert(writer, SCOPE, doc("a.md", sections(4)))
    writer.vectors_fail = StoreUnavailableError("connection refused")
    with pytest.raises(StoreUnavailableError):
        indexer(embedder).upsert(writer, SCOPE, doc("a.md", sections(4, edited=[0])))


def test_the_memory_store_has_no_vectors_to_reuse() -> None:
    from knowledge.stores.memory import MemoryKnowledgeStore

    store = MemoryKnowledgeStore()
    upsert_document(store, SCOPE, doc("a.md", sections(3)))
    with store.write_session(SCOPE) as session:
        assert session.stored_vectors("a.md") == {}


def test_without_an_embedder_chunks_have_no_vectors() -> None:
    writer = FakeWriter()
    result = indexer(None).index(writer, SCOPE, ListSource([doc("a.md", FIVE_SECTIONS)]))
    assert result.indexed_chunks == 5
    assert result.embedding_tokens == 0
    assert all(item.vector is None for item in writer.chunks("a.md"))


def test_an_embedding_failure_is_an_error_for_that_document_only() -> None:
    embedder = FakeEmbedder(fail_on="poison")
    writer = FakeWriter()
    writer.documents["bad.md"] = (
        DocumentHeader("bad.md", "id", "old-hash", datetime.now(UTC)),
        [],
    )
    source = ListSource([doc("bad.md", "## Bad\n\npoison pill"), doc("good.md", "## Good\n\nok")])
    result = indexer(embedder).index(writer, SCOPE, source)
    assert result.indexed_documents == 1
    assert [p.path for p in result.errors] == ["bad.md"]
    assert "provider failed" in result.errors[0].reason
    assert "good.md" in writer.documents
    # A failed write leaves the previous version searchable (the session drops what it
    # wrote of the new one); a later run retries it.
    assert writer.documents["bad.md"][0].content_hash == "old-hash"
    assert "bad.md" not in writer.sessions[0].deleted
    assert writer.sessions[0].exit_exception is None


def test_a_wrong_number_of_embeddings_is_an_error() -> None:
    result = indexer(FakeEmbedder(drop_one=True)).index(
        FakeWriter(), SCOPE, ListSource([doc("a.md", "## A\n\nalpha")])
    )
    assert result.indexed_documents == 0
    assert "returned 0 embeddings for 1 texts" in result.errors[0].reason


# --- per-document problems ----------------------------------------------------------------------


def test_extraction_failures_are_skipped_and_the_rest_indexed() -> None:
    writer = FakeWriter()
    source = ListSource(
        [
            doc("a.md", "## A\n\nalpha"),
            doc("binary.md", b"\x00\x01\x02binary"),
            doc("image.png", b"PNG"),
            doc("z.txt", "zulu"),
        ]
    )
    result = indexer().index(writer, SCOPE, source)
    assert result.indexed_documents == 2
    assert result.errors == ()
    reasons = {p.path: p.reason for p in result.skipped}
    assert set(reasons) == {"binary.md", "image.png"}
    assert reasons["image.png"].startswith("unsupported format")
    assert set(writer.documents) == {"a.md", "z.txt"}


def test_content_that_became_unindexable_keeps_the_previous_version() -> None:
    writer = FakeWriter()
    indexer().index(writer, SCOPE, ListSource([doc("a.md", "alpha")]))
    result = indexer().index(writer, SCOPE, ListSource([doc("a.md", b"\x00binary now")]))
    assert "a.md" in writer.documents
    assert result.deleted_documents == 0
    assert "the previously indexed version is still searched" in result.skipped[0].reason


def test_too_large_documents_are_skipped_without_reading() -> None:
    def explode() -> bytes:
        raise AssertionError("read() must not be called")

    big = SourceDocument(path="big.md", size=2_000, read=explode)
    result = indexer().index(
        FakeWriter(),
        SCOPE,
        ListSource([big, doc("ok.md", "fine")]),
        IndexOptions(max_document_bytes=1_000),
    )
    assert result.indexed_documents == 1
    assert [p.path for p in result.skipped] == ["big.md"]
    assert "max_document_bytes (1000)" in result.skipped[0].reason


def test_a_size_that_lied_is_still_caught_after_reading() -> None:
    result = indexer().index(
        FakeWriter(),
        SCOPE,
        ListSource([doc("liar.md", "x" * 2_000, size=10)]),
        IndexOptions(max_document_bytes=1_000),
    )
    assert result.indexed_documents == 0
    assert "over the limit" in result.skipped[0].reason


def test_an_unreadable_file_is_an_error_and_the_run_goes_on() -> None:
    def vanished() -> bytes:
        raise FileNotFoundError("gone")

    source = ListSource([SourceDocument("gone.md", 3, vanished), doc("ok.md", "fine")])
    result = indexer().index(FakeWriter(), SCOPE, source)
    assert result.indexed_documents == 1
    assert [(p.path, p.reason) for p in result.errors] == [("gone.md", "cannot read: gone")]


def test_a_file_that_is_not_utf8_is_indexed_with_a_warning() -> None:
    writer = FakeWriter()
    source = ListSource(
        [doc("latin.txt", b"caf\xe9 menu"), doc("damaged.txt", b"caf\xc3\xa9 \xff")]
    )
    result = indexer().index(writer, SCOPE, source)
    assert result.indexed_documents == 2
    assert result.errors == ()
    assert sorted(p.path for p in result.warnings) == ["damaged.txt", "latin.txt"]
    # A legacy encoding is detected (knowledge.extraction.encoding); damaged UTF-8 keeps
    # its valid characters and marks the invalid byte.
    assert "café menu" in writer.chunks("latin.txt")[0].chunk.content
    assert "café \ufffd" in writer.chunks("damaged.txt")[0].chunk.content


def test_write_failures_at_commit_are_errors_not_indexed_documents() -> None:
    writer = FakeWriter(reject={"b.md"})
    source = ListSource([doc("a.md", FIVE_SECTIONS), doc("b.md", "## B\n\nbravo")])
    result = indexer().index(writer, SCOPE, source)
    assert (result.indexed_documents, result.indexed_chunks) == (1, 5)
    assert [(p.path, p.reason) for p in result.errors] == [("b.md", "bulk item rejected")]
    assert not result.ok


def test_a_store_error_on_one_document_is_recorded_and_the_run_goes_on() -> None:
    writer = FakeWriter(broken={"a.md"})
    result = indexer().index(writer, SCOPE, ListSource([doc("a.md", "x"), doc("b.md", "y")]))
    assert result.indexed_documents == 1
    assert [p.path for p in result.errors] == ["a.md"]
    assert "mapping conflict" in result.errors[0].reason


def test_an_unavailable_store_aborts_the_run() -> None:
    writer = FakeWriter(unavailable={"b.md"})
    source = ListSource([doc("a.md", "x"), doc("b.md", "y"), doc("c.md", "z")])
    with pytest.raises(StoreUnavailableError):
        indexer().index(writer, SCOPE, source)
    assert writer.sessions[0].exit_exception is StoreUnavailableError
    assert "c.md" not in writer.documents


def test_a_listing_failure_aborts_and_deletes_nothing() -> None:
    writer = FakeWriter()
    indexer().index(writer, SCOPE, ListSource([doc("a.md", "x"), doc("b.md", "y")]))
    failing = ListSource([doc("a.md", "x")], fail=NotFoundError("source folder is gone"))
    with pytest.raises(NotFoundError):
        indexer().index(writer, SCOPE, failing)
    assert set(writer.documents) == {"a.md", "b.md"}
    assert writer.sessions[-1].deleted == []


def test_listing_problems_are_reported() -> None:
    source = ListSource(
        [doc("a.md", "x")],
        skipped=[FileProblem("link.md", "symbolic link points outside")],
        errors=[FileProblem("a.md.metadata.json", "invalid metadata sidecar")],
    )
    result = indexer().index(FakeWriter(), SCOPE, source)
    assert result.indexed_documents == 1
    assert [p.path for p in result.skipped] == ["link.md"]
    assert [p.path for p in result.errors] == ["a.md.metadata.json"]


# --- sync semantics -----------------------------------------------------------------------------


def test_unchanged_documents_are_skipped_and_changed_ones_rewritten() -> None:
    writer = FakeWriter()
    first = indexer().index(writer, SCOPE, ListSource([doc("a.md", "alpha"), doc("b.md", "b")]))
    assert first.indexed_documents == 2
    second = indexer().index(
        writer, SCOPE, ListSource([doc("a.md", "alpha"), doc("b.md", "bravo")])
    )
    assert second.indexed_documents == 1
    assert [(p.path, p.reason) for p in second.skipped] == [("a.md", "unchanged")]
    assert writer.chunks("b.md")[0].chunk.content == "bravo"


def test_a_metadata_change_alone_reindexes() -> None:
    writer = FakeWriter()
    indexer().index(writer, SCOPE, ListSource([doc("a.md", "alpha", metadata={"team": "a"})]))
    again = indexer().index(
        writer, SCOPE, ListSource([doc("a.md", "alpha", metadata={"team": "b"})])
    )
    assert again.indexed_documents == 1
    assert writer.chunks("a.md")[0].chunk.metadata["team"] == "b"


def test_documents_gone_from_the_source_are_deleted() -> None:
    writer = FakeWriter()
    indexer().index(writer, SCOPE, ListSource([doc("a.md", "x"), doc("b.md", "y")]))
    result = indexer().index(writer, SCOPE, ListSource([doc("b.md", "y")]))
    assert result.deleted_documents == 1
    assert set(writer.documents) == {"b.md"}


def test_no_document_limit_by_default() -> None:
    writer = FakeWriter()
    source = ListSource([doc(f"d{n:04d}.md", f"note {n}") for n in range(1500)])
    result = indexer().index(writer, SCOPE, source)
    assert (result.indexed_documents, result.skipped, result.errors) == (1500, (), ())
    assert len(writer.documents) == 1500
    result = indexer().reindex(writer, SCOPE, source)
    assert (result.indexed_documents, result.deleted_documents) == (1500, 0)
    assert len(writer.documents) == 1500


def test_over_max_documents_the_rest_is_an_error_and_nothing_deleted() -> None:
    writer = FakeWriter()
    indexer().index(writer, SCOPE, ListSource([doc("old.md", "x")]))
    source = ListSource([doc(f"{c}.md", c) for c in "abcd"])
    result = indexer().index(writer, SCOPE, source, IndexOptions(max_documents=2))
    assert result.indexed_documents == 2
    assert result.skipped == ()
    assert [p.path for p in result.errors] == ["c.md", "d.md"]
    assert all("over max_documents (2)" in p.reason for p in result.errors)
    assert not result.ok
    assert result.deleted_documents == 0
    assert set(writer.documents) == {"old.md", "a.md", "b.md"}


def test_reindex_replaces_the_scope_and_writes_everything() -> None:
    writer = FakeWriter()
    indexer().index(writer, SCOPE, ListSource([doc("a.md", "x"), doc("gone.md", "y")]))
    result = indexer().reindex(writer, SCOPE, ListSource([doc("a.md", "x"), doc("new.md", "z")]))
    assert writer.sessions[-1].replace is True
    assert (result.indexed_documents, result.deleted_documents) == (2, 1)
    assert result.skipped == ()
    assert set(writer.documents) == {"a.md", "new.md"}


def test_reindex_over_max_documents_deletes_nothing() -> None:
    writer = FakeWriter()
    source = ListSource([doc("a.md", "x"), doc("b.md", "y"), doc("c.md", "z")])
    indexer().index(writer, SCOPE, source)
    result = indexer().reindex(writer, SCOPE, source, IndexOptions(max_documents=2))
    assert writer.sessions[-1].replace is False  # a capped run never drops the scope
    assert (result.indexed_documents, result.deleted_documents) == (2, 0)
    assert [p.path for p in result.errors] == ["c.md"]
    assert "over max_documents (2)" in result.errors[0].reason
    assert set(writer.documents) == {"a.md", "b.md", "c.md"}


def test_reindex_within_max_documents_replaces_the_scope() -> None:
    writer = FakeWriter()
    indexer().index(writer, SCOPE, ListSource([doc("a.md", "x"), doc("gone.md", "y")]))
    result = indexer().reindex(
        writer, SCOPE, ListSource([doc("a.md", "x")]), IndexOptions(max_documents=1)
    )
    assert writer.sessions[-1].replace is True
    assert (result.indexed_documents, result.deleted_documents, result.errors) == (1, 1, ())
    assert set(writer.documents) == {"a.md"}


# --- the document written ------------------------------------------------------------------------


def test_header_and_chunk_metadata() -> None:
    writer = FakeWriter()
    source = ListSource(
        [
            doc(
                "runbooks/deploy.md",
                "# Deploy\n\nintro\n\n## Rollback\n\nundo it",
                version="00A1",
                metadata={"team": "sre", "title": "user title", "source_key": "user key"},
                source_key="agent/ctx/runbooks/deploy.md",
            ),
            doc("plain.txt", "no key given"),
        ]
    )
    indexer().index(writer, SCOPE, source)
    header, chunks = writer.documents["runbooks/deploy.md"]
    data = b"# Deploy\n\nintro\n\n## Rollback\n\nundo it"
    assert header.document_id == document_id(SCOPE, "runbooks/deploy.md")
    assert header.content_hash == document_fingerprint(
        data, {"team": "sre", "title": "user title", "source_key": "user key"}
    )
    assert header.version == "00A1"
    assert header.indexed_at.tzinfo is not None
    assert dict(header.metadata) == {
        "team": "sre",
        "title": "user title",
        "source_key": "agent/ctx/runbooks/deploy.md",
        "content_type": "text/markdown",
        "format": "markdown",
        "origin": "upload",
    }
    assert [dict(c.chunk.metadata) for c in chunks] == [
        {
            "team": "sre",
            "title": "Deploy",
            "source_key": "agent/ctx/runbooks/deploy.md",
            "content_type": "text/markdown",
            "format": "markdown",
            "origin": "upload",
            "heading_path": ["Deploy"],
        },
        {
            "team": "sre",
            "title": "Deploy",
            "source_key": "agent/ctx/runbooks/deploy.md",
            "content_type": "text/markdown",
            "format": "markdown",
            "origin": "upload",
            "heading_path": ["Deploy", "Rollback"],
        },
    ]
    plain = writer.chunks("plain.txt")[0].chunk.metadata
    assert plain["source_key"] == "agent/ctx/plain.txt"  # bucket-style: it names its scope
    assert plain["content_type"] == "text/plain"
    assert plain["format"] == "text"


def test_max_chunk_size_caps_the_chunker() -> None:
    writer = FakeWriter()
    text = "word " * 200
    indexer(size=500).index(
        writer, SCOPE, ListSource([doc("a.txt", text)]), IndexOptions(max_chunk_size=100)
    )
    assert all(len(c.chunk.content) <= 100 for c in writer.chunks("a.txt"))
    assert len(writer.chunks("a.txt")) > 5


class GappyChunker:
    chunk_size = 500

    def chunk(
        self, document_path: str, content: str, *, max_chunk_size: int | None = None
    ) -> Iterator[DocumentChunk]:
        for index in (0, 2, 5):
            yield DocumentChunk(document_path, index, f"piece {index}", {"title": "t"})


def test_chunk_indexes_are_made_dense() -> None:
    writer = FakeWriter()
    Indexer(GappyChunker(), None).index(writer, SCOPE, ListSource([doc("a.md", "x")]))
    assert [(c.chunk.chunk_index, c.chunk.content) for c in writer.chunks("a.md")] == [
        (0, "piece 0"),
        (1, "piece 2"),
        (2, "piece 5"),
    ]


def test_document_fingerprint() -> None:
    assert document_fingerprint(b"abc", {}) == content_hash(b"abc")
    with_meta = document_fingerprint(b"abc", {"a": "1", "b": ["x"]})
    assert with_meta != content_hash(b"abc")
    assert with_meta == document_fingerprint(b"abc", {"b": ["x"], "a": "1"})
    assert with_meta != document_fingerprint(b"abc", {"a": "2", "b": ["x"]})


# --- upsert and delete ---------------------------------------------------------------------------


def test_upsert_skips_older_versions_and_writes_nothing() -> None:
    writer = FakeWriter()
    assert indexer().upsert(writer, SCOPE, doc("a.md", "new", version="0B")).indexed_documents == 1
    sessions = len(writer.sessions)
    older = indexer().upsert(writer, SCOPE, doc("a.md", "old", version="0A"))
    assert older.indexed_documents == 0
    assert older.skipped[0].reason == "stale version: 0A is older than the indexed 0B"
    # Decided inside the session (on the version indexed then), which writes nothing.
    assert [(s.put_paths, s.deleted) for s in writer.sessions[sessions:]] == [([], [])]
    assert writer.chunks("a.md")[0].chunk.content == "new"


def test_upsert_without_versions_always_writes_changed_content() -> None:
    writer = FakeWriter()
    indexer().upsert(writer, SCOPE, doc("a.md", "one"))
    assert indexer().upsert(writer, SCOPE, doc("a.md", "two")).indexed_documents == 1
    assert indexer().upsert(writer, SCOPE, doc("a.md", "two")).skipped[0].reason == "unchanged"


def test_upsert_reports_failures_at_commit() -> None:
    result = indexer().upsert(FakeWriter(reject={"a.md"}), SCOPE, doc("a.md", "x"))
    assert result.indexed_documents == 0
    assert [p.path for p in result.errors] == ["a.md"]


def test_delete_respects_versions() -> None:
    writer = FakeWriter()
    indexer().upsert(writer, SCOPE, doc("a.md", "x", version="05"))
    assert indexer().delete(writer, SCOPE, "missing.md") is False
    assert indexer().delete(writer, SCOPE, "a.md", version="04") is False
    assert "a.md" in writer.documents
    assert indexer().delete(writer, SCOPE, "a.md", version="06") is True
    assert "a.md" not in writer.documents


def test_embed_batch_size_is_validated() -> None:
    with pytest.raises(ValidationError, match="embed_batch_size"):
        Indexer(MarkdownSectionChunker(), None, embed_batch_size=0)
    with pytest.raises(ValidationError, match="embed_batch_size"):
        Indexer(MarkdownSectionChunker(), None, embed_batch_size=True)


def test_embed_context_puts_title_and_headings_in_front_of_what_is_embedded() -> None:
    text = "# Guide\n\n## Install\n\n### Disks\n\npartition the disk first"
    plain, with_context = FakeEmbedder(), FakeEmbedder()
    writer = FakeWriter()
    indexer(plain).index(writer, SCOPE, ListSource([doc("g.md", text)]))
    stored = [item.chunk.content for item in writer.chunks("g.md")]
    context_writer = FakeWriter()
    Indexer(
        MarkdownSectionChunker(chunk_size=500, overlap=0), with_context, embed_context=True
    ).index(context_writer, SCOPE, ListSource([doc("g.md", text)]))
    # The stored chunks are the same; only what the embedder saw has the context in front.
    assert [item.chunk.content for item in context_writer.chunks("g.md")] == stored
    assert plain.batches[0][-1] == "### Disks\n\npartition the disk first"
    assert with_context.batches[0][-1] == (
        "Guide > Install > Disks\n\n### Disks\n\npartition the disk first"
    )


def test_context_is_embedded_by_default_except_with_the_hashing_embedder() -> None:
    text = "# Guide\n\n## Install\n\npartition the disk first"
    semantic = FakeEmbedder()
    Indexer(MarkdownSectionChunker(), semantic).index(
        FakeWriter(), SCOPE, ListSource([doc("g.md", text)])
    )
    assert semantic.batches[0][-1] == "Guide > Install\n\n## Install\n\npartition the disk first"
    hashing_writer = FakeWriter()
    Indexer(MarkdownSectionChunker(), HashingEmbedder(16)).index(
        hashing_writer, SCOPE, ListSource([doc("g.md", text)])
    )
    (last,) = [item for item in hashing_writer.chunks("g.md") if "partition" in item.chunk.content]
    assert last.vector == HashingEmbedder(16).embed(last.chunk.content).vector
    assert embeds_context_by_default(FakeEmbedder()) is True
    assert embeds_context_by_default(HashingEmbedder()) is False
    assert embeds_context_by_default(None) is False


def test_embed_context_must_be_a_boolean() -> None:
    with pytest.raises(ValidationError) as info:
        Indexer(MarkdownSectionChunker(), None, embed_context="yes")  # type: ignore[arg-type]
    assert info.value.field == "embed_context"
