"""knowledge.local.progress: the counts an index run shares with the status route."""

from __future__ import annotations

from knowledge.core.model import IndexProgress
from knowledge.core.scope import KnowledgeScope
from knowledge.local.progress import IndexingProgress

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
