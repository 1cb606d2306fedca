"""What an OpenSearch write decides on: the stored document read in real time
(``records.as_of_record``) and whether a commit may replace the record as it is now
(``sender.lost_to``). Pure functions; the races they settle are run on the real node in
``tests/integration/stores/opensearch/test_opensearch_guarantees.py`` and
``tests/unit/aws/test_indexer_versions.py``.
"""

from __future__ import annotations

import pytest

from knowledge.stores.opensearch.hits import INCOMPLETE_HASH
from knowledge.stores.opensearch.read.answers import parse_stored_document
from knowledge.stores.opensearch.write.generations import Commit
from knowledge.stores.opensearch.write.records import RecordState, as_of_record
from knowledge.stores.opensearch.write.sender import lost_to
from knowledge.stores.protocol import Precondition, StoredDocument


def _record(generation: str | None, version: str | None = "0A", hash_: str = "h1") -> RecordState:
    return RecordState(
        seq_no=3,
        primary_term=1,
        version=version,
        generation=generation,
        chunk_count=2,
        content_hash=hash_,
    )


SEARCHED = StoredDocument("a.md", "h1", "0A", 2, "g1")


def test_a_search_that_shows_the_record_as_it_is_now_is_believed() -> None:
    assert as_of_record(SEARCHED, _record("g1"), "a.md") == SEARCHED
    # The record's version is the real-time one (the same here, by construction).
    incomplete = StoredDocument("a.md", INCOMPLETE_HASH, "0A", 1, "g1")
    assert as_of_record(incomplete, _record("g1"), "a.md") == incomplete


@pytest.mark.parametrize(
    ("searched", "record", "expected"),
    [
        # Written since the last refresh: the search shows nothing, or the version before.
        (None, _record("g2", "0B"), StoredDocument("a.md", INCOMPLETE_HASH, "0B", 2, "g2")),
        (SEARCHED, _record("g2", "0B"), StoredDocument("a.md", INCOMPLETE_HASH, "0B", 2, "g2")),
        # Pointed back at its generation, marked incomplete, since the last refresh.
        (
            SEARCHED,
            _record("g1", hash_=INCOMPLETE_HASH),
            StoredDocument("a.md", INCOMPLETE_HASH, "0A", 2, "g1"),
        ),
        # Removed since (or a problem-only record): nothing is indexed, chunks may be left.
        (SEARCHED, None, StoredDocument("a.md", INCOMPLETE_HASH, None, 2)),
        (SEARCHED, _record(None), StoredDocument("a.md", INCOMPLETE_HASH, None, 2)),
        (None, None, None),
    ],
)
def test_a_search_that_lags_behind_the_record_is_never_unchanged(
    searched: StoredDocument | None, record: RecordState | None, expected: StoredDocument | None
) -> None:
    assert as_of_record(searched, record, "a.md") == expected


def _commit(version: str | None, precondition: Precondition | None) -> Commit:
    return Commit("a.md", "doc", "g9", version, 1, {}, precondition)


@pytest.mark.parametrize(
    ("commit", "stored", "lost"),
    [
        # Unconditional writes (a listing run): only a newer indexed version wins.
        (_commit(None, None), _record("g1"), None),
        (_commit("09", None), _record("g1"), "stale version"),
        # Both carry a version: their order decides, whoever committed meanwhile.
        (_commit("0B", Precondition("g0")), _record("g1"), None),
        (_commit("09", Precondition("g1")), _record("g1"), "stale version"),
        # No version on one side: only while the version it was decided on is indexed.
        (_commit(None, Precondition("g1")), _record("g1"), None),
        (_commit(None, Precondition("g1")), _record("g2"), "superseded"),
        (_commit(None, Precondition(None)), _record("g2"), "superseded"),
        (_commit("0B", Precondition("g1")), _record("g2", None), "superseded"),
        (_commit("0B", Precondition("g2")), _record("g2", None), None),
        # Nothing indexed: as decided (a record removed since was there when it was).
        (_commit(None, Precondition(None)), None, None),
        (_commit(None, Precondition(None)), _record(None), None),
        (_commit(None, Precondition("g1")), None, "superseded"),
    ],
)
def test_a_commit_replaces_the_record_only_if_it_is_not_newer_than_what_was_read(
    commit: Commit, stored: RecordState | None, lost: str | None
) -> None:
    reason = lost_to(commit, stored)
    assert (None if reason is None else reason.split(":")[0]) == lost


def _stored_answer(replaces: str | None, chunk_generations: dict[str, int]) -> dict[str, object]:
    record = {"content_hash": "h2", "version": None, "chunk_count": 2, "generation": "g2"}
    if replaces is not None:
        record["replaces"] = replaces
    buckets = [{"key": g, "doc_count": n} for g, n in chunk_generations.items()]
    return {
        "aggregations": {
            "record": {"latest": {"hits": {"hits": [{"_source": record}]}}},
            "chunks": {
                "doc_count": sum(chunk_generations.values()),
                "generations": {"buckets": buckets},
            },
        }
    }


@pytest.mark.parametrize(
    ("replaces", "chunks", "content_hash"),
    [
        ("g1", {"g2": 2, "g1": 3}, INCOMPLETE_HASH),  # the replaced chunks still searchable
        ("g1", {"g2": 2}, "h2"),  # gone: the version is complete
        (None, {"g2": 2}, "h2"),  # a first write replaced nothing
        (None, {"g2": 2, "g0": 1}, "h2"),  # an orphan is not what this record replaced
    ],
)
def test_a_version_whose_replaced_chunks_are_still_searchable_is_not_unchanged(
    replaces: str | None, chunks: dict[str, int], content_hash: str
) -> None:
    # A writer that died between the record switch and the deletes of the old chunks:
    # its redelivery writes the document again (step 4 then removes the old generation)
    # instead of skipping it as unchanged with the old text still found.
    stored = parse_stored_document(_stored_answer(replaces, chunks), "a.md")
    assert stored is not None
    assert (stored.content_hash, stored.generation) == (content_hash, "g2")
