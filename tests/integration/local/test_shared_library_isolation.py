"""Term statistics of a search over the scope set (``knowledge.core.scope_set``) are no side
channel between agents where the store isolates agents (memory; embedded
``isolation="agent"``; OpenSearch ``index_per_agent``): with its shared library included,
agent A's scores depend neither on agent B's documents, nor on a shared library A is not
granted, nor, for the library's hits, on A's own corpus or on another granted library.
The same probes are sensitive: with shared statistics (the embedded store's default,
OpenSearch's one shared index) they tell. The probes read the ranking scores
(``rank_score``); the absolute scores (``knowledge.ranking.relevance``) weigh the terms
over the searched scopes alone, so they tell nothing in any store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opensearch_index import NodeIndex

from knowledge.agent_tools.shared import SharedLibraryStore
from knowledge.core.model import SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import SHARED_CONTEXT_KEY
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import upsert_document
from knowledge.ranking import explain
from knowledge.stores.embedded import EmbeddedKnowledgeStore
from knowledge.stores.memory import MemoryKnowledgeStore
from knowledge.stores.opensearch import OpenSearchKnowledgeStore
from knowledge.stores.protocol import KnowledgeStore

pytestmark = pytest.mark.integration

PROBER = KnowledgeScope("agent-a", "notes")
VICTIM = KnowledgeScope("agent-b", "secrets")
LIBRARY = KnowledgeScope("_shared", "playbooks")
NOT_GRANTED = KnowledgeScope("_shared", "secret-plans")
SECOND = KnowledgeScope("_shared", "policies")
KINDS = ["memory", "embedded-agent", "embedded-shared", "opensearch-agent", "opensearch-shared"]
ISOLATED = {"memory", "embedded-agent", "opensearch-agent"}
STORES = [
    pytest.param(k, marks=(pytest.mark.opensearch,) if k.startswith("opensearch") else ())
    for k in KINDS
]


def document(path: str, text: str) -> SourceDocument:
    data = text.encode()
    return SourceDocument(path=path, size=len(data), read=lambda: data)


@pytest.fixture
def make_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[str], KnowledgeStore]]:
    made: list[KnowledgeStore] = []

    def make(kind: str) -> KnowledgeStore:
        store: KnowledgeStore
        if kind == "memory":
            store = MemoryKnowledgeStore()
        elif kind.startswith("embedded"):
            isolation = kind.split("-")[1]
            store = EmbeddedKnowledgeStore(
                tmp_path / f"{len(made)}.db", embedder=HashingEmbedder(64), isolation=isolation
            )
        else:
            node = NodeIndex(request.getfixturevalue("opensearch_url"))
            request.addfinalizer(node.delete)
            # each write waits for a refresh: a short interval keeps 26 writes quick
            config = node.config(index_per_agent=kind.endswith("agent"), refresh_interval="20ms")
            store = OpenSearchKnowledgeStore(config, embedder=HashingEmbedder(64))
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def probe(
    store: KnowledgeStore,
    libraries: tuple[KnowledgeScope, ...] = (LIBRARY,),
    *,
    absolute: bool = False,
) -> dict[str, float]:
    """agent-a's keyword ranking scores (``rank_score``: BM25, divided by the best) for
    "marmot tapir" over its notes and its libraries, every candidate (``min_score`` 0);
    with ``absolute``, their absolute scores instead."""
    searched = SharedLibraryStore(store, libraries)
    query = SearchQuery("marmot tapir", mode=SearchMode.KEYWORD, max_results=50, min_score=0.0)
    hits = searched.search(PROBER, query)
    named = {h.metadata.get(SHARED_CONTEXT_KEY) for h in hits}
    assert named == {None, *(library.key for library in libraries)}
    if absolute:
        return {h.document_path: round(h.score, 6) for h in hits}
    return {h.document_path: round(h.rank_score or 0.0, 6) for h in hits}


def parts(
    store: KnowledgeStore, libraries: tuple[KnowledgeScope, ...] = (LIBRARY,)
) -> dict[str, tuple[float, float]]:
    """The same search's two keyword parts per document, from the trace: each hit's own
    score and its page's (``knowledge.ranking.page_signal``), each over the statistics
    of its own side."""
    searched = SharedLibraryStore(store, libraries)
    query = SearchQuery("marmot tapir", mode=SearchMode.KEYWORD, max_results=50, min_score=0.0)
    with explain.explaining() as trace:
        hits = searched.search(PROBER, query)
    entries = trace.to_dict(hits)["results"]
    return {
        h.document_path: (e["keyword"]["chunk"], e["keyword"]["page"])
        for h, e in zip(hits, entries, strict=True)
    }


def fill(store: KnowledgeStore) -> None:
    for path, text in {
        "m.md": "# M\n\nmarmot",
        "t.md": "# T\n\ntapir",
        "x.md": "# X\n\nnone",
    }.items():
        assert upsert_document(store, PROBER, document(path, text)).ok
    for path, text in {
        "lib-m.md": "# Playbook\n\nmarmot marmot drill",
        "lib-t.md": "# Playbook\n\ntapir drill",
        "lib-x.md": "# Playbook\n\nother drill",
    }.items():
        assert upsert_document(store, LIBRARY, document(path, text)).ok


@pytest.mark.parametrize("kind", STORES)
def test_another_agents_documents_change_nothing_an_agent_measures(
    make_store: Callable[[str], KnowledgeStore], kind: str
) -> None:
    store = make_store(kind)
    fill(store)
    before = probe(store)
    absolute = probe(store, absolute=True)
    for i in range(20):
        assert upsert_document(store, VICTIM, document(f"b{i}.md", "# B\n\ntapir tapir")).ok
    after = probe(store)
    if kind in ISOLATED:
        assert after == before
    else:
        assert after != before  # the probe is sensitive: shared statistics leak
    # The absolute scores weigh the terms over the searched scopes alone: they cannot
    # tell, whatever the store's statistics.
    assert probe(store, absolute=True) == absolute


@pytest.mark.parametrize("kind", STORES)
def test_the_librarys_hits_are_scored_over_the_library_alone(
    make_store: Callable[[str], KnowledgeStore], kind: str
) -> None:
    store = make_store(kind)
    fill(store)
    before = parts(store)
    # agent-a's own corpus grows with "tapir": its own scores move, the library's do not
    # relative to each other (the library keeps its own statistics), chunk and page
    # part alike. (The combined score weighs the two parts by the best of each over
    # both sides, so it is each part that the library's statistics alone make.)
    for i in range(20):
        assert upsert_document(store, PROBER, document(f"a{i}.md", "# A\n\ntapir tapir")).ok
    after = parts(store)
    # lib-m / lib-t before and after, cross-multiplied (a score may round to 0).
    kept = [before["lib-m.md"][i] * after["lib-t.md"][i] for i in (0, 1)]
    moved = [after["lib-m.md"][i] * before["lib-t.md"][i] for i in (0, 1)]
    if kind in ISOLATED:
        assert kept == pytest.approx(moved, rel=1e-4)
        assert after["m.md"] != before["m.md"]  # the caller's own scores did move
    else:
        assert kept[0] != pytest.approx(moved[0], rel=1e-4)


@pytest.mark.parametrize("kind", STORES)
def test_a_library_not_granted_changes_nothing_a_granted_agent_measures(
    make_store: Callable[[str], KnowledgeStore], kind: str
) -> None:
    store = make_store(kind)
    fill(store)
    before = probe(store)
    absolute = probe(store, absolute=True)
    # Another library (granted to someone else, or to nobody) fills up with "tapir": agent-a,
    # granted only LIBRARY, must not be able to tell (its own and its library's scores).
    for i in range(20):
        assert upsert_document(store, NOT_GRANTED, document(f"s{i}.md", "# S\n\ntapir tapir")).ok
    after = probe(store)
    assert not set(after) & {f"s{i}.md" for i in range(20)}  # never a hit of it
    if kind in ISOLATED:
        assert after == before
    else:
        assert after != before  # the probe is sensitive: shared statistics leak
    assert probe(store, absolute=True) == absolute  # a library not granted is not searched


@pytest.mark.parametrize("kind", STORES)
def test_each_granted_library_keeps_its_own_statistics(
    make_store: Callable[[str], KnowledgeStore], kind: str
) -> None:
    store = make_store(kind)
    fill(store)
    assert upsert_document(store, SECOND, document("pol-m.md", "# Policy\n\nmarmot rule")).ok
    assert upsert_document(store, SECOND, document("pol-x.md", "# Policy\n\nother rule")).ok
    before = parts(store, (LIBRARY, SECOND))
    # SECOND grows with "tapir": LIBRARY's hits keep their scores relative to each other,
    # as they would in a search granted LIBRARY alone (each library its own corpus), chunk
    # and page part alike (the combined score weighs them by the best over all sides).
    for i in range(20):
        assert upsert_document(store, SECOND, document(f"p{i}.md", "# P\n\ntapir tapir")).ok
    after = parts(store, (LIBRARY, SECOND))
    kept = [before["lib-m.md"][i] * after["lib-t.md"][i] for i in (0, 1)]
    moved = [after["lib-m.md"][i] * before["lib-t.md"][i] for i in (0, 1)]
    if kind in ISOLATED:
        assert kept == pytest.approx(moved, rel=1e-4)
    else:
        assert kept[0] != pytest.approx(moved[0], rel=1e-4)
