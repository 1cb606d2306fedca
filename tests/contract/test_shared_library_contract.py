"""The shared library on every store and mode: a granted agent's search covers its
library scopes (hits origin ``shared``, named by ``metadata.shared_library``), an agent
without a grant never sees them, an origin filter and paging apply to the merged list.
Also on the isolated stores (``isolated_stores``: per-agent FTS tables, an index per agent
and per library), where each library is searched in a table or index of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.agent_tools.shared import SHARED_CONTEXT_KEY, SharedGrants, SharedLibraryStore
from knowledge.core.errors import ValidationError
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.stores.protocol import KnowledgeStore

pytestmark = pytest.mark.isolated_stores

OPS = KnowledgeScope("ops-bot", "runbooks")
SUPPORT = KnowledgeScope("support-bot", "faq")
LIBRARY = KnowledgeScope("_shared", "playbooks")
OTHER_LIBRARY = KnowledgeScope("_shared", "secret")


def library_bucket(bucket: Path, store: KnowledgeStore) -> None:
    for scope, name, text in (
        (LIBRARY, "incident.md", "# Incident\n\nThe wombat incident playbook."),
        (LIBRARY, "pager.md", "# Pager\n\nWombat pager escalation."),
        (OTHER_LIBRARY, "x.md", "# Secret\n\nWombat secret, never granted."),
        (OPS, "deploy.md", "# Deploy\n\nWombat deploy steps."),
        (SUPPORT, "faq.md", "# FAQ\n\nWombat refunds."),
    ):
        folder = bucket / scope.agent / scope.context
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, "utf-8")
    for scope in (LIBRARY, OTHER_LIBRARY, OPS, SUPPORT):
        result = index_source(store, scope, BucketFolderSource(bucket), IndexOptions())
        assert result.errors == ()


def found(
    store: KnowledgeStore, agent: str, mode: SearchMode, **fields: object
) -> list[tuple[str, str | None, object]]:
    grants = SharedGrants.parse("ops-bot=playbooks")
    scope = OPS if agent == "ops-bot" else SUPPORT
    searched = SharedLibraryStore(store, grants.scopes_of(agent))
    query = SearchQuery("wombat", mode=mode, **{"max_results": 10, **fields})  # type: ignore[arg-type]
    return [
        (hit.document_path, hit.origin, hit.metadata.get(SHARED_CONTEXT_KEY))
        for hit in searched.search(scope, query)
    ]


def test_granted_and_not_granted(store: KnowledgeStore, bucket: Path, mode: SearchMode) -> None:
    library_bucket(bucket, store)
    granted = found(store, "ops-bot", mode)
    assert sorted(granted) == [
        ("deploy.md", "upload", None),
        ("incident.md", "shared", "_shared/playbooks"),
        ("pager.md", "shared", "_shared/playbooks"),
    ]
    assert found(store, "support-bot", mode) == [("faq.md", "upload", None)]
    shared_only = {"field": "origin", "op": "eq", "value": "shared"}
    assert {path for path, *_ in found(store, "ops-bot", mode, filter=shared_only)} == {
        "incident.md",
        "pager.md",
    }
    assert found(store, "support-bot", mode, filter=shared_only) == []
    first = found(store, "ops-bot", mode, max_results=1)
    rest = found(store, "ops-bot", mode, max_results=2, offset=1)
    assert first + rest == found(store, "ops-bot", mode, max_results=3)


# --- one store query over the scope set (knowledge.core.scope_set) ----------------------------

RUNBOOKS = {
    "deploy.md": "# Deploy\n\nHow to deploy the gateway. Rollback with helm if the deploy fails.",
    "alerts.md": "# Alerts\n\nThe gateway alert fires on errors; page the on-call.",
    "db.md": "# Database\n\nRestore the database from the nightly backup.",
}
PLAYBOOKS = {
    "incident.md": "# Incident\n\nIncident playbook: page the incident commander, gateway first.",
    "rollback.md": "# Rollback\n\nRollback playbook: rollback with helm, then the gateway.",
    "comms.md": "# Comms\n\nStatus page updates during an incident.",
}


def rich_bucket(bucket: Path, store: KnowledgeStore) -> None:
    """Three runbooks of ops-bot (two contexts), three playbooks, a library not granted,
    and support-bot's documents."""
    files = [
        *((OPS, name, text) for name, text in RUNBOOKS.items()),
        (KnowledgeScope("ops-bot", "notes"), "gateway.md", "# Notes\n\ngateway rollback notes"),
        *((LIBRARY, name, text) for name, text in PLAYBOOKS.items()),
        (OTHER_LIBRARY, "secret.md", "# Secret\n\ngateway rollback incident secret"),
        (SUPPORT, "refunds.md", "# Refunds\n\ngateway rollback of a charge"),
    ]
    for scope, name, text in files:
        folder = bucket / scope.agent / scope.context
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, "utf-8")
    for scope in {scope for scope, _, _ in files}:
        assert index_source(store, scope, BucketFolderSource(bucket), IndexOptions()).errors == ()


