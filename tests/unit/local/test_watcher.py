"""knowledge.local.watcher: snapshots, diffs and synchronous polls against a memory store."""

from __future__ import annotations

import os
import random
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from fake_embeddings import Profile, fake_embedding_server

from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.openai import OpenAIEmbeddingClient
from knowledge.ingest.sources import Listing
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.local.watcher import (
    BucketWatcher,
    FileStamp,
    SnapshotDiff,
    diff_snapshots,
    take_snapshot,
)
from knowledge.stores.embedded import EmbeddedKnowledgeStore
from knowledge.stores.memory import MemoryKnowledgeStore

SCOPE = KnowledgeScope("ops-bot", "runbooks")


def write(path: Path, text: str, *, bump: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    if bump:
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump))


def paths(
    store: MemoryKnowledgeStore, query: str, scope: KnowledgeScope = SCOPE, **fields: Any
) -> list[str]:
    searched = SearchQuery(query, mode=SearchMode.KEYWORD, **fields)
    return sorted({r.document_path for r in store.search(scope, searched)})


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


@pytest.mark.parametrize("interval", [0, -1.0, float("nan"), float("inf")])
def test_bad_poll_interval(root: Path, store: MemoryKnowledgeStore, interval: float) -> None:
    """NaN made every wait return at once (a poll loop without pause); infinity killed
    the polling thread on its first wait."""
    root.mkdir()
    with pytest.raises(ValueError, match="poll_interval"):
        BucketWatcher(root, store, BucketFolderSource(root), poll_interval=interval)


def test_start_and_stop(root: Path, watcher: BucketWatcher) -> None:
    watcher.start()
    with pytest.raises(RuntimeError):
        watcher.start()
    watcher.stop()
    watcher.stop()


# --- churn: after changes stop, the index equals the folder (issue 9, item 4) ------------------


class ChurningSource:
    """A real ``BucketFolderSource`` that changes the folder right before it lists it: the
    window between a poll's snapshot and its listing, where a delete used to get lost."""

    def __init__(self, root: Path, churn: Callable[[], None]) -> None:
        self._inner = BucketFolderSource(root)
        self.churn = churn
        self.active = True

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Listing[SourceDocument]:
        if self.active:
            self.churn()
        return self._inner.documents(scope, options)


class Folder:
    """A scope folder changed by seeded random steps; every version has a unique word."""

    def __init__(self, root: Path, seed: int) -> None:
        self.folder = root / SCOPE.agent / SCOPE.context
        self.folder.mkdir(parents=True)
        self.random = random.Random(seed)
        self.clock = 1_700_000_000_000_000_000
        self.version = 0
        self.words: dict[str, str] = {}  # file name -> the word of its current version

    def step(self) -> None:
        name = f"doc{self.random.randrange(4)}.md"
        path = self.folder / name
        if path.exists() and self.random.random() < 0.5:
            path.unlink()
            del self.words[name]
            return
        self.version += 1
        word = f"word{self.version}x"
        path.write_text(f"# {name}\n\n{word} in version {self.version}\n", "utf-8")
        self.clock += 1_000_000_000  # every write is a new stamp
        os.utime(path, ns=(self.clock, self.clock))
        self.words[name] = word

    def steps(self, most: int) -> Callable[[], None]:
        def churn() -> None:
            for _ in range(self.random.randrange(most + 1)):
                self.step()

        return churn


def assert_index_equals_folder(store: MemoryKnowledgeStore, folder: Folder) -> None:
    on_disk = sorted(p.name for p in folder.folder.iterdir())
    assert sorted(store.stored_documents(SCOPE)) == on_disk
    for name, word in folder.words.items():
        assert paths(store, word) == [name], f"{name} is not indexed at its last version"
    gone = {f"word{v}x" for v in range(1, folder.version + 1)} - set(folder.words.values())
    assert [word for word in sorted(gone) if paths(store, word)] == []


@pytest.mark.parametrize("seed", range(4))
def test_after_churn_stops_the_index_equals_the_folder(
    root: Path, store: MemoryKnowledgeStore, seed: int
) -> None:
    folder = Folder(root, seed)
    source = ChurningSource(root, folder.steps(2))
    watcher = BucketWatcher(root, store, source, baseline={})
    for _ in range(40):
        source.active = True
        for _ in range(8):
            folder.steps(2)()  # between polls
            watcher.poll_once()  # and, through the source, between snapshot and listing
        source.active = False  # churn stops: two quiet polls must settle it
        watcher.poll_once()
        watcher.poll_once()
        assert_index_equals_folder(store, folder)


