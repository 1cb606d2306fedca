"""Indexing throughput: embedded store, OpenSearch store, raw bulk.

Indexing throughput with the hashing embedder: the product into the embedded store and
into the real OpenSearch node, next to a raw ``opensearchpy.helpers.bulk`` of the same
pre-made chunks, in the same run.

Per repetition (the order of the three targets rotates, to spread drift):

- ``pipeline``: the product's own ``Indexer`` (read -> extract -> chunk -> embed) writing
  into a recorder instead of a store. Its output is the pre-made chunks of the raw bulk,
  and its time is the part of the product's time spent before any store;
- ``embedded``: ``EmbeddedKnowledgeStore.index`` into a fresh SQLite file;
- ``opensearch``: ``OpenSearchKnowledgeStore.index`` into a fresh index;
- ``raw_bulk``: create an index with the same body (``mapping.index_body``), send the
  recorder's chunks and document records (``chunk_records.chunk_document``/``document_record``,
  same ids) with ``helpers.bulk`` (same chunk size and byte limit as the store), refresh.

Both OpenSearch targets include index creation and the final refresh. A last, untimed
run of the store through ``recording_client.RecordingClient`` counts the requests it sends.
Writes ``bench/results/indexing.json``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from bench.common.environment import log, opensearch_node, write_result
from bench.common.recording_client import RecordingClient
from bench.common.stores import SCOPE, delete_index, open_store, unique_index_name
from bench.corpora.manpages import Corpus, load_corpus
from knowledge.core.identity import chunk_id
from knowledge.core.model import FileProblem, IndexOptions, IndexResult
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.chunking import MarkdownSectionChunker
from knowledge.ingest.pipeline import Indexer, index_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk, StoredDocument

__all__ = ["RecordingWriter", "add_arguments", "main"]

OPTIONS = IndexOptions(max_documents=100_000)


class _RecordingSession:
    def __init__(self, documents: list[tuple[DocumentHeader, list[EmbeddedChunk]]]) -> None:
        self._documents = documents

    def put_document(self, header: DocumentHeader, chunks: Iterable[EmbeddedChunk]) -> int:
        kept = list(chunks)
        self._documents.append((header, kept))
        return len(kept)

    def delete_document(self, path: str) -> bool:
        return False

    @property
    def failures(self) -> Sequence[FileProblem]:
        return ()

    def __enter__(self) -> _RecordingSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


class RecordingWriter:
    """An ``IndexWriter`` that keeps what the ``Indexer`` writes (an empty index each run)."""

    def __init__(self) -> None:
        self.documents: list[tuple[DocumentHeader, list[EmbeddedChunk]]] = []

    def stored_documents(self, scope: KnowledgeScope) -> dict[str, StoredDocument]:
        return {}

    def stored_document(self, scope: KnowledgeScope, path: str) -> StoredDocument | None:
        return None

    def problem_paths(self, scope: KnowledgeScope) -> set[str]:
        return set()

    def write_session(
        self, scope: KnowledgeScope, *, replace_scope: bool = False
    ) -> _RecordingSession:
        return _RecordingSession(self.documents)


def _rates(result: IndexResult, seconds: float) -> dict[str, float]:
    if result.errors:
        raise SystemExit(f"indexing failed: {result.errors[:3]}")
    return {
        "seconds": round(seconds, 3),
        "documents": result.indexed_documents,
        "chunks": result.indexed_chunks,
        "documents_per_s": round(result.indexed_documents / seconds, 2),
        "chunks_per_s": round(result.indexed_chunks / seconds, 1),
    }


def run_pipeline(corpus: Corpus) -> tuple[dict[str, float], RecordingWriter]:
    writer = RecordingWriter()
    indexer = Indexer(MarkdownSectionChunker(), HashingEmbedder())
    started = time.perf_counter()
    result = indexer.index(writer, SCOPE, LocalDirectorySource(corpus.docs_dir), OPTIONS)
    return _rates(result, time.perf_counter() - started), writer


def run_embedded(corpus: Corpus, workdir: Path) -> dict[str, float]:
    store = open_store("embedded", HashingEmbedder(), workdir=workdir)
    try:
        started = time.perf_counter()
        result = index_source(store, SCOPE, LocalDirectorySource(corpus.docs_dir), OPTIONS)
        return _rates(result, time.perf_counter() - started)
    finally:
        store.close()


def run_opensearch(corpus: Corpus, url: str, client: Any = None) -> dict[str, float]:
    name = unique_index_name("bench-indexing")
    store = open_store(
        "opensearch",
        HashingEmbedder(),
        workdir=None,
        node_url=url,
        index_name=name,
        client=client,
    )
    try:
        started = time.perf_counter()
        result = index_source(store, SCOPE, LocalDirectorySource(corpus.docs_dir), OPTIONS)
        rates = _rates(result, time.perf_counter() - started)
        rates["records_in_index"] = _count(url, name)
        return rates
    finally:
        store.close()
        delete_index(url, name)


def _bulk_actions(
    index: str, documents: list[tuple[DocumentHeader, list[EmbeddedChunk]]]
) -> list[dict[str, Any]]:
    from knowledge.stores.opensearch.write.chunk_records import chunk_document, document_record

    actions: list[dict[str, Any]] = []
    for header, chunks in documents:
        for item in chunks:
            actions.append(
                {
                    "_index": index,
                    "_id": chunk_id(header.document_id, item.chunk.chunk_index),
                    "_source": chunk_document(SCOPE, header, item.chunk, vector=item.vector),
                }
            )
        actions.append(
            {
                "_index": index,
                "_id": header.document_id,
                "_source": document_record(SCOPE, header, chunk_count=len(chunks)),
            }
        )
    return actions


def run_raw_bulk(url: str, writer: RecordingWriter) -> dict[str, float]:
    from opensearchpy import OpenSearch, helpers

    from knowledge.stores.opensearch.mapping import index_body
    from knowledge.stores.opensearch.settings import OpenSearchConfig

    defaults = OpenSearchConfig(url=url)
    embedder = HashingEmbedder()
    name = unique_index_name("bench-rawbulk")
    actions = _bulk_actions(name, writer.documents)  # built before the clock starts
    client = OpenSearch(hosts=[url], timeout=120)
    try:
        started = time.perf_counter()
        client.indices.create(
            index=name,
            body=index_body(vector_dimensions=embedder.dimensions, embedding_model=embedder.name),
        )
        ok, _ = helpers.bulk(
            client,
            actions,
            chunk_size=defaults.bulk_chunk_size,
            max_chunk_bytes=defaults.bulk_max_chunk_bytes,
            raise_on_error=True,
        )
        client.indices.refresh(index=name)
        seconds = time.perf_counter() - started
    finally:
        client.close()
    documents = len(writer.documents)
    chunks = sum(len(c) for _, c in writer.documents)
    return {
        "seconds": round(seconds, 3),
        "documents": documents,
        "chunks": chunks,
        "documents_per_s": round(documents / seconds, 2),
        "chunks_per_s": round(chunks / seconds, 1),
        "records_in_index": _count(url, name, delete=True),
        "bulk_actions": ok,
    }


def _count(url: str, index: str, *, delete: bool = False) -> int:
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[url], timeout=120)
    try:
        return int(client.count(index=index)["count"])
    finally:
        if delete:
            client.indices.delete(index=index, ignore_unavailable=True)
        client.close()


def _requests_per_run(corpus: Corpus, url: str) -> dict[str, Any]:
    """Requests the store sends for one run, and the wall-clock seconds spent in each kind."""
    from opensearchpy import OpenSearch

    probe = RecordingClient(OpenSearch(hosts=[url], timeout=60))
    total = run_opensearch(corpus, url, client=probe)["seconds"]
    probe.close()
    return {
        "run_seconds": total,
        "requests": dict(sorted(probe.calls.items())),
        "seconds": {name: round(value, 2) for name, value in sorted(probe.seconds.items())},
    }


def _median(runs: list[dict[str, float]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=0, help="pages (0 = all, the default)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (median reported)")


def main(args: argparse.Namespace) -> None:
    corpus = load_corpus(args.limit or None)
    log(f"corpus {corpus.name}: {corpus.documents} documents, {corpus.total_bytes} bytes")
    runs: dict[str, list[dict[str, float]]] = {
        "pipeline": [],
        "embedded": [],
        "opensearch": [],
        "raw_bulk": [],
    }
    targets = ["embedded", "opensearch", "raw_bulk"]
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as workdir, opensearch_node() as url:
        # One untimed warm-up of each OpenSearch path (JIT, caches), then the measured runs.
        _, writer = run_pipeline(corpus)
        run_opensearch(corpus, url)
        run_raw_bulk(url, writer)
        for repetition in range(args.repeat):
            pipeline, writer = run_pipeline(corpus)
            runs["pipeline"].append(pipeline)
            order = targets[repetition % 3 :] + targets[: repetition % 3]
            for target in order:
                if target == "embedded":
                    result = run_embedded(corpus, Path(workdir))
                elif target == "opensearch":
                    result = run_opensearch(corpus, url)
                else:
                    result = run_raw_bulk(url, writer)
                runs[target].append(result)
                log(f"repetition {repetition + 1} {target}: {result}")
            del writer
        requests = _requests_per_run(corpus, url)
    medians = {
        name: {
            "seconds": _median(items, "seconds"),
            "documents_per_s": _median(items, "documents_per_s"),
            "chunks_per_s": _median(items, "chunks_per_s"),
        }
        for name, items in runs.items()
    }
    ratio = medians["opensearch"]["chunks_per_s"] / medians["raw_bulk"]["chunks_per_s"]
    per_repetition = [
        round(o["chunks_per_s"] / r["chunks_per_s"], 3)
        for o, r in zip(runs["opensearch"], runs["raw_bulk"], strict=True)
    ]
    write_result(
        "indexing",
        {
            "corpus": corpus.describe(),
            "embedder": "hashing (256 dimensions)",
            "repeat": args.repeat,
            "runs": runs,
            "medians": medians,
            "opensearch_vs_raw_bulk": {
                "ratio_of_medians": round(ratio, 3),
                "per_repetition": per_repetition,
                "target": 0.8,
            },
            "opensearch_requests_per_index_run": requests,
        },
    )
