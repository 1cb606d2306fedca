"""The KnowledgeStore contract, run against every store (see conftest.py) and mode.

Documents are real files in a bucket-style folder (``<agent>/<context>/<path>``)
indexed through ``BucketFolderSource``, so the whole pipeline (listing, sidecars,
extraction, chunking, embedding, writing) is exercised on every backend.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from knowledge.core.errors import StoreError, UnsupportedModeError
from knowledge.core.model import (
    DEFAULT_MIN_SCORE,
    IndexOptions,
    IndexState,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import delete_document, index_source, reindex_source, upsert_document
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.stores.protocol import KnowledgeStore

A_X = KnowledgeScope("agent-a", "ctx-x")
A_Y = KnowledgeScope("agent-a", "ctx-y")
B_X = KnowledgeScope("agent-b", "ctx-x")

CORPUS = {
    "runbooks/deploy.md": (
        "# Deploy\n\nHow to deploy the payments service with a canary release. "
        "Deploy to staging first, then deploy to production."
    ),
    "runbooks/rollback.md": (
        "# Rollback\n\nIf a deploy fails, roll back: run the rollback job and page on-call."
    ),
    "runbooks/database.md": "# Database\n\nRestore the Postgres database from the nightly backup.",
    "guides/onboarding.txt": "Welcome aboard. Read the deploy runbook in your first week.",
    "guides/style.md": "# Style\n\nWrite short sentences. Prefer active voice in documents.",
    "notes/kubernetes.txt": "kubectl rollout undo reverts a deployment to the previous revision.",
}


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_scope(bucket: Path, scope: KnowledgeScope, files: dict[str, str]) -> None:
    for rel, text in files.items():
        write(bucket, f"{scope.key}/{rel}", text)


def index(store: KnowledgeStore, bucket: Path, scope: KnowledgeScope, **options: object):
    result = index_source(store, scope, BucketFolderSource(bucket), IndexOptions(**options))
    assert result.errors == (), result.errors
    return result


def search(
    store: KnowledgeStore, scope: KnowledgeScope, text: str, mode: SearchMode, **fields: object
) -> list[SearchResult]:
    fields.setdefault("max_results", 20)
    return store.search(scope, SearchQuery(text, mode=mode, **fields))


def keys(results: list[SearchResult]) -> set[str]:
    return {r.metadata["source_key"] for r in results}


def paths(results: list[SearchResult]) -> set[str]:
    return {r.document_path for r in results}


# --- the store describes itself -----------------------------------------------------------


def test_declared_modes_are_the_store_modes(store: KnowledgeStore, store_spec) -> None:
    assert store.supported_modes == store_spec.modes
    assert store.default_mode in store.supported_modes
    assert store.name == store_spec.name


def test_modes_the_store_lacks_are_refused(store: KnowledgeStore, bucket: Path) -> None:
    write_scope(bucket, A_X, CORPUS)
    index(store, bucket, A_X)
    for mode in set(SearchMode) - store.supported_modes:
        with pytest.raises(UnsupportedModeError) as info:
            search(store, A_X, "deploy", mode)
        assert info.value.field == "mode"


def test_default_mode_is_used_when_none_is_given(store: KnowledgeStore, bucket: Path) -> None:
    write_scope(bucket, A_X, CORPUS)
    index(store, bucket, A_X)
    implicit = store.search(A_X, SearchQuery("deploy canary", max_results=20))
    explicit = search(store, A_X, "deploy canary", store.default_mode)
    assert [(r.document_path, r.chunk_index) for r in implicit] == [
        (r.document_path, r.chunk_index) for r in explicit
    ]


# --- scope isolation ------------------------------------------------------------------------


def test_a_search_never_leaves_its_scope(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    same = {"guide.md": "# Guide\n\nDeployment rollback procedure for the payments service."}
    for scope in (A_X, A_Y, B_X):
        write_scope(bucket, scope, same)
        index(store, bucket, scope)

    found = search(store, A_X, "deployment rollback procedure", mode)
    assert keys(found) == {"agent-a/ctx-x/guide.md"}

    found = search(store, B_X, "deployment rollback procedure", mode)
    assert keys(found) == {"agent-b/ctx-x/guide.md"}


def test_cross_context_stays_inside_the_agent(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    same = {"guide.md": "# Guide\n\nDeployment rollback procedure for the payments service."}
    for scope in (A_X, A_Y, B_X):
        write_scope(bucket, scope, same)
        index(store, bucket, scope)

    found = search(store, A_X, "deployment rollback procedure", mode, cross_context=True)
    assert keys(found) == {"agent-a/ctx-x/guide.md", "agent-a/ctx-y/guide.md"}
    # From the other context of the same agent, the same answer.
    found = search(store, A_Y, "deployment rollback procedure", mode, cross_context=True)
    assert keys(found) == {"agent-a/ctx-x/guide.md", "agent-a/ctx-y/guide.md"}
    found = search(store, B_X, "deployment rollback procedure", mode, cross_context=True)
    assert keys(found) == {"agent-b/ctx-x/guide.md"}


def test_same_paths_in_two_scopes_are_independent_documents(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    write_scope(bucket, A_X, {"doc.md": "alpha bravo charlie"})
    write_scope(bucket, A_Y, {"doc.md": "alpha delta echo"})
    index(store, bucket, A_X)
    index(store, bucket, A_Y)
    assert delete_document(store, A_X, "doc.md") is True

    assert search(store, A_X, "alpha", mode) == []
    assert [r.content for r in search(store, A_Y, "alpha", mode)] == ["alpha delta echo"]
    assert store.status(A_Y).document_count == 1


# --- scores, min_score, max_results ---------------------------------------------------------


def test_scores_are_in_unit_range_and_sorted(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    write_scope(bucket, A_X, CORPUS)
    index(store, bucket, A_X)

    found = search(store, A_X, "deploy rollback", mode, min_score=0.0)  # every candidate
    assert found
    # The absolute scores are in [0, 1]; the list is in rank order, by rank_score.
    assert all(0.0 <= r.score <= 1.0 for r in found)
    ranks = [r.rank_score for r in found]
    assert all(s is not None and 0.0 <= s <= 1.0 for s in ranks)
    assert ranks == sorted(ranks, reverse=True)
    if mode is SearchMode.KEYWORD:
        assert ranks[0] == pytest.approx(1.0)
    for r in found:
        assert r.strength in ("strong", "partial", "weak")
        assert r.document_path in CORPUS
        assert r.content
        assert r.chunk_index >= 0
        if mode is SearchMode.KEYWORD:
            assert r.keyword_score is not None
            assert r.vector_score is None
        elif mode is SearchMode.VECTOR:
            assert r.vector_score is not None
            assert r.keyword_score is None
        else:
            assert r.keyword_score is not None
            assert r.vector_score is not None
        for side in (r.keyword_score, r.vector_score):
            assert side is None or 0.0 <= side <= 1.0


def test_min_score_drops_weaker_results(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    write_scope(bucket, A_X, CORPUS)
    index(store, bucket, A_X)
    text = "deploy rollback database"
    everything = search(store, A_X, text, mode, min_score=0.0)
    distinct = sorted({r.score for r in everything})
    assert len(distinct) >= 3, everything
    # Half-way between two absolute scores: no result sits on the boundary.
    middle = len(distinct) // 2
    threshold = (distinct[middle - 1] + distinct[middle]) / 2

    kept = search(store, A_X, text, mode, min_score=threshold)
    assert kept
    assert all(r.score >= threshold for r in kept)
    # min_score filters on the absolute score and keeps the rank order: the others of
    # the same list, in the same order, with the same scores.
    assert kept == [r for r in everything if r.score >= threshold]
    dropped = [r for r in everything if r not in kept]
    assert dropped
    assert all(r.score < threshold for r in dropped)
    ranks = [r.rank_score for r in kept]
    assert ranks == sorted(ranks, reverse=True)

    # No min_score: the default floor decides on the best candidate alone; past it, every
    # candidate follows in rank order, the weak ones too.
    assert max(r.score for r in everything) >= DEFAULT_MIN_SCORE  # the corpus answers it
    assert search(store, A_X, text, mode) == everything
    off_topic = "chocolate cake strawberries"
    assert search(store, A_X, off_topic, mode) == []
    weak = search(store, A_X, off_topic, mode, min_score=0.0)
    assert all(r.score < DEFAULT_MIN_SCORE for r in weak)
    assert search(store, A_X, "deploy", mode, min_score=1.0) == [
        r for r in search(store, A_X, "deploy", mode, min_score=0.0) if r.score >= 1.0 - 1e-9
    ]


def test_max_results_caps_the_best_results(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    files = {f"doc-{i}.md": f"# Doc {i}\n\nservice deploy notes number {i}" for i in range(8)}
    write_scope(bucket, A_X, files)
    index(store, bucket, A_X)
    everything = search(store, A_X, "service deploy notes", mode)
    assert len(everything) == 8

    top = search(store, A_X, "service deploy notes", mode, max_results=3)
    assert len(top) == 3
    assert [r.score for r in top] == pytest.approx([r.score for r in everything[:3]])
    assert len(search(store, A_X, "service deploy notes", mode, max_results=1)) == 1


def test_pages_are_slices_of_one_stable_order(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    files = {
        f"doc-{i:02}.md": f"# Doc {i}\n\nservice deploy notes {'extra ' * i}" for i in range(12)
    }
    write_scope(bucket, A_X, files)
    index(store, bucket, A_X)
    whole = search(store, A_X, "service deploy notes", mode, max_results=12)
    assert len(whole) == 12
    pages = [
        search(store, A_X, "service deploy notes", mode, max_results=4, offset=start)
        for start in (0, 4, 8)
    ]
    flat = [(r.document_path, r.chunk_index) for page in pages for r in page]
    assert flat == [(r.document_path, r.chunk_index) for r in whole]
    assert search(store, A_X, "service deploy notes", mode, max_results=4, offset=12) == []


def test_pages_under_the_per_document_cap_are_slices_of_one_order(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    # Ten documents of six chunks that all match the query the same way: the cap leaves one
    # or two chunks of each, so a page deep in the list needs many more candidates than
    # its size (paging must not end early or repeat), and every candidate ties with
    # others (ties must break the same way on every page, whatever depth was read).
    part = "kernel panic during boot"
    text = "\n\n".join(f"## Part {i}\n\n{part}, {part}" for i in range(6))
    write_scope(bucket, A_X, {f"doc-{d:02}.md": f"# Panic\n\n{text}" for d in range(10)})
    index(store, bucket, A_X)
    query = "kernel panic boot"
    for per_document, size in ((1, 1), (1, 3), (2, 4), (100, 7)):
        whole = search(
            store, A_X, query, mode, max_results=100, max_chunks_per_document=per_document
        )
        assert len(whole) >= 10 * min(per_document, 6)
        flat: list[tuple[str, int]] = []
        for start in range(0, len(whole) + size, size):
            page = search(
                store,
                A_X,
                query,
                mode,
                max_results=size,
                offset=start,
                max_chunks_per_document=per_document,
            )
            flat += [(r.document_path, r.chunk_index) for r in page]
        assert flat == [(r.document_path, r.chunk_index) for r in whole], (per_document, size)


def test_at_most_three_chunks_of_a_document_by_default(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    long_doc = "\n\n".join(f"## Part {i}\n\nkernel panic during boot, part {i}" for i in range(6))
    write_scope(bucket, A_X, {"long.md": long_doc, "short.md": "A kernel panic at boot."})
    index(store, bucket, A_X)
    results = search(store, A_X, "kernel panic boot", mode)
    from_long = [r for r in results if r.document_path == "long.md"]
    assert len(from_long) == 3
    assert "short.md" in paths(results)
    # The document's best chunks are the ones kept.
    every = search(store, A_X, "kernel panic boot", mode, max_chunks_per_document=100)
    assert len([r for r in every if r.document_path == "long.md"]) == 6
    best = [r.chunk_index for r in every if r.document_path == "long.md"][:3]
    assert [r.chunk_index for r in from_long] == best
    one = search(store, A_X, "kernel panic boot", mode, max_chunks_per_document=1)
    assert sorted(r.document_path for r in one) == ["long.md", "short.md"]


@pytest.mark.modes(SearchMode.KEYWORD)
def test_no_match_is_an_empty_list(store: KnowledgeStore, bucket: Path, mode: SearchMode) -> None:
    write_scope(bucket, A_X, CORPUS)
    index(store, bucket, A_X)
    assert search(store, A_X, "xylophone zeppelin", mode) == []
    assert search(store, A_X, "!!! ??", mode) == []


@pytest.mark.modes(SearchMode.VECTOR, SearchMode.HYBRID)
def test_nothing_relevant_is_an_empty_list_in_vector_modes_too(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    # The relevance floor (fusion.RELEVANCE_FLOORS): cosine is never 0, yet an unrelated
    # query must be able to find nothing, so that "No relevant documents" can be said.
    write_scope(bucket, A_X, CORPUS)
    index(store, bucket, A_X)
    assert search(store, A_X, "xylophone zeppelin quasar", mode) == []
    assert "runbooks/rollback.md" in paths(search(store, A_X, "rollback job", mode))


def test_a_never_indexed_scope_has_no_results(store: KnowledgeStore, mode: SearchMode) -> None:
    assert search(store, A_X, "deploy", mode) == []
    assert search(store, A_X, "deploy", mode, cross_context=True) == []


# --- filters --------------------------------------------------------------------------------


def test_file_patterns_filter_by_extension_and_folder(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    write_scope(bucket, A_X, CORPUS)
    index(store, bucket, A_X)

    txt = search(store, A_X, "deploy deployment", mode, file_patterns=("*.txt",))
    assert paths(txt) == {"guides/onboarding.txt", "notes/kubernetes.txt"}

    runbooks = search(store, A_X, "deploy", mode, file_patterns=("runbooks/*",))
    assert runbooks
    assert all(p.startswith("runbooks/") for p in paths(runbooks))
    assert "runbooks/deploy.md" in paths(runbooks)

    both = search(store, A_X, "deploy", mode, file_patterns=("runbooks/deploy.md", "*.txt"))
    assert "runbooks/deploy.md" in paths(both)
    assert paths(both) <= {"runbooks/deploy.md", "guides/onboarding.txt", "notes/kubernetes.txt"}


def test_a_globstar_means_zero_or_more_folders(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    # "**/*.md" is how models and people say "every Markdown file": it must not miss the
    # documents at the top of the scope (fnmatch alone needs a '/').
    write_scope(bucket, A_X, {**CORPUS, "deploy-notes.md": "# Deploy notes\n\nDeploy on Fridays."})
    index(store, bucket, A_X)
    everywhere = search(store, A_X, "deploy", mode, file_patterns=("**/*.md",))
    assert "deploy-notes.md" in paths(everywhere)
    assert "runbooks/deploy.md" in paths(everywhere)
    assert all(p.endswith(".md") for p in paths(everywhere))
    folder = search(store, A_X, "deploy", mode, file_patterns=("runbooks/**/*.md",))
    assert "runbooks/deploy.md" in paths(folder)
    assert all(p.startswith("runbooks/") for p in paths(folder))


def test_metadata_filter_uses_sidecar_attributes(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    docs = {
        "sre.md": "# SRE\n\nincident response runbook for the deploy pipeline",
        "dev.md": "# Dev\n\nincident response checklist for the deploy pipeline",
        "plain.md": "# Plain\n\nincident response notes for the deploy pipeline",
    }
    write_scope(bucket, A_X, docs)
    sidecars = {
        "sre.md": {"team": "sre", "tags": ["ops", "oncall"], "year": 2024},
        "dev.md": {"team": "dev", "tags": ["ops"]},
    }
    for rel, attrs in sidecars.items():
        write(bucket, f"{A_X.key}/{rel}.metadata.json", json.dumps({"metadataAttributes": attrs}))
    index(store, bucket, A_X)

    assert paths(search(store, A_X, "incident response", mode, metadata={"team": "sre"})) == {
        "sre.md"
    }
    tagged = search(store, A_X, "incident response", mode, metadata={"tags": "ops"})
    assert paths(tagged) == {"sre.md", "dev.md"}
    both = {"tags": "oncall", "year": "2024"}
    assert paths(search(store, A_X, "incident response", mode, metadata=both)) == {"sre.md"}
    nobody = {"team": "sre", "tags": "missing"}
    assert search(store, A_X, "incident response", mode, metadata=nobody) == []

    meta = search(store, A_X, "incident response", mode, metadata={"team": "sre"})[0].metadata
    assert meta["team"] == "sre"
    assert list(meta["tags"]) == ["ops", "oncall"]
    assert meta["source_key"] == f"{A_X.key}/sre.md"
    assert meta["content_type"] == "text/markdown"
    assert meta["title"] == "SRE"
    assert list(meta["heading_path"]) == ["SRE"]


# --- writes: overwrite, delete, empty, unchanged, removed, reindex, versions ---------------

FIVE_SECTIONS = "\n\n".join(
    f"## Section {i}\n\n" + f"alpha{i} marker text for section {i}. " * 12 for i in range(5)
)


def test_overwrite_leaves_no_stale_chunks(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    write_scope(bucket, A_X, {"doc.md": FIVE_SECTIONS})
    index(store, bucket, A_X)
    assert store.status(A_X).chunk_count == 5
    every = search(store, A_X, "marker text section", mode, max_chunks_per_document=5)
    assert {r.chunk_index for r in every} == set(range(5))

    write_scope(bucket, A_X, {"doc.md": "## Section 0\n\nalpha0 marker text, short now."})
    result = index(store, bucket, A_X)
    assert (result.indexed_documents, result.indexed_chunks) == (1, 1)

    status = store.status(A_X)
    assert (status.document_count, status.chunk_count) == (1, 1)
    found = search(store, A_X, "marker text section alpha3", mode)
    assert [(r.document_path, r.chunk_index) for r in found] == [("doc.md", 0)]
    assert found[0].content == "## Section 0\n\nalpha0 marker text, short now."


def test_delete_removes_every_chunk(store: KnowledgeStore, bucket: Path, mode: SearchMode) -> None:
    write_scope(bucket, A_X, {"doc.md": FIVE_SECTIONS, "other.md": "# Other\n\nmarker text"})
    index(store, bucket, A_X)

    assert delete_document(store, A_X, "doc.md") is True
    assert paths(search(store, A_X, "marker text section", mode)) == {"other.md"}
    status = store.status(A_X)
    assert (status.document_count, status.chunk_count) == (1, 1)
    assert delete_document(store, A_X, "doc.md") is False
    assert delete_document(store, A_X, "never-there.md") is False


def test_empty_document_is_a_no_text_problem(store: KnowledgeStore, bucket: Path) -> None:
    # Round 8: as an empty DOCX is (it was "indexed" with 0 chunks, found by nothing).
    write_scope(bucket, A_X, {"empty.md": "", "blank.txt": "  \n\n  "})
    result = index(store, bucket, A_X)
    assert (result.indexed_documents, result.indexed_chunks) == (0, 0)
    assert {p.path: p.reason.split(":")[0] for p in result.skipped} == {
        "empty.md": "no text",
        "blank.txt": "no text",
    }
    status = store.status(A_X)
    assert (status.document_count, status.chunk_count) == (0, 0)
    assert {p.path for p in status.problems} == {"empty.md", "blank.txt"}
    for mode in store.supported_modes:
        assert search(store, A_X, "anything at all", mode) == []

    write_scope(bucket, A_X, {"full.md": "# Full\n\nsome words here"})
    index(store, bucket, A_X)
    status = store.status(A_X)
    assert (status.document_count, status.chunk_count) == (1, 1)
    assert status.state is IndexState.READY
    # Still empty: still the problem (never "indexed"); the full one is unchanged.
    again = {p.path: p.reason.split(":")[0] for p in index(store, bucket, A_X).skipped}
    assert again == {"empty.md": "no text", "blank.txt": "no text", "full.md": "unchanged"}


def test_unchanged_documents_are_skipped(store: KnowledgeStore, bucket: Path) -> None:
    write_scope(bucket, A_X, CORPUS)
    first = index(store, bucket, A_X)
    assert first.indexed_documents == len(CORPUS)
    assert first.skipped == ()

    second = index(store, bucket, A_X)
    assert (second.indexed_documents, second.indexed_chunks, second.deleted_documents) == (0, 0, 0)
    assert {(p.path, p.reason) for p in second.skipped} == {(p, "unchanged") for p in CORPUS}

    write_scope(bucket, A_X, {"runbooks/database.md": "# Database\n\nNow with MySQL too."})
    third = index(store, bucket, A_X)
    assert third.indexed_documents == 1
    assert len(third.skipped) == len(CORPUS) - 1
    status = store.status(A_X)
    assert status.document_count == len(CORPUS)


def test_sidecar_change_reindexes_the_document(store: KnowledgeStore, bucket: Path) -> None:
    write_scope(bucket, A_X, {"doc.md": "# Doc\n\nincident notes"})
    sidecar = bucket / A_X.key / "doc.md.metadata.json"
    sidecar.write_text(json.dumps({"metadataAttributes": {"team": "sre"}}), encoding="utf-8")
    index(store, bucket, A_X)
    sidecar.write_text(json.dumps({"metadataAttributes": {"team": "dev"}}), encoding="utf-8")
    assert index(store, bucket, A_X).indexed_documents == 1
    mode = store.default_mode
    assert search(store, A_X, "incident", mode, metadata={"team": "sre"}) == []
    assert paths(search(store, A_X, "incident", mode, metadata={"team": "dev"})) == {"doc.md"}


def test_documents_gone_from_the_source_are_removed(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    write_scope(bucket, A_X, CORPUS)
    index(store, bucket, A_X)
    (bucket / A_X.key / "runbooks/rollback.md").unlink()

    result = index(store, bucket, A_X)
    assert result.deleted_documents == 1
    assert "runbooks/rollback.md" not in paths(search(store, A_X, "rollback roll back", mode))
    assert store.status(A_X).document_count == len(CORPUS) - 1


def test_a_removed_scope_folder_empties_the_scope(store: KnowledgeStore, bucket: Path) -> None:
    write_scope(bucket, A_X, {"a.md": "alpha"})
    write_scope(bucket, A_Y, {"a.md": "alpha"})
    index(store, bucket, A_X)
    index(store, bucket, A_Y)
    (bucket / A_X.key / "a.md").unlink()
    (bucket / A_X.key).rmdir()

    assert index(store, bucket, A_X).deleted_documents == 1
    assert store.status(A_X).document_count == 0
    assert store.status(A_X).state is IndexState.EMPTY
    assert store.status(A_Y).document_count == 1


def test_max_documents_is_a_loud_limit_that_deletes_nothing(
    store: KnowledgeStore, bucket: Path
) -> None:
    write_scope(bucket, A_X, {"a.md": "alpha", "b.md": "bravo", "c.md": "charlie"})
    index(store, bucket, A_X)
    (bucket / A_X.key / "a.md").unlink()
    write_scope(bucket, A_X, {"d.md": "delta", "e.md": "echo"})

    result = index_source(store, A_X, BucketFolderSource(bucket), IndexOptions(max_documents=2))
    # Sorted b, c, d, e: b and c are unchanged, d and e are over the limit.
    assert result.indexed_documents == 0
    assert result.deleted_documents == 0
    assert {p.path: p.reason for p in result.skipped} == {"b.md": "unchanged", "c.md": "unchanged"}
    assert [p.path for p in result.errors] == ["d.md", "e.md"]
    assert all("max_documents" in p.reason for p in result.errors)
    assert store.status(A_X).document_count == 3

    # A capped reindex rewrites what it may and drops nothing.
    result = reindex_source(store, A_X, BucketFolderSource(bucket), IndexOptions(max_documents=2))
    assert result.deleted_documents == 0
    assert [p.path for p in result.errors] == ["d.md", "e.md"]
    assert store.status(A_X).document_count == 3


def test_reindex_rewrites_everything_and_drops_what_is_gone(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    write_scope(bucket, A_X, CORPUS)
    index(store, bucket, A_X)
    before = store.status(A_X)
    (bucket / A_X.key / "guides/style.md").unlink()

    result = reindex_source(store, A_X, BucketFolderSource(bucket), IndexOptions())
    assert result.errors == ()
    assert result.indexed_documents == len(CORPUS) - 1
    assert result.skipped == ()
    assert result.deleted_documents == 1
    after = store.status(A_X)
    assert after.document_count == len(CORPUS) - 1
    assert after.chunk_count == before.chunk_count - 1
    assert "guides/style.md" not in paths(search(store, A_X, "short sentences voice", mode))


@pytest.mark.modes(SearchMode.KEYWORD)
def test_korean_compound_matches_words_written_apart(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    write_scope(
        bucket,
        A_X,
        {
            "ko/rollback.md": "# 롤백\n\n배포 실패 시 롤백 절차를 따른다.",
            "ko/monitoring.md": "# 모니터링\n\n대시보드에서 지표를 확인한다.",
            "en/deploy.md": "# Deploy\n\ndeployment failure handling",
        },
    )
    index(store, bucket, A_X)
    found = search(store, A_X, "배포실패", mode)
    assert found
    assert found[0].document_path == "ko/rollback.md"
    assert paths(found) == {"ko/rollback.md"}


@pytest.mark.modes(SearchMode.KEYWORD)
def test_korean_words_match_by_morpheme_not_by_a_bigram_of_another_word(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    # Bigrams of "데비안은" include "안은", which "상자 안은" also has; its morphemes
    # (데비안 + a particle) do not. Inflected forms meet at their stem (설치).
    write_scope(
        bucket,
        A_X,
        {
            "ko/debian.md": "# 소개\n\n데비안 패키지를 설치했습니다.",
            "ko/box.md": "# 상자\n\n상자 안은 조용하다.",
        },
    )
    index(store, bucket, A_X)
    assert paths(search(store, A_X, "데비안은", mode)) == {"ko/debian.md"}
    assert paths(search(store, A_X, "패키지 설치하는 법", mode)) == {"ko/debian.md"}


# --- title and heading context on the keyword side (knowledge.ranking.headings) ------------------

PAYMENTS = (
    "# Payments\n\n## Refunds\n\nMoney goes back to the card within five days.\n\n"
    "## Disputes\n\nA chargeback is answered with the receipt."
)


@pytest.mark.modes(SearchMode.KEYWORD)
def test_a_chunk_is_found_by_the_title_and_headings_above_it(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    # The Disputes section never says "payments": its document title does. Its chunk
    # matches both words of the question, so it ranks above the other document's chunk,
    # which has only "chargeback".
    write_scope(
        bucket,
        A_X,
        {
            "finance/payments.md": PAYMENTS,
            "shop/receipts.md": "# Shop\n\nKeep the receipt of every chargeback in the shop.",
        },
    )
    index(store, bucket, A_X)
    found = search(store, A_X, "payments chargeback", mode)
    ranked = [(r.document_path, r.chunk_index) for r in found]
    assert ranked.index(("finance/payments.md", 2)) < ranked.index(("shop/receipts.md", 0))
    assert {r.chunk_index for r in found if r.document_path == "finance/payments.md"} == {
        0,
        1,
        2,
    }
    # What is returned is the chunk's own text, never its title or headings.
    disputes = next(r for r in found if r.chunk_index == 2)
    assert disputes.content == "## Disputes\n\nA chargeback is answered with the receipt."


@pytest.mark.modes(SearchMode.KEYWORD)
@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("# 배포 안내\n\n## 롤백\n\n실패하면 이전 버전으로 되돌린다.", "배포했다"),
        ("# 配置手順\n\n## ロールバック\n\n前の版に戻す。", "配置"),
    ],
    ids=["korean", "japanese"],
)
def test_cjk_headings_are_analysed_as_the_text_is(
    store: KnowledgeStore, bucket: Path, mode: SearchMode, text: str, query: str
) -> None:
    # Korean morphemes (배포했다 -> 배포) and Han/Kana bigrams, in the headings as in the text.
    write_scope(bucket, A_X, {"cjk/guide.md": text, "cjk/other.md": "# 其他\n\n無関係な文章。"})
    index(store, bucket, A_X)
    found = search(store, A_X, query, mode)
    assert {(r.document_path, r.chunk_index) for r in found} == {
        ("cjk/guide.md", 0),
        ("cjk/guide.md", 1),
    }


def _document(path: str, text: str, version: str | None) -> SourceDocument:
    data = text.encode("utf-8")
    return SourceDocument(path=path, size=len(data), read=lambda: data, version=version)


def test_upsert_respects_version_order(store: KnowledgeStore) -> None:
    mode = store.default_mode
    newer = upsert_document(store, A_X, _document("doc.md", "newer zulu text", "00000000000000B0"))
    assert (newer.indexed_documents, newer.errors) == (1, ())

    older = upsert_document(
        store, A_X, _document("doc.md", "older yankee text", "000000000000000A")
    )
    assert older.indexed_documents == 0
    assert [p.reason.split(":")[0] for p in older.skipped] == ["stale version"]
    assert [r.content for r in search(store, A_X, "text", mode)] == ["newer zulu text"]

    same = upsert_document(store, A_X, _document("doc.md", "newer zulu text", "00000000000000B0"))
    assert [p.reason for p in same.skipped] == ["unchanged"]

    # A shorter sequencer is compared after right-padding with zeros: "C" > "00..B0".
    latest = upsert_document(store, A_X, _document("doc.md", "latest xray text", "C"))
    assert latest.indexed_documents == 1
    assert [r.content for r in search(store, A_X, "text", mode)] == ["latest xray text"]

    assert delete_document(store, A_X, "doc.md", version="00000000000000B0") is False
    assert store.status(A_X).document_count == 1
    assert delete_document(store, A_X, "doc.md", version="D0") is True
    assert store.status(A_X).document_count == 0


def test_upsert_then_index_agree_on_unchanged(store: KnowledgeStore, bucket: Path) -> None:
    write_scope(bucket, A_X, {"doc.md": "# Doc\n\nsame bytes"})
    data = (bucket / A_X.key / "doc.md").read_bytes()
    upsert_document(
        store,
        A_X,
        SourceDocument("doc.md", len(data), lambda: data, source_key=f"{A_X.key}/doc.md"),
    )
    assert [p.reason for p in index(store, bucket, A_X).skipped] == ["unchanged"]


# --- status and lifecycle -------------------------------------------------------------------


def test_status_counts_documents_and_chunks(store: KnowledgeStore, bucket: Path) -> None:
    empty = store.status(A_X)
    assert (empty.document_count, empty.chunk_count) == (0, 0)
    assert empty.last_indexed_at is None
    assert empty.state is IndexState.EMPTY

    write_scope(bucket, A_X, CORPUS | {"big.md": FIVE_SECTIONS})
    result = index(store, bucket, A_X)
    status = store.status(A_X)
    assert status.document_count == len(CORPUS) + 1
    assert status.chunk_count == result.indexed_chunks == len(CORPUS) + 5
    assert status.state is IndexState.READY
    assert isinstance(status.last_indexed_at, datetime)
    assert status.last_indexed_at.tzinfo is not None
    # Other scopes are untouched.
    assert store.status(A_Y).document_count == 0
    assert store.status(B_X).state is IndexState.EMPTY


def test_close_is_idempotent_and_final(store: KnowledgeStore, bucket: Path) -> None:
    write_scope(bucket, A_X, {"doc.md": "# Doc\n\nhelm rollback\n"})
    index(store, bucket, A_X)
    assert store.search(A_X, SearchQuery("helm"))  # open: it answers
    store.close()
    store.close()  # a second close is harmless
    # closed means closed: nothing is answered from a released store
    with pytest.raises(StoreError):
        store.search(A_X, SearchQuery("helm"))


def test_list_scopes_names_every_scope_with_documents(store: KnowledgeStore, bucket: Path) -> None:
    assert store.list_scopes() == []
    for scope in (B_X, A_Y, A_X):
        write_scope(bucket, scope, {"doc.md": "# Doc\n\nsome text"})
        index(store, bucket, scope)
    empty = KnowledgeScope("agent-c", "nothing")
    (bucket / empty.key).mkdir(parents=True)
    index(store, bucket, empty)  # a scope without documents is not listed
    assert store.list_scopes() == [A_X, A_Y, B_X]
    for doc in (bucket / A_Y.key).iterdir():
        doc.unlink()
    index(store, bucket, A_Y)  # emptied: no longer listed
    assert store.list_scopes() == [A_X, B_X]