def test_a_fifo_swapped_in_after_listing_never_blocks_a_poll(
    root: Path, store: MemoryKnowledgeStore
) -> None:
    folder = root / SCOPE.agent / SCOPE.context
    doc = folder / "doc.md"
    write(doc, "alpha original")

    def swap() -> None:
        if doc.is_file() and not stat.S_ISFIFO(doc.lstat().st_mode):
            doc.unlink()
            os.mkfifo(doc)

    class SwappingSource(BucketFolderSource):
        def documents(self, scope: KnowledgeScope, options: IndexOptions):  # type: ignore[override]
            listing = list(super().documents(scope, options))  # listed as a regular file ...
            swap()  # ... and a FIFO by the time it is read
            return iter(listing)

    write(folder / "later.md", "beta")
    watcher = BucketWatcher(root, store, SwappingSource(root), baseline={})
    outcome: list[BaseException | None] = []

    def poll() -> None:
        try:
            watcher.poll_once()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    thread.join(30.0)  # a poll takes milliseconds; a blocked one never ends
    if thread.is_alive():
        with open(os.open(doc, os.O_WRONLY | os.O_NONBLOCK), "wb"):
            pass  # unblock the stuck reader so the thread can end
        pytest.fail("a poll blocked on a FIFO")
    assert outcome == [None]
    assert paths(store, "beta") == ["later.md"]
    assert paths(store, "alpha") == []
    write(folder / "after.md", "gamma")
    watcher.poll_once()
    assert paths(store, "gamma") == ["after.md"]
    assert sorted(store.stored_documents(SCOPE)) == ["after.md", "later.md"]


def test_a_folder_linked_inside_its_scope_does_not_make_every_poll_work(
    root: Path, watcher: BucketWatcher, store: MemoryKnowledgeStore
) -> None:
    folder = root / SCOPE.agent / SCOPE.context
    write(folder / "real" / "doc.md", "alpha")
    (folder / "alias").symlink_to("real")  # inside the scope: the source follows it
    watcher.poll_once()
    # the source walks each real folder once, here through the link (first by name)
    assert sorted(store.stored_documents(SCOPE)) == ["alias/doc.md"]
    assert watcher.poll_once() == []
    assert watcher.poll_once() == []
    write(folder / "real" / "doc.md", "okapi", bump=1_000_000_000)
    watcher.poll_once()
    assert paths(store, "okapi") == ["alias/doc.md"]
    assert watcher.poll_once() == []


def test_a_link_out_of_the_scope_is_reported_with_its_reason(
    root: Path, watcher: BucketWatcher, store: MemoryKnowledgeStore
) -> None:
    write(root / "other" / "ctx" / "secret.md", "zebra")
    watcher.poll_once()
    link = root / SCOPE.agent / SCOPE.context / "stolen.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(root / "other" / "ctx" / "secret.md")
    changes = watcher.poll_once()
    assert [(c.key, c.action, c.detail) for c in changes] == [
        ("ops-bot/runbooks/stolen.md", "ignored", "symlink outside its scope")
    ]
    assert paths(store, "zebra") == []


def test_a_problem_of_a_file_gone_without_a_delete_event_is_cleared_by_reconcile(
    root: Path, store: MemoryKnowledgeStore
) -> None:
    """A damaged file's problem is recorded; the file goes while no snapshot sees it go (a
    watcher started after it went, as after the start-up index). The next reconcile of
    its scope clears the problem: it is not left for a reindex."""
    root.mkdir()
    write(root / "ops-bot" / "runbooks" / "broken.pdf", "not a pdf at all")
    write(root / "ops-bot" / "runbooks" / "kept.pdf", "not a pdf either")
    first = BucketWatcher(root, store, BucketFolderSource(root), baseline={})
    first.poll_once()
    assert {p.path for p in store.status(SCOPE).problems} == {"broken.pdf", "kept.pdf"}

    (root / "ops-bot" / "runbooks" / "broken.pdf").unlink()
    watcher = BucketWatcher(root, store, BucketFolderSource(root))  # never saw broken.pdf
    write(root / "ops-bot" / "runbooks" / "new.md", "# New\n\nfresh")
    watcher.poll_once()

    assert [p.path for p in store.status(SCOPE).problems] == ["kept.pdf"]
    assert paths(store, "fresh") == ["new.md"]


