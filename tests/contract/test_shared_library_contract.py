"""The shared library on every store and mode: a granted agent's search covers its
library scopes (hits origin ``shared``, named by ``metadata.shared_library``), an agent
without a grant never sees them, an origin filter and paging apply to the merged list."""

from __future__ import annotations

from pathlib import Path

from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.local import BucketFolderSource
from knowledge.search.shared import SHARED_CONTEXT_KEY, SharedGrants, SharedLibraryStore
from knowledge.stores.protocol import KnowledgeStore

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
