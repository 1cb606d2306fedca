"""knowledge.local.watcher: snapshots, diffs and synchronous polls against a memory store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from knowledge.local.watcher import (
    BucketWatcher,
    FileStamp,
    SnapshotDiff,
    diff_snapshots,
    take_snapshot,
)
from knowledge.model import SearchMode, SearchQuery
from knowledge.scope import KnowledgeScope
from knowledge.sources.local import BucketFolderSource
from knowledge.stores.memory import MemoryKnowledgeStore

SCOPE = KnowledgeScope("ops-bot", "runbooks")


def write(path: Path, text: str, *, bump: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    if bump:
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump))


def paths(store: MemoryKnowledgeStore, query: str, scope: KnowledgeScope = SCOPE) -> list[str]:
    return sorted(
        {r.document_path for r in store.search(scope, SearchQuery(query, mode=SearchMode.KEYWORD))}
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "bucket"


@pytest.fixture
def store() -> MemoryKnowledgeStore:
    return MemoryKnowledgeStore()


@pytest.fixture
def watcher(root: Path, store: MemoryKnowledgeStore) -> BucketWatcher:
    root.mkdir()
    return BucketWatcher(root, store, BucketFolderSource(root), poll_interval=0.05)


def test_snapshot_keys_and_hidden_entries(root: Path) -> None:
    write(root / "a" / "b" / "c.md", "x")
    write(root / "a" / "b" / ".c.md.swp", "x")
    write(root / "a" / ".git" / "HEAD", "x")
    snapshot = take_snapshot(root)
    assert list(snapshot) == ["a/b/c.md"]
    assert snapshot["a/b/c.md"].size == 1


def test_diff_snapshots() -> None:
    before = {"a": FileStamp(1, 1), "b": FileStamp(1, 1), "c": FileStamp(1, 1)}
    after = {"a": FileStamp(1, 1), "b": FileStamp(2, 1), "d": FileStamp(1, 1)}
    assert diff_snapshots(before, after) == SnapshotDiff(changed=("b", "d"), deleted=("c",))
    assert not diff_snapshots(after, after)


def test_poll_without_changes_does_nothing(watcher: BucketWatcher) -> None:
    assert watcher.poll_once() == []


def test_create_modify_delete(
    root: Path, watcher: BucketWatcher, store: MemoryKnowledgeStore
) -> None:
    doc = root / "ops-bot" / "runbooks" / "sub" / "zebra.md"
    write(doc, "# Zebra\n\nzebra escalation\n")
    assert [(c.key, c.action) for c in watcher.poll_once()] == [
        ("ops-bot/runbooks/sub/zebra.md", "indexed")
    ]
    assert paths(store, "zebra") == ["sub/zebra.md"]

    write(doc, "# Okapi\n\nokapi escalation\n", bump=1_000_000_000)
    assert [c.action for c in watcher.poll_once()] == ["indexed"]
    assert paths(store, "okapi") == ["sub/zebra.md"]
    assert paths(store, "zebra") == []

    doc.unlink()
    assert [(c.key, c.action) for c in watcher.poll_once()] == [
        ("ops-bot/runbooks/sub/zebra.md", "deleted")
    ]
    assert paths(store, "okapi") == []


def test_touch_without_change_is_unchanged(root: Path, watcher: BucketWatcher) -> None:
    doc = root / "ops-bot" / "runbooks" / "a.md"
    write(doc, "alpha beta")
    watcher.poll_once()
    write(doc, "alpha beta", bump=1_000_000_000)
    assert [c.action for c in watcher.poll_once()] == ["unchanged"]


def test_invalid_keys_are_rejected_with_reason(
    root: Path, watcher: BucketWatcher, store: MemoryKnowledgeStore
) -> None:
    write(root / "Bad Agent" / "ctx" / "a.md", "alpha")
    write(root / "README.md", "alpha")
    write(root / "ops-bot" / "loose.md", "alpha")
    changes = {c.key: c for c in watcher.poll_once()}
    assert {k: c.action for k, c in changes.items()} == {
        "Bad Agent/ctx/a.md": "rejected",
        "README.md": "rejected",
        "ops-bot/loose.md": "rejected",
    }
    assert "must be 1-64 characters" in changes["Bad Agent/ctx/a.md"].detail
    assert "<agent>/<context>/<path>" in changes["README.md"].detail


def test_non_documents_are_ignored(root: Path, watcher: BucketWatcher) -> None:
    write(root / "ops-bot" / "runbooks" / "diagram.svg", "<svg/>")
    assert [(c.key, c.action) for c in watcher.poll_once()] == [
        ("ops-bot/runbooks/diagram.svg", "ignored")
    ]


def test_sidecar_changes_reindex_their_document(
    root: Path, watcher: BucketWatcher, store: MemoryKnowledgeStore
) -> None:
    folder = root / "support-bot" / "faq"
    write(folder / "billing.md", "refunds within 14 days")
    write(folder / "billing.md.metadata.json", '{"metadataAttributes": {"team": "payments"}}')
    scope = KnowledgeScope("support-bot", "faq")
    changes = watcher.poll_once()
    # the document and its sidecar arrive together: one upsert
    assert [(c.key, c.action) for c in changes] == [("support-bot/faq/billing.md", "indexed")]

    def with_team(team: str) -> list[str]:
        query = SearchQuery("refunds", mode=SearchMode.KEYWORD, metadata={"team": team})
        return [r.document_path for r in store.search(scope, query)]

    assert with_team("payments") == ["billing.md"]
    write(
        folder / "billing.md.metadata.json",
        '{"metadataAttributes": {"team": "finance"}}',
        bump=1_000_000_000,
    )
    assert [(c.key, c.action) for c in watcher.poll_once()] == [
        ("support-bot/faq/billing.md", "indexed")
    ]
    assert (with_team("finance"), with_team("payments")) == (["billing.md"], [])

    (folder / "billing.md.metadata.json").unlink()
    assert [c.action for c in watcher.poll_once()] == ["indexed"]
    assert with_team("finance") == []
    assert paths(store, "refunds", scope) == ["billing.md"]


def test_deleting_a_scope_folder_deletes_its_documents(
    root: Path, watcher: BucketWatcher, store: MemoryKnowledgeStore
) -> None:
    folder = root / "ops-bot" / "runbooks"
    write(folder / "a.md", "alpha")
    write(folder / "b.md", "alpha")
    watcher.poll_once()
    for doc in folder.iterdir():
        doc.unlink()
    folder.rmdir()
    assert sorted(c.action for c in watcher.poll_once()) == ["deleted", "deleted"]
    assert paths(store, "alpha") == []


def test_baseline_suppresses_known_files(root: Path, store: MemoryKnowledgeStore) -> None:
    write(root / "ops-bot" / "runbooks" / "a.md", "alpha")
    baseline = take_snapshot(root)
    watcher = BucketWatcher(root, store, BucketFolderSource(root), baseline=baseline)
    assert watcher.poll_once() == []
    empty = BucketWatcher(root, store, BucketFolderSource(root), baseline={})
    assert [c.action for c in empty.poll_once()] == ["indexed"]


def test_bad_poll_interval(root: Path, store: MemoryKnowledgeStore) -> None:
    root.mkdir()
    with pytest.raises(ValueError, match="poll_interval"):
        BucketWatcher(root, store, BucketFolderSource(root), poll_interval=0)


def test_start_and_stop(root: Path, watcher: BucketWatcher) -> None:
    watcher.start()
    with pytest.raises(RuntimeError):
        watcher.start()
    watcher.stop()
    watcher.stop()