def test_the_start_up_index_clears_the_problem_of_a_file_gone_while_nothing_watched(
    root: Path, store: MemoryKnowledgeStore
) -> None:
    root.mkdir()
    write(root / "ops-bot" / "runbooks" / "broken.pdf", "not a pdf at all")
    write(root / "ops-bot" / "runbooks" / "kept.pdf", "not a pdf either")
    BucketWatcher(root, store, BucketFolderSource(root), baseline={}).synchronize([SCOPE])
    assert {p.path for p in store.status(SCOPE).problems} == {"broken.pdf", "kept.pdf"}

    (root / "ops-bot" / "runbooks" / "broken.pdf").unlink()  # while the server was down
    BucketWatcher(root, store, BucketFolderSource(root), baseline={}).synchronize([SCOPE])

    assert [p.path for p in store.status(SCOPE).problems] == ["kept.pdf"]


def _problems(store: MemoryKnowledgeStore) -> set[tuple[str, str]]:
    return {(p.path, p.reason) for p in store.status(SCOPE).problems}


def test_what_a_poll_leaves_out_is_in_the_status_as_the_start_up_index_says_it(
    root: Path, watcher: BucketWatcher, store: MemoryKnowledgeStore
) -> None:
    """An invalid sidecar and a link out of the scope that appear while the server runs are
    problems in the status, with the reasons the start-up index gives them (the oracle: a
    fresh store synchronised from the same folder); once fixed, they are cleared."""
    folder = root / SCOPE.agent / SCOPE.context
    write(root / "other" / "ctx" / "secret.md", "zebra")
    write(folder / "kept.md", "alpha")
    watcher.poll_once()
    assert _problems(store) == set()

    write(folder / "doc.md", "# Doc\n\nokapi")
    write(folder / "doc.md.metadata.json", "{not json")
    (folder / "stolen.md").symlink_to(root / "other" / "ctx" / "secret.md")
    watcher.poll_once()

    fresh = MemoryKnowledgeStore()
    BucketWatcher(root, fresh, BucketFolderSource(root), baseline={}).synchronize([SCOPE])
    expected = _problems(fresh)
    assert {path for path, _ in expected} == {"doc.md.metadata.json", "stolen.md"}
    assert _problems(store) == expected
    assert paths(store, "okapi") == ["doc.md"]  # indexed without the sidecar's metadata
    assert paths(store, "zebra") == []

    sidecar = '{"metadataAttributes": {"team": "sre"}}'
    write(folder / "doc.md.metadata.json", sidecar, bump=1_000_000_000)
    (folder / "stolen.md").unlink()
    watcher.poll_once()
    assert _problems(store) == set()
    query = SearchQuery("okapi", mode=SearchMode.KEYWORD, metadata={"team": "sre"})
    assert [r.document_path for r in store.search(SCOPE, query)] == ["doc.md"]


def test_a_rewrite_that_keeps_size_and_mtime_is_seen(
    root: Path, watcher: BucketWatcher, store: MemoryKnowledgeStore
) -> None:
    """On a coarse file-system clock (FAT: 2 s; HFS+ and many network shares: 1 s) two
    writes within one tick get the same mtime, and a rewrite of the same size then looks
    unchanged to a poll that came between them. A file whose mtime is not clearly older
    than the poll is read again by the next one. (The mtime is pinned ahead of this
    machine's clock, as a skewed share leaves it, so the test does not depend on speed.)"""
    doc = root / SCOPE.agent / SCOPE.context / "doc.md"
    pinned = time.time_ns() + 3_600 * 1_000_000_000
    write(doc, "# Doc\n\nokapi one")
    os.utime(doc, ns=(pinned, pinned))
    watcher.poll_once()
    assert paths(store, "okapi") == ["doc.md"]

    write(doc, "# Doc\n\nzebra two")  # the same size
    os.utime(doc, ns=(pinned, pinned))
    assert [(c.key, c.action) for c in watcher.poll_once()] == [
        ("ops-bot/runbooks/doc.md", "indexed")
    ]
    assert (paths(store, "zebra"), paths(store, "okapi")) == (["doc.md"], [])
    assert watcher.poll_once() == []  # looked at again, unchanged: nothing to report


