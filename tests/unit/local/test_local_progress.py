"""knowledge.local.progress: the counts an index run shares with the status route."""

from __future__ import annotations

from knowledge.core.model import IndexProgress, IndexState, IndexStatus
from knowledge.core.scope import KnowledgeScope
from knowledge.local.progress import IndexingProgress, ScopeActivity

A = KnowledgeScope("ops", "a")
B = KnowledgeScope("ops", "b")


def test_scopes_are_pending_with_their_counts_until_finished() -> None:
    progress = IndexingProgress()
    assert (progress.running, progress.ended, progress.of(A)) == (False, False, None)
    progress.begin({A: 3, B: 2})
    assert progress.running
    assert progress.of(A) == IndexProgress(0, 3)
    progress.advance(A)
    progress.advance(A)
    assert progress.of(A) == IndexProgress(2, 3)
    assert progress.overall() == IndexProgress(2, 5)
    progress.finish_scope(A)  # documents skipped without a read count as done
    assert progress.of(A) is None
    assert progress.overall() == IndexProgress(3, 5)
    progress.advance(A)  # a finished scope no longer counts
    assert progress.overall() == IndexProgress(3, 5)
    for _ in range(5):
        progress.advance(B)
    assert progress.of(B) == IndexProgress(2, 2)  # never past the total
    progress.end()
    assert (progress.running, progress.ended, progress.of(B)) == (False, True, None)


def test_progress_serialises_for_the_status_route() -> None:
    assert IndexProgress(4, 10).to_dict() == {"documents_done": 4, "documents_total": 10}


def test_a_prepared_run_is_listing_until_it_begins_and_never_after_it_ends() -> None:
    progress = IndexingProgress()
    assert not progress.listing
    progress.prepare()
    assert (progress.listing, progress.running) == (True, True)
    progress.begin({A: 2})
    assert not progress.listing
    progress.end()
    assert (progress.listing, progress.running) == (False, False)


def test_a_run_that_fails_while_listing_is_not_listing_after_end() -> None:
    progress = IndexingProgress()
    progress.prepare()
    progress.end()
    assert (progress.listing, progress.ended) == (False, True)


def test_scope_activity_shows_the_document_being_written_and_what_waits() -> None:
    activity = ScopeActivity()
    status = IndexStatus(
        document_count=0, chunk_count=0, last_indexed_at=None, state=IndexState.EMPTY
    )
    assert activity.of(A) is None
    assert activity.status(A, status) is status
    activity.queue(A, 3)
    waiting = activity.status(A, status)
    assert waiting.state is IndexState.INDEXING
    assert waiting.progress == IndexProgress(0, 0, queued_files=3)
    activity.queue(A, 0)
    activity.begin(A, 2)
    activity.queue(A, 5)  # changes found meanwhile wait for the next job
    document = activity.document_progress(A)
    document.begin("big.md", 4000, 4000)
    for _ in range(3):
        document.chunk(500)  # an eighth of the text each
    progress = activity.of(A)
    assert progress == IndexProgress(
        0,
        2,
        document="big.md",
        document_bytes=4000,
        chunks_done=3,
        chunks_estimated=8,
        queued_files=5,
    )
    shown = activity.status(A, status)
    assert shown.message == "writing big.md: 3 of about 8 chunks; 5 more changed files queued"
    assert shown.progress is not None
    assert shown.progress.to_dict()["chunks_estimated"] == 8
    document.end()
    activity.file_done(A)
    assert activity.of(A) == IndexProgress(1, 2, queued_files=5)
    activity.end(A)
    assert activity.of(A) == IndexProgress(0, 0, queued_files=5)
    activity.queue(A, 0)
    assert activity.of(A) is None
