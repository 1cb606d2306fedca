"""No silent cap (issue 9, item 1): a scope of 5,000 files is indexed whole on a fresh
start, and a reindex of it deletes nothing. Keyword-only, tiny files: a few seconds."""

from __future__ import annotations

from pathlib import Path

from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source, reindex_source
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.stores.embedded import EmbeddedKnowledgeStore

SCOPE = KnowledgeScope("big-agent", "archive")
FILES = 5000


def test_a_scope_of_5000_files_is_indexed_whole_and_reindex_deletes_nothing(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "bucket" / SCOPE.agent / SCOPE.context
    folder.mkdir(parents=True)
    for n in range(FILES):
        (folder / f"note{n:04d}.md").write_text(f"entry{n} filed\n", encoding="utf-8")
    source = BucketFolderSource(tmp_path / "bucket")
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db")  # keyword only
    try:
        first = index_source(store, SCOPE, source)
        assert (first.indexed_documents, first.skipped, first.errors) == (FILES, (), ())
        assert store.status(SCOPE).document_count == FILES
        last = store.search(SCOPE, SearchQuery(f"entry{FILES - 1}", mode="keyword"))
        assert [r.document_path for r in last] == [f"note{FILES - 1:04d}.md"]

        again = reindex_source(store, SCOPE, source)
        assert (again.indexed_documents, again.deleted_documents) == (FILES, 0)
        assert again.errors == ()
        assert store.status(SCOPE).document_count == FILES
    finally:
        store.close()