def test_a_file_with_an_old_mtime_is_not_read_again(
    root: Path, watcher: BucketWatcher, store: MemoryKnowledgeStore
) -> None:
    doc = root / SCOPE.agent / SCOPE.context / "doc.md"
    write(doc, "# Doc\n\nokapi one")
    old = time.time_ns() - 3_600 * 1_000_000_000
    os.utime(doc, ns=(old, old))
    reads: list[str] = []
    source = BucketFolderSource(root)

    class CountingSource:
        def documents(
            self, scope: KnowledgeScope, options: IndexOptions
        ) -> Listing[SourceDocument]:
            reads.append(scope.key)
            return source.documents(scope, options)

    counting = BucketWatcher(root, store, CountingSource(), baseline={})
    assert [c.action for c in counting.poll_once()] == ["indexed"]
    assert counting.poll_once() == []
    assert reads == ["ops-bot/runbooks"]  # the second poll did not list the scope again


def test_a_name_with_a_control_character_is_a_problem_and_forges_no_log_line(
    root: Path,
    watcher: BucketWatcher,
    store: MemoryKnowledgeStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    folder = root / SCOPE.agent / SCOPE.context
    write(folder / "kept.md", "alpha")
    write(folder / "evil\n2026-01-01 INFO indexed ops-bot/runbooks/fake.md", "zebra")
    with caplog.at_level("DEBUG", logger="knowledge"):
        watcher.poll_once()
    assert paths(store, "zebra") == []
    assert [(p.path, p.reason) for p in store.status(SCOPE).problems] == [
        (
            "evil\n2026-01-01 INFO indexed ops-bot/runbooks/fake.md",
            "path not indexed: must not contain control characters",
        )
    ]
    assert [r.getMessage() for r in caplog.records if "\n" in r.getMessage()] == []


@pytest.mark.parametrize("path", ["poll", "start-up"])
def test_an_indexed_file_that_becomes_a_link_out_of_its_scope_is_removed_with_the_reason(
    root: Path, store: MemoryKnowledgeStore, path: str
) -> None:
    folder = root / SCOPE.agent / SCOPE.context
    write(root / "other" / "ctx" / "secret.md", "zebra")
    write(folder / "doc.md", "okapi")
    watcher = BucketWatcher(root, store, BucketFolderSource(root), baseline={})
    watcher.synchronize([SCOPE])
    assert paths(store, "okapi") == ["doc.md"]

    (folder / "doc.md").unlink()
    (folder / "doc.md").symlink_to(root / "other" / "ctx" / "secret.md")
    if path == "poll":
        watcher.poll_once()
    else:
        BucketWatcher(root, store, BucketFolderSource(root), baseline={}).synchronize([SCOPE])

    assert (paths(store, "okapi"), paths(store, "zebra")) == ([], [])
    assert [(p.path, p.reason) for p in store.status(SCOPE).problems] == [
        ("doc.md", "symlink outside its scope")
    ]


def test_a_problem_seen_again_unchanged_is_not_recorded_or_logged_again(
    root: Path,
    watcher: BucketWatcher,
    store: MemoryKnowledgeStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A file with an mtime ahead of the clock is looked at by every poll (racy): its
    problem, the same each time, is logged once."""
    folder = root / SCOPE.agent / SCOPE.context
    write(folder / "doc.md", "# Doc\n\nokapi")
    sidecar = folder / "doc.md.metadata.json"
    write(sidecar, "{not json")
    pinned = time.time_ns() + 3_600 * 1_000_000_000
    os.utime(sidecar, ns=(pinned, pinned))
    with caplog.at_level("WARNING", logger="knowledge"):
        for _ in range(3):
            watcher.poll_once()
    warnings = [
        r.getMessage() for r in caplog.records if "invalid metadata sidecar" in r.getMessage()
    ]
    assert len(warnings) == 1, warnings
    assert [p.path for p in store.status(SCOPE).problems] == ["doc.md.metadata.json"]


def test_a_file_replaced_by_one_of_the_same_size_and_mtime_is_seen(
    root: Path, watcher: BucketWatcher, store: MemoryKnowledgeStore
) -> None:
    """Restoring a file from a backup (``cp -p``, ``rsync -t``, ``tar x``) or an editor
    that writes a temp file, copies the old times onto it and renames it over the
    original: the new file has the old file's mtime and, here, its size. The stamp also
    holds the inode and the change time (which no one can set), so the poll sees it."""
    folder = root / SCOPE.agent / SCOPE.context
    old = time.time_ns() - 3_600 * 1_000_000_000  # clearly older than any poll: not racy
    doc = folder / "doc.md"
    write(doc, "# Doc\n\nokapi one")
    os.utime(doc, ns=(old, old))
    watcher.poll_once()
    assert paths(store, "okapi") == ["doc.md"]

    replacement = folder / "doc.md.tmp"
    write(replacement, "# Doc\n\nzebra two")  # the same size
    os.utime(replacement, ns=(old, old))
    os.replace(replacement, doc)
    assert [(c.key, c.action) for c in watcher.poll_once()] == [
        ("ops-bot/runbooks/doc.md", "indexed")
    ]
    assert (paths(store, "zebra"), paths(store, "okapi")) == (["doc.md"], [])


def _deep_tree(top: Path, depth: int, name: str, text: str) -> None:
    """``top/d/d/.../d/name`` ``depth`` folders deep, made through folder descriptors (a
    path that long may be too long for one system call)."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        out = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, text.encode())
        os.close(out)
    finally:
        os.close(fd)


def _remove_deep_tree(top: Path, name: str) -> None:
    """Undo ``_deep_tree`` one level at a time (pytest's recursive clean-up of the
    temporary folder cannot go that deep): each step lifts the tree one level up."""
    while (top / "d" / "d").is_dir():
        os.rename(top / "d" / "d", top / "lifted")
        os.rmdir(top / "d")
        os.rename(top / "lifted", top / "d")
    (top / "d" / name).unlink(missing_ok=True)
    if (top / "d").is_dir():
        os.rmdir(top / "d")


@pytest.fixture
def deep_scope(root: Path) -> Iterator[int]:
    """A tree deeper than the recursion limit under ``SCOPE``'s folder; its depth."""
    depth = sys.getrecursionlimit() + 100
    try:
        _deep_tree(root / SCOPE.agent / SCOPE.context, depth, "deep.md", "# Deep\n\nokapi")
        yield depth
    finally:  # also after a failure: a tree left behind breaks pytest's clean-up later
        _remove_deep_tree(root / SCOPE.agent / SCOPE.context, "deep.md")


def test_a_tree_deeper_than_the_recursion_limit_stops_no_index_and_no_poll(
    root: Path, store: MemoryKnowledgeStore, deep_scope: int
) -> None:
    """A folder nested deeper than Python's recursion limit (a runaway script, an
    unpacked archive bomb) in one scope: the start-up index and every poll still index
    every scope, its own included; the deep file's path is too long to be a document
    path and is reported as such."""
    other = KnowledgeScope("ops-bot", "other")
    write(root / SCOPE.agent / SCOPE.context / "top.md", "# Top\n\nokapi")
    write(root / other.agent / other.context / "kept.md", "# Kept\n\nokapi")
    watcher = BucketWatcher(root, store, BucketFolderSource(root), poll_interval=0.05)
    watcher.synchronize([SCOPE, other])
    assert (paths(store, "okapi"), paths(store, "okapi", other)) == (["top.md"], ["kept.md"])
    assert [(p.path, p.reason.split(":")[0]) for p in store.status(SCOPE).problems] == [
        ("d/" * deep_scope + "deep.md", "path not indexed")
    ]

    write(root / SCOPE.agent / SCOPE.context / "new.md", "# New\n\nzebra")
    write(root / other.agent / other.context / "new.md", "# New\n\nzebra")
    watcher.poll_once()
    assert (paths(store, "zebra"), paths(store, "zebra", other)) == (["new.md"], ["new.md"])


def test_a_document_that_failed_in_the_start_up_index_is_retried_by_the_polls(
    root: Path, tmp_path: Path
) -> None:
    """The embedding service is down while the start-up index runs (here: it resets every
    connection): every document fails. Files that do not change afterwards must still be
    indexed once the service is back, as a failed write in a poll is retried by the next
    poll; before, they stayed out of the index until each was edited or the server
    restarted."""
    folder = root / SCOPE.agent / SCOPE.context
    old = time.time_ns() - 3_600 * 1_000_000_000  # clearly older than any poll: not racy
    for name, word in (("one.md", "okapi"), ("two.md", "zebra")):
        write(folder / name, f"# {name}\n\n{word} notes")
        os.utime(folder / name, ns=(old, old))
    down = Profile(dimensions=8, reset_requests=frozenset(range(1_000)))
    with fake_embedding_server(down) as fake:
        sdk = openai.OpenAI(base_url=fake.url + "/v1", api_key="test", max_retries=0, timeout=30)
        embedder = OpenAIEmbeddingClient(dimensions=8, client=sdk, max_retries=0)
        store = EmbeddedKnowledgeStore(tmp_path / "k.db", embedder)
        try:
            watcher = BucketWatcher(root, store, BucketFolderSource(root), poll_interval=0.05)
            result = watcher.synchronize([SCOPE])[SCOPE]
            assert ([p.path for p in result.errors], store.stored_documents(SCOPE)) == (
                ["one.md", "two.md"],
                {},
            )
            fake.profile = Profile(dimensions=8)  # the service is back
            changes = watcher.poll_once()
            assert sorted((c.key, c.action) for c in changes) == [
                ("ops-bot/runbooks/one.md", "indexed"),
                ("ops-bot/runbooks/two.md", "indexed"),
            ]
            assert sorted(store.stored_documents(SCOPE)) == ["one.md", "two.md"]
            assert store.status(SCOPE).problems == ()
            assert watcher.poll_once() == []  # settled: nothing left to retry
        finally:
            store.close()
            sdk.close()


def test_a_document_that_failed_in_a_poll_is_retried_by_the_next_one(
    root: Path, tmp_path: Path
) -> None:
    """The embedding service is down when a poll finds a new file: the file fails, and the
    next poll indexes it once the service is back, though the file did not change."""
    folder = root / SCOPE.agent / SCOPE.context
    folder.mkdir(parents=True)
    with fake_embedding_server(Profile(dimensions=8)) as fake:
        sdk = openai.OpenAI(base_url=fake.url + "/v1", api_key="test", max_retries=0, timeout=30)
        embedder = OpenAIEmbeddingClient(dimensions=8, client=sdk, max_retries=0)
        store = EmbeddedKnowledgeStore(tmp_path / "k.db", embedder)
        try:
            watcher = BucketWatcher(root, store, BucketFolderSource(root), poll_interval=0.05)
            watcher.synchronize([SCOPE])
            fake.profile = Profile(dimensions=8, reset_requests=frozenset(range(1_000)))
            write(folder / "one.md", "# One\n\nokapi notes")
            old = time.time_ns() - 3_600 * 1_000_000_000  # clearly older than any poll
            os.utime(folder / "one.md", ns=(old, old))
            assert [(c.key, c.action) for c in watcher.poll_once()] == [
                ("ops-bot/runbooks/one.md", "failed")
            ]
            fake.profile = Profile(dimensions=8)  # the service is back
            assert [(c.key, c.action) for c in watcher.poll_once()] == [
                ("ops-bot/runbooks/one.md", "indexed")
            ]
            assert list(store.stored_documents(SCOPE)) == ["one.md"]
            assert watcher.poll_once() == []  # settled: nothing left to retry
        finally:
            store.close()
            sdk.close()


def test_a_served_folder_that_vanishes_empties_nothing(
    root: Path, watcher: BucketWatcher, store: MemoryKnowledgeStore, tmp_path: Path
) -> None:
    """The whole folder being served goes away (a network share or a drive unmounted, the
    folder moved): that is not every document deleted. The index keeps what it had, the
    status says why, and once the folder is back the polls go on as before."""
    write(root / SCOPE.agent / SCOPE.context / "doc.md", "# Doc\n\nokapi")
    watcher.synchronize([SCOPE])
    assert paths(store, "okapi") == ["doc.md"]
    root.rename(tmp_path / "elsewhere")
    watcher.poll_once()
    watcher.poll_once()
    assert paths(store, "okapi") == ["doc.md"]
    assert [p.path for p in store.status(SCOPE).problems] == ["."]
    (tmp_path / "elsewhere").rename(root)
    write(root / SCOPE.agent / SCOPE.context / "new.md", "# New\n\nokapi")
    watcher.poll_once()
    assert paths(store, "okapi") == ["doc.md", "new.md"]
    assert store.status(SCOPE).problems == ()


def test_the_synonyms_file_is_stored_as_the_scopes_synonyms(
    root: Path, watcher: BucketWatcher, store: MemoryKnowledgeStore
) -> None:
    """``_synonyms.txt`` is config (ranking.synonym_expansion): a change is stored with the scope,
    a bad one is a status problem until fixed (the last good set stays), a delete drops it.
    (``min_score`` 0: a hit through a synonym alone covers part of the query, whatever
    the default floor.)"""
    folder = root / "ops-bot" / "runbooks"
    write(folder / "kube.md", "# Cluster\n\nkubernetes upgrade notes\n")
    watcher.poll_once()
    assert paths(store, "k8s") == []
    synonyms = folder / "_synonyms.txt"
    write(synonyms, "k8s, kubernetes\n")
    assert [(c.key, c.action) for c in watcher.poll_once()] == [
        ("ops-bot/runbooks/_synonyms.txt", "indexed")
    ]
    assert paths(store, "k8s") == ["kube.md"]
    write(synonyms, "k8s => kubernetes => pods\n", bump=1_000_000_000)
    assert [c.action for c in watcher.poll_once()] == ["failed"]
    assert "_synonyms.txt" in {p.path for p in store.status(SCOPE).problems}
    assert paths(store, "k8s") == ["kube.md"]
    # Another file's change keeps the synonyms file's problem (it is still bad).
    write(folder / "other.md", "# Other\n\nnothing here\n")
    watcher.poll_once()
    assert "_synonyms.txt" in {p.path for p in store.status(SCOPE).problems}
    synonyms.unlink()
    assert [(c.key, c.action) for c in watcher.poll_once()] == [
        ("ops-bot/runbooks/_synonyms.txt", "deleted")
    ]
    assert paths(store, "k8s") == []
    assert store.status(SCOPE).problems == ()
    assert sorted(store.stored_documents(SCOPE)) == ["kube.md", "other.md"]


@pytest.mark.parametrize("kind", ["memory", "embedded"])
def test_an_edit_that_cannot_be_indexed_keeps_the_previous_version_searchable(
    root: Path, tmp_path: Path, kind: str
) -> None:
    """A failed write never removes what was searchable before: the watcher's edit that
    breaks the file is a problem, the old text stays found (``stale``) until a good
    version replaces it; the file's delete removes it."""
    import document_files as files

    root.mkdir()
    store = (
        MemoryKnowledgeStore() if kind == "memory" else EmbeddedKnowledgeStore(tmp_path / "k.db")
    )
    watcher = BucketWatcher(root, store, BucketFolderSource(root), poll_interval=0.05)
    doc = root / "ops-bot" / "runbooks" / "guide.pdf"
    doc.parent.mkdir(parents=True)
    doc.write_bytes(files.pdf(["zebra escalation"]))
    watcher.poll_once()
    assert paths(store, "zebra") == ["guide.pdf"]

    doc.write_bytes(files.pdf(["okapi"], password="pw"))
    os.utime(doc, ns=(doc.stat().st_atime_ns, doc.stat().st_mtime_ns + 1_000_000_000))
    watcher.poll_once()
    assert paths(store, "zebra") == ["guide.pdf"]
    (problem,) = store.status(SCOPE).problems
    assert problem.reason.startswith("encrypted PDF; this version is not indexed")
    record = store.get_document(SCOPE, "guide.pdf")
    assert record is not None
    assert record.stale

    doc.write_bytes(files.pdf(["okapi escalation"]))
    os.utime(doc, ns=(doc.stat().st_atime_ns, doc.stat().st_mtime_ns + 2_000_000_000))
    watcher.poll_once()
    assert paths(store, "okapi") == ["guide.pdf"]
    assert paths(store, "zebra") == []
    assert store.status(SCOPE).problems == ()

    doc.write_bytes(b"%PDF-1.4 broken")
    os.utime(doc, ns=(doc.stat().st_atime_ns, doc.stat().st_mtime_ns + 3_000_000_000))
    watcher.poll_once()
    assert paths(store, "okapi") == ["guide.pdf"]
    doc.unlink()
    assert [c.action for c in watcher.poll_once()] == ["deleted"]
    assert paths(store, "okapi") == []
    assert store.get_document(SCOPE, "guide.pdf") is None
    store.close()
