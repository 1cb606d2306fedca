"""knowledge.aws.event_indexing.EventIndexer: events applied so the index ends like the bucket."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from knowledge.aws.event_indexing import DocumentNotIndexedError, EventIndexer, EventStatus
from knowledge.aws.events import ActionKind, ObjectAction
from knowledge.core.errors import EmbeddingError, NotFoundError, StoreUnavailableError
from knowledge.core.model import IndexOptions, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.stores.memory import MemoryKnowledgeStore

SCOPE = KnowledgeScope("ops-bot", "runbooks")


@dataclass
class FakeBucket:
    """Objects by scope-relative path, with optional sidecar metadata (an ObjectLookup)."""

    objects: dict[str, bytes] = field(default_factory=dict)
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)

    def get_document(
        self, scope: KnowledgeScope, path: str, *, version: str | None = None
    ) -> SourceDocument | None:
        if path not in self.objects:
            return None
        data = self.objects[path]

        def read() -> bytes:
            self.reads.append(path)
            return data

        return SourceDocument(
            path=path,
            size=len(data),
            read=read,
            version=version,
            metadata=self.metadata.get(path, {}),
            source_key=f"{scope.key}/{path}",
        )

    def exists(self, scope: KnowledgeScope, path: str) -> bool:
        return path in self.objects

    def revision(self, scope: KnowledgeScope, path: str) -> str | None:
        return None if path not in self.objects else str(hash(self.objects[path]))


def upsert(path: str, version: str | None = "0001") -> ObjectAction:
    return ObjectAction(
        ActionKind.UPSERT, "ObjectCreated:Put", "b", f"{SCOPE.key}/{path}", SCOPE, path, version
    )


def delete(path: str, version: str | None = "0002") -> ObjectAction:
    return ObjectAction(
        ActionKind.DELETE, "ObjectRemoved:Delete", "b", f"{SCOPE.key}/{path}", SCOPE, path, version
    )


def hits(store: MemoryKnowledgeStore, text: str) -> list[str]:
    return [r.document_path for r in store.search(SCOPE, SearchQuery(text, max_results=10))]


@pytest.fixture
def bucket() -> FakeBucket:
    return FakeBucket()


@pytest.fixture
def store() -> MemoryKnowledgeStore:
    return MemoryKnowledgeStore()


@pytest.fixture
def indexer(store: MemoryKnowledgeStore, bucket: FakeBucket) -> EventIndexer:
    return EventIndexer(store, bucket)


def test_upsert_indexes_the_current_object(indexer, bucket, store):
    bucket.objects["deploy.md"] = b"# Deploy\nRoll back with helm rollback."
    outcome = indexer.apply(upsert("deploy.md"))
    assert outcome.status is EventStatus.INDEXED
    assert outcome.result is not None
    assert outcome.result.indexed_chunks >= 1
    assert hits(store, "rollback") == ["deploy.md"]
    stored = store.stored_document(SCOPE, "deploy.md")
    assert stored is not None
    assert stored.version == "0001"


def test_duplicate_event_changes_nothing(indexer, bucket, store):
    bucket.objects["deploy.md"] = b"# Deploy\nhelm rollback"
    assert indexer.apply(upsert("deploy.md", "0001")).status is EventStatus.INDEXED
    again = indexer.apply(upsert("deploy.md", "0001"))
    assert again.status is EventStatus.UNCHANGED
    assert store.status(SCOPE).document_count == 1


def test_older_event_after_a_newer_one_is_stale_and_not_even_read(indexer, bucket, store):
    bucket.objects["deploy.md"] = b"# Deploy\nversion two"
    assert indexer.apply(upsert("deploy.md", "00B0")).status is EventStatus.INDEXED
    bucket.reads.clear()
    outcome = indexer.apply(upsert("deploy.md", "00A0"))
    assert outcome.status is EventStatus.STALE
    assert "stale version" in (outcome.detail or "")
    assert bucket.reads == []
    stored = store.stored_document(SCOPE, "deploy.md")
    assert stored is not None
    assert stored.version == "00B0"


def test_object_deleted_before_its_create_event_is_processed_is_not_indexed(indexer, store):
    outcome = indexer.apply(upsert("gone.md", "0001"))
    assert outcome.status is EventStatus.NOT_INDEXED
    assert "no longer exists" in (outcome.detail or "")
    assert store.status(SCOPE).document_count == 0


def test_create_event_of_an_object_deleted_since_removes_the_indexed_copy(indexer, bucket, store):
    bucket.objects["deploy.md"] = b"# Deploy\nrollback"
    indexer.apply(upsert("deploy.md", "0001"))
    del bucket.objects["deploy.md"]
    # The delete event is still in flight; a re-delivered, newer create event arrives first.
    outcome = indexer.apply(upsert("deploy.md", "0003"))
    assert outcome.status is EventStatus.DELETED
    assert hits(store, "rollback") == []


def test_delete_removes_the_document(indexer, bucket, store):
    bucket.objects["deploy.md"] = b"# Deploy\nrollback"
    indexer.apply(upsert("deploy.md", "0001"))
    del bucket.objects["deploy.md"]
    assert indexer.apply(delete("deploy.md", "0002")).status is EventStatus.DELETED
    assert hits(store, "rollback") == []
    # A duplicate delete finds nothing to do.
    assert indexer.apply(delete("deploy.md", "0002")).status is EventStatus.NOT_INDEXED


def test_delete_of_an_object_that_exists_again_keeps_it(indexer, bucket, store):
    bucket.objects["deploy.md"] = b"# Deploy\nrollback"
    indexer.apply(upsert("deploy.md", "0003"))
    # Deleted (0002) then re-created (0003): the late delete changes nothing.
    outcome = indexer.apply(delete("deploy.md", "0002"))
    assert outcome.status is EventStatus.STALE
    assert hits(store, "rollback") == ["deploy.md"]
    # Only an old version was deleted (0004): the index already holds the current one.
    outcome = indexer.apply(delete("deploy.md", "0004"))
    assert outcome.status is EventStatus.KEPT
    assert hits(store, "rollback") == ["deploy.md"]


def test_late_delete_older_than_the_indexed_version_removes_nothing(indexer, bucket, store):
    bucket.objects["deploy.md"] = b"# Deploy\nrollback"
    indexer.apply(upsert("deploy.md", "00F0"))
    del bucket.objects["deploy.md"]
    assert indexer.apply(delete("deploy.md", "00A0")).status is EventStatus.NOT_INDEXED
    assert hits(store, "rollback") == ["deploy.md"]


@pytest.mark.parametrize(
    "order",
    [
        ("put1", "put2", "delete"),
        ("delete", "put2", "put1"),
        ("put2", "delete", "put1"),
        ("put2", "put1", "delete"),
    ],
)
def test_any_order_of_put_put_delete_ends_with_nothing_indexed(order, indexer, store):
    # By the time the events are processed the object is gone: S3 is the truth.
    events = {
        "put1": upsert("x.md", "0001"),
        "put2": upsert("x.md", "0002"),
        "delete": delete("x.md", "0003"),
    }
    for name in order:
        indexer.apply(events[name])
    assert store.status(SCOPE).document_count == 0


def test_sidecar_change_reindexes_with_the_new_metadata(indexer, bucket, store):
    bucket.objects["deploy.md"] = b"# Deploy\nrollback"
    indexer.apply(upsert("deploy.md", "0001"))
    bucket.metadata["deploy.md"] = {"team": "platform"}
    sidecar_event = ObjectAction(
        ActionKind.UPSERT,
        "ObjectCreated:Put",
        "b",
        f"{SCOPE.key}/deploy.md.metadata.json",
        SCOPE,
        "deploy.md",
        None,
    )
    assert indexer.apply(sidecar_event).status is EventStatus.INDEXED
    (result,) = store.search(SCOPE, SearchQuery("rollback", metadata={"team": "platform"}))
    assert result.metadata["team"] == "platform"


def test_paths_outside_the_file_patterns_are_ignored(store, bucket):
    indexer = EventIndexer(store, bucket, IndexOptions(file_patterns=("*.md",)))
    bucket.objects["notes.txt"] = b"rollback"
    outcome = indexer.apply(upsert("notes.txt"))
    assert outcome.status is EventStatus.IGNORED
    assert "*.md" in (outcome.detail or "")
    assert bucket.reads == []


def test_undecodable_document_is_skipped_not_retried(indexer, bucket):
    bucket.objects["binary.md"] = b"\x00\x01\x02\x03" * 64
    outcome = indexer.apply(upsert("binary.md"))
    assert outcome.status is EventStatus.SKIPPED
    assert outcome.detail


def test_ignored_and_rejected_actions_change_nothing(indexer, store):
    ignored = ObjectAction(ActionKind.IGNORE, reason="S3 test event")
    rejected = ObjectAction(ActionKind.REJECT, key="README.md", reason="bad key", field="key")
    assert indexer.apply(ignored).status is EventStatus.IGNORED
    outcome = indexer.apply(rejected)
    assert outcome.status is EventStatus.REJECTED
    assert outcome.detail == "bad key"
    assert outcome.log_fields()["field"] == "key"


class FailingEmbedder:
    name = "failing"
    dimensions = 8

    def embed(self, text: str):  # pragma: no cover - not called
        raise EmbeddingError("provider down")

    def embed_batch(self, texts):
        raise EmbeddingError("provider down after retries")


def test_a_document_that_fails_raises_so_its_record_is_retried(bucket):
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    store = EmbeddedKnowledgeStore(":memory:", embedder=FailingEmbedder())
    bucket.objects["deploy.md"] = b"# Deploy\nrollback"
    with pytest.raises(DocumentNotIndexedError, match="provider down"):
        EventIndexer(store, bucket).apply(upsert("deploy.md"))
    store.close()


class UnavailableStore(MemoryKnowledgeStore):
    def stored_document(self, scope, path):
        raise StoreUnavailableError("opensearch unreachable")


def test_an_unavailable_store_propagates(bucket):
    bucket.objects["deploy.md"] = b"# Deploy"
    with pytest.raises(StoreUnavailableError):
        EventIndexer(UnavailableStore(), bucket).apply(upsert("deploy.md"))


@dataclass
class ChangingBucket(FakeBucket):
    """Names each document's revision (its bytes and metadata) and, while the first read
    of ``path`` is under way, replaces the sidecar metadata: the write that follows
    carries what was read before the change."""

    change: dict[str, dict[str, str]] = field(default_factory=dict)

    def get_document(
        self, scope: KnowledgeScope, path: str, *, version: str | None = None
    ) -> SourceDocument | None:
        found = super().get_document(scope, path, version=version)
        if found is None:
            return None
        plain_read = found.read

        def read() -> bytes:
            data = plain_read()
            if path in self.change:
                self.metadata[path] = self.change.pop(path)
            return data

        return replace(found, read=read, revision=self.revision(scope, path))

    def revision(self, scope: KnowledgeScope, path: str) -> str | None:
        if path not in self.objects:
            return None
        return repr((self.objects[path], sorted(self.metadata.get(path, {}).items())))


def test_a_sidecar_changed_while_the_document_is_indexed_is_indexed_again(store):
    # The sidecar's own event (no version) may already have been applied by another
    # invocation; this write, carrying the old metadata, would otherwise be the last.
    bucket = ChangingBucket()
    bucket.objects["deploy.md"] = b"# Deploy\nhelm rollback"
    bucket.metadata["deploy.md"] = {"team": "blue"}
    bucket.change["deploy.md"] = {"team": "green"}
    outcome = EventIndexer(store, bucket).apply(upsert("deploy.md"))
    assert outcome.status is EventStatus.INDEXED
    (hit,) = store.search(SCOPE, SearchQuery("rollback", metadata={"team": "green"}))
    assert hit.document_path == "deploy.md"
    assert store.search(SCOPE, SearchQuery("rollback", metadata={"team": "blue"})) == []


@dataclass
class VanishingBucket(FakeBucket):
    """The object is deleted between the lookup and the read (S3's read then raises)."""

    def get_document(
        self, scope: KnowledgeScope, path: str, *, version: str | None = None
    ) -> SourceDocument | None:
        found = super().get_document(scope, path, version=version)
        if found is None:
            return None

        def read() -> bytes:
            del self.objects[path]
            raise NotFoundError(f"s3://b/{scope.key}/{path} no longer exists")

        return replace(found, read=read)


def test_an_object_deleted_while_it_is_read_is_removed_not_retried(store):
    # Not a failure: the bucket says the document is gone, so the index drops it (no
    # retry, no error logged, no problem left in the status for a file that is gone).
    bucket = VanishingBucket()
    bucket.objects["deploy.md"] = b"# Deploy\nhelm rollback"
    EventIndexer(store, FakeBucket(dict(bucket.objects))).apply(upsert("deploy.md", "0001"))
    assert hits(store, "rollback") == ["deploy.md"]
    outcome = EventIndexer(store, bucket).apply(upsert("deploy.md", "0002"))
    assert outcome.status is EventStatus.DELETED
    assert hits(store, "rollback") == []
    assert not store.status(SCOPE).problems