def ranked(
    store: KnowledgeStore,
    text: str,
    mode: SearchMode,
    *,
    scope: KnowledgeScope = OPS,
    include_shared: bool | None = None,
    **fields: object,
) -> list[tuple[str, str | None, float]]:
    """Each hit's path, library and ``rank_score``, every candidate (``min_score`` 0 unless
    given): the ranking is the subject."""
    searched = SharedLibraryStore(store, (LIBRARY,))
    query = SearchQuery(text, mode=mode, **{"max_results": 20, "min_score": 0.0, **fields})  # type: ignore[arg-type]
    hits = searched.search(scope, query, include_shared=include_shared)
    assert all(0.0 <= hit.score <= 1.0 for hit in hits)
    return [
        (hit.document_path, hit.metadata.get(SHARED_CONTEXT_KEY), hit.rank_score or 0.0)
        for hit in hits
    ]


@pytest.mark.modes(SearchMode.KEYWORD)
def test_one_ranking_is_normalised_once(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    rich_bucket(bucket, store)
    both = ranked(store, "incident commander gateway", mode)
    assert {lib for _, lib, _ in both} == {None, LIBRARY.key}
    # One normalisation over the union: one best hit, not one per scope (N searches gave
    # each side its own 1.0).
    assert [path for path, _, score in both if score == pytest.approx(1.0)] == ["incident.md"]
    assert all(0.0 <= score <= 1.0 for *_, score in both)
    assert [s for *_, s in both] == sorted((s for *_, s in both), reverse=True)


@pytest.mark.modes(SearchMode.KEYWORD)
def test_the_callers_scores_keep_their_own_statistics(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    rich_bucket(bucket, store)
    alone = {p: s for p, _, s in ranked(store, "gateway rollback", mode, include_shared=False)}
    both = ranked(store, "gateway rollback", mode)
    mine = {p: s for p, lib, s in both if lib is None}
    assert set(mine) == set(alone) == {"deploy.md", "alerts.md"}
    # The library changes only the common divisor: the caller's raw scores are the same.
    ratios = {round(mine[p] / alone[p], 6) for p in alone}
    assert len(ratios) == 1, (mine, alone)


def test_pages_are_slices_of_one_order(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    rich_bucket(bucket, store)
    shared_only = {"field": "origin", "op": "eq", "value": "shared"}
    for fields in (
        {},
        {"filter": shared_only},
        {"filter": {"not": shared_only}},
        {"file_patterns": ("*.md",)},
        {"max_chunks_per_document": 1},
        {"cross_context": True},
    ):
        everything = ranked(store, "gateway rollback incident", mode, max_results=8, **fields)
        assert everything, fields
        assert all(0.0 <= score <= 1.0 for *_, score in everything)
        pages: list[tuple[str, str | None, float]] = []
        for offset in range(0, 8, 3):
            pages += ranked(
                store, "gateway rollback incident", mode, max_results=3, offset=offset, **fields
            )
        assert [p[:2] for p in pages][: len(everything)] == [e[:2] for e in everything], fields
        libraries = {lib for _, lib, _ in everything}
        assert libraries <= {None, LIBRARY.key}, fields  # never the library not granted
        if "filter" in fields:
            assert len(libraries) == 1, fields


def test_agent_wide_search_covers_every_own_context_and_the_library(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    rich_bucket(bucket, store)
    found = {(p, lib) for p, lib, _ in ranked(store, "gateway rollback", mode, cross_context=True)}
    assert ("gateway.md", None) in found  # ops-bot/notes
    assert ("rollback.md", LIBRARY.key) in found
    assert not any(p in {"secret.md", "refunds.md"} for p, _ in found)
    one = {(p, lib) for p, lib, _ in ranked(store, "gateway rollback", mode)}
    assert ("gateway.md", None) not in one


def test_the_set_never_names_another_agents_scope(store: KnowledgeStore, bucket: Path) -> None:
    rich_bucket(bucket, store)
    for scope in (SUPPORT, KnowledgeScope("ops-bot", "notes"), KnowledgeScope("x", "_shared")):
        with pytest.raises(ValidationError) as refused:
            SearchQuery("gateway", shared_libraries=(LIBRARY, scope))
        assert refused.value.field == "shared_libraries"
    # Not granted: the library's hits are out whatever the query says.
    query = SearchQuery("gateway rollback", mode=SearchMode.KEYWORD, shared_libraries=(LIBRARY,))
    alone = SharedLibraryStore(store, ()).search(OPS, query)
    assert {hit.metadata.get(SHARED_CONTEXT_KEY) for hit in alone} == {None}
    with pytest.raises(ValidationError) as refused:
        SharedLibraryStore(store, ()).search(OPS, query, include_shared=True)
    assert refused.value.field == "include_shared"
    # support-bot with a grant of its own sees the library, never ops-bot's documents.
    theirs = ranked(store, "gateway rollback", SearchMode.KEYWORD, scope=SUPPORT)
    assert {p for p, lib, _ in theirs if lib is None} == {"refunds.md"}
