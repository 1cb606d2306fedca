"""OpenSearch store: one index growing 25x over 1,000 scopes (HNSW, recall, bytes).

The OpenSearch store at scale: one shared index growing 25x over 1,000 scopes.

Synthetic Markdown (a Zipf vocabulary of pseudo-words, each scope with its own topic
words; ``SECTIONS`` sections per document, about two chunks each with the product's
chunker: ``chunks_per_document`` measures it) is indexed with
the product (``OpenSearchKnowledgeStore.index``, hashing embedder) into one index on
the real node, one ``index`` call per scope. Scope sizes are long-tailed: one big scope
holds ``--big-share`` of the chunks and the others are log-normal (median ~100 chunks at
the full 250,000). The index grows in steps (4%, 10%, 20%, 40%, 70%, 100% of
``--chunks``: 10,000 -> 250,000 at full size); the big scope grows with it (its source
lists more documents each step; the indexer skips the unchanged ones).

After each step (and a refresh, so every step searches the same data):

- ``indexing``: chunks/s of the step (the first step is the baseline);
- ``latency``: client-side p50/p95 of ``store.search`` per mode (keyword, vector,
  hybrid) for small scopes (<= 200 chunks) and the big scope, one query each, timed
  after an untimed warm-up pass;
- ``recall``: vector recall@10 of the product's knn body (``queries.vector_search_body``,
  k as the store asks for 10 results) against exact scoring of the same scope
  (``script_score`` with the k-NN plugin's ``knn_score``: brute force over the scope's
  vectors), for each ``--ef-search`` value (0: none sent), with both latencies;
- index facts: documents, deleted documents, refreshes, merge time, segments, bytes.

Then, on the full index: ``interference``: small-scope keyword and vector searches (the
product's bodies) while nothing writes, then while another tenant indexes
``--writer-chunks`` chunks from another process (p50/p95 of the same queries, client
side and the node's ``took``); and ``bytes``: ``--bytes-chunks`` chunks bulk-written into three
indexes (vectors in ``_source``; ``_source`` excluding them; the k-NN plugin's
``derived_source``), force-merged to one segment, bytes per chunk of each.

Run small first: ``nice -n 10 .venv/bin/python -m bench scale --chunks 50000``.
Writes ``bench/results/<--name>.json`` (``scale``); ``python -m bench report`` renders
it (section 9).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from opensearchpy import OpenSearch

from bench.common.environment import log, opensearch_node, write_result
from knowledge.core.model import DocumentChunk, IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.chunking import MarkdownSectionChunker
from knowledge.ingest.pipeline import index_source
from knowledge.ranking.fusion import candidate_count
from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore, request_filters
from knowledge.stores.opensearch.mapping import CHUNK_INDEX, DOCUMENT_PATH, EMBEDDING, index_body
from knowledge.stores.opensearch.read import queries
from knowledge.stores.opensearch.read.scope_size import (
    ef_search_for,
    parse_chunk_total,
    scope_chunks_body,
)
from knowledge.stores.opensearch.settings import DEFAULT_EF_SEARCH
from knowledge.stores.opensearch.write.chunk_records import chunk_document
from knowledge.stores.protocol import DocumentHeader

__all__ = ["add_arguments", "main"]

SECTIONS = 10
WORDS_PER_CHUNK = 70
VOCABULARY = 6_000
STEPS = (0.04, 0.1, 0.2, 0.4, 0.7, 1.0)
SMALL_MAX = 200
MODES = (SearchMode.KEYWORD, SearchMode.VECTOR, SearchMode.HYBRID)
OPTIONS = IndexOptions(max_documents=100_000)
_SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"] + ["ar", "en", "ol", "ix"]


class Corpus:
    """Deterministic documents: the text of (scope, document) depends only on the random seed."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        words: set[str] = set()
        while len(words) < VOCABULARY:
            n = int(rng.integers(2, 5))
            words.add("".join(_SYLLABLES[int(i)] for i in rng.integers(0, len(_SYLLABLES), n)))
        self.words = sorted(words)
        weights = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.05
        self.p = weights / weights.sum()
        self.seed = seed

    def document(self, scope_id: int, doc: int) -> str:
        rng = np.random.default_rng((self.seed, scope_id, doc))
        topic = np.random.default_rng((self.seed, scope_id)).choice(VOCABULARY, 30)
        sections = []
        for section in range(SECTIONS):
            common = rng.choice(VOCABULARY, WORDS_PER_CHUNK - 15, p=self.p)
            local = rng.choice(topic, 15)
            ids = np.concatenate([common, local])
            rng.shuffle(ids)
            text = " ".join(self.words[int(i)] for i in ids)
            sections.append(f"## Part {doc}.{section}\n\n{text}.\n")
        return f"# Document {doc} of scope {scope_id}\n\n" + "\n".join(sections)

    def query(self, scope_id: int, doc: int, rng: np.random.Generator) -> str:
        """Six words of one section of the document: what an agent might ask."""
        text = self.document(scope_id, doc)
        section = text.split("## Part ")[1 + int(rng.integers(0, SECTIONS))]
        words = section.split("\n\n", 1)[1].rstrip(".\n").split()
        return " ".join(str(w) for w in rng.choice(words, 6, replace=False))


class CorpusSource:
    """A ``DocumentSource`` listing the first ``documents`` documents of one scope."""

    def __init__(self, corpus: Corpus, scope_id: int, documents: int) -> None:
        self._corpus, self._scope_id, self._documents = corpus, scope_id, documents

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Iterator[SourceDocument]:
        for doc in range(self._documents):
            data = self._corpus.document(self._scope_id, doc).encode()
            yield SourceDocument(path=f"doc-{doc:05d}.md", size=len(data), read=lambda d=data: d)


@dataclass(frozen=True, slots=True)
class Plan:
    sizes: list[int]  # documents per scope; scope 0 is the big one
    steps: list[list[tuple[int, int]]]  # per step: (scope id, documents listed)


def chunks_per_document(corpus: Corpus) -> float:
    """Chunks the product's default chunker makes of a document, on average."""
    chunker = MarkdownSectionChunker()
    counts = [len(list(chunker.chunk("d.md", corpus.document(1, doc)))) for doc in range(20)]
    return statistics.fmean(counts)


def plan(chunks: int, scopes: int, big_share: float, seed: int, per_document: float) -> Plan:
    rng = np.random.default_rng(seed)
    total_docs = round(chunks / per_document)
    big = round(total_docs * big_share)
    raw = rng.lognormal(mean=0.0, sigma=1.0, size=scopes - 1)
    small = np.maximum(1, np.round(raw * (total_docs - big) / raw.sum())).astype(int)
    sizes = [big, *(int(s) for s in small)]
    order = [int(i) + 1 for i in rng.permutation(scopes - 1)]
    steps: list[list[tuple[int, int]]] = []
    placed, small_total = 0, sum(sizes[1:])
    for fraction in STEPS:
        step: list[tuple[int, int]] = []
        target = fraction * small_total
        while order and (placed < target or fraction == STEPS[-1]):
            scope_id = order.pop(0)
            step.append((scope_id, sizes[scope_id]))
            placed += sizes[scope_id]
        step.append((0, max(1, round(fraction * big))))
        steps.append(step)
    return Plan(sizes, steps)


def scope_of(scope_id: int) -> KnowledgeScope:
    return KnowledgeScope(f"tenant-{scope_id:04d}", "main")


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"p50": percentile(values, 0.5), "p95": percentile(values, 0.95), "n": len(values)}


def timed_ms(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return (time.perf_counter() - started) * 1000.0, result


def exact_body(vector: Sequence[float], scope: KnowledgeScope, size: int) -> dict[str, Any]:
    """Brute force over the scope: every chunk of it scored by the k-NN plugin's
    ``knn_score`` (same cosine score as the knn query)."""
    return {
        "size": size,
        "track_total_hits": False,
        "_source": {"includes": [DOCUMENT_PATH, CHUNK_INDEX]},
        "query": {
            "script_score": {
                "query": {
                    "bool": {
                        "filter": [
                            *request_filters.scope_filters(scope),
                            {"exists": {"field": EMBEDDING}},
                        ]
                    }
                },
                "script": {
                    "source": "knn_score",
                    "lang": "knn",
                    "params": {
                        "field": EMBEDDING,
                        "query_value": [float(x) for x in vector],
                        "space_type": "cosinesimil",
                    },
                },
            }
        },
    }


def _ids(response: dict[str, Any], top: int) -> list[str]:
    return [str(h["_id"]) for h in response["hits"]["hits"][:top]]


class Probe:
    """The queries of one step: small scopes and the big scope, each with its text."""

    def __init__(
        self, corpus: Corpus, indexed: dict[int, int], per_document: float, count: int, seed: int
    ) -> None:
        rng = np.random.default_rng(seed)
        small = [s for s, docs in indexed.items() if s != 0 and docs * per_document <= SMALL_MAX]
        picks = [int(x) for x in rng.choice(small, min(count, len(small)), replace=False)]
        self.groups: dict[str, list[tuple[int, str]]] = {
            "small": [(s, corpus.query(s, int(rng.integers(0, indexed[s])), rng)) for s in picks],
            "big": [
                (0, corpus.query(0, int(rng.integers(0, indexed[0])), rng)) for _ in range(count)
            ],
        }


def measure_step(
    store: OpenSearchKnowledgeStore,
    client: Any,
    index: str,
    embedder: HashingEmbedder,
    probe: Probe,
    ef_values: Sequence[int | str],
) -> dict[str, Any]:
    latency: dict[str, dict[str, dict[str, float]]] = {}
    recall: dict[str, dict[str, Any]] = {}
    k = max(2 * 10, candidate_count(10))
    for group, items in probe.groups.items():
        latency[group] = {}
        for mode in MODES:
            run = [
                SearchQuery(text=text, mode=mode, max_results=10, min_score=0.0)
                for _, text in items
            ]
            for (scope_id, _), query in zip(items, run, strict=True):  # warm-up, untimed
                store.search(scope_of(scope_id), query)
            times = [
                timed_ms(lambda s=scope_id, q=query: store.search(scope_of(s), q))[0]
                for (scope_id, _), query in zip(items, run, strict=True)
            ]
            latency[group][mode.value] = summary(times)
        vectors = [(scope_id, embedder.embed(text).vector) for scope_id, text in items]
        exact_ms: list[float] = []
        exact_ids: list[list[str]] = []
        for scope_id, vector in vectors:
            body = exact_body(vector, scope_of(scope_id), 10)
            client.search(index=index, body=body)  # warm-up
            ms, response = timed_ms(lambda b=body: client.search(index=index, body=b))
            exact_ms.append(ms)
            exact_ids.append(_ids(response, 10))
        group_recall: dict[str, Any] = {"exact_ms": summary(exact_ms)}
        # "auto": what the product sends, ef_search by the scope's size (scope_size).
        sizes = {
            scope_id: parse_chunk_total(
                client.search(
                    index=index, body=scope_chunks_body(scope_of(scope_id), cross_context=False)
                )
            )
            for scope_id, _ in vectors
        }
        auto = {s: ef_search_for(DEFAULT_EF_SEARCH, n) for s, n in sizes.items()}
        group_recall["auto_ef_search"] = sorted(set(auto.values()))
        # "chunks/N": the same rule with another ratio (to choose scope_size.CHUNKS_PER_EF).
        ratios = {
            str(ef): {
                s: ef_search_for(DEFAULT_EF_SEARCH, n, chunks_per_ef=float(str(ef)[7:]))
                for s, n in sizes.items()
            }
            for ef in ef_values
            if str(ef).startswith("chunks/")
        }
        for ef in [*ef_values, "auto"]:
            hits: list[float] = []
            knn_ms: list[float] = []
            for (scope_id, vector), truth in zip(vectors, exact_ids, strict=True):
                filters = request_filters.query_filters(scope_of(scope_id))
                if ef == "auto":
                    sent = auto[scope_id]
                elif str(ef) in ratios:
                    sent = ratios[str(ef)][scope_id]
                else:
                    sent = int(ef)
                body = queries.vector_search_body(vector, filters, k, ef_search=sent)
                client.search(index=index, body=body)  # warm-up
                ms, response = timed_ms(lambda b=body: client.search(index=index, body=b))
                knn_ms.append(ms)
                if truth:
                    hits.append(len(set(_ids(response, 10)) & set(truth)) / len(truth))
            group_recall[f"ef_{ef}"] = {
                "recall_at_10": statistics.fmean(hits) if hits else float("nan"),
                "min_recall": min(hits) if hits else float("nan"),
                "knn_ms": summary(knn_ms),
            }
        recall[group] = group_recall
    return {"latency": latency, "recall": recall}


def index_facts(client: Any, index: str) -> dict[str, Any]:
    stats = client.indices.stats(index=index)["indices"][index]["primaries"]
    return {
        "docs": stats["docs"]["count"],
        "deleted_docs": stats["docs"]["deleted"],
        "store_bytes": stats["store"]["size_in_bytes"],
        "refreshes": stats["refresh"]["total"],
        "external_refreshes": stats["refresh"].get("external_total"),
        "merge_ms": stats["merges"]["total_time_in_millis"],
        "merges": stats["merges"]["total"],
        "segments": stats["segments"]["count"],
        "indexing_ms": stats["indexing"]["index_time_in_millis"],
    }


def _write_tenant(url: str, index: str, seed: int, scope_id: int, documents: int, out: Any) -> None:
    """The other tenant's writer, in its own process (its own interpreter lock)."""
    store = OpenSearchKnowledgeStore(
        OpenSearchConfig(url=url, index_name=index, timeout=120.0), embedder=HashingEmbedder()
    )
    started = time.perf_counter()
    result = index_source(
        store, scope_of(scope_id), CorpusSource(Corpus(seed), scope_id, documents), OPTIONS
    )
    out.put((result.indexed_chunks, time.perf_counter() - started))
    store.close()


def interference(
    url: str,
    client: Any,
    index: str,
    embedder: HashingEmbedder,
    probe: Probe,
    writer: tuple[int, int, int],
) -> dict[str, Any]:
    """Small-scope keyword and vector searches (the product's bodies, sent with the
    bench's client) idle, then while another tenant writes from another process:
    client-side time and the node's own ``took``."""
    seed, scope_id, documents = writer
    bodies: dict[str, list[dict[str, Any]]] = {"keyword": [], "vector": []}
    for small_scope, text in probe.groups["small"]:
        filters = request_filters.query_filters(scope_of(small_scope))
        bodies["keyword"].append(queries.keyword_search_body(text, filters, 20))
        vector = embedder.embed(text).vector
        bodies["vector"].append(
            queries.vector_search_body(vector, filters, 40, ef_search=DEFAULT_EF_SEARCH)
        )

    def one_round(client_ms: dict[str, list[float]], took: dict[str, list[float]]) -> None:
        for mode, run in bodies.items():
            for body in run:
                ms, response = timed_ms(lambda b=body: client.search(index=index, body=b))
                client_ms[mode].append(ms)
                took[mode].append(float(response["took"]))

    idle: tuple[dict[str, list[float]], dict[str, list[float]]] = (
        {"keyword": [], "vector": []},
        {"keyword": [], "vector": []},
    )
    for _ in range(5):
        one_round(*idle)
    before = index_facts(client, index)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(
        target=_write_tenant, args=(url, index, seed, scope_id, documents, results)
    )
    busy: tuple[dict[str, list[float]], dict[str, list[float]]] = (
        {"keyword": [], "vector": []},
        {"keyword": [], "vector": []},
    )
    process.start()
    while process.is_alive() and results.empty():
        one_round(*busy)
    chunks, seconds = results.get(timeout=600)
    process.join()
    after = index_facts(client, index)
    return {
        "writer": "another process",
        "writer_chunks": chunks,
        "writer_seconds": seconds,
        "writer_chunks_per_s": chunks / max(seconds, 1e-9),
        "idle": {mode: summary(v) for mode, v in idle[0].items()},
        "during_write": {mode: summary(v) for mode, v in busy[0].items()},
        "idle_took": {mode: summary(v) for mode, v in idle[1].items()},
        "during_write_took": {mode: summary(v) for mode, v in busy[1].items()},
        "refreshes_during_write": after["refreshes"] - before["refreshes"],
        "merge_ms_during_write": after["merge_ms"] - before["merge_ms"],
    }


def bytes_per_chunk(
    client: Any, corpus: Corpus, chunks: int, embedder: HashingEmbedder, prefix: str
) -> dict[str, Any]:
    """Bulk-write the same chunks into three layouts; one segment each; bytes per chunk."""
    from opensearchpy import helpers

    sources: list[dict[str, Any]] = []
    now = datetime.now(UTC)
    scope_id = 0
    while len(sources) < chunks:
        scope_id += 1
        scope = scope_of(scope_id)
        for doc in range(10):
            text = corpus.document(scope_id, doc)  # bytes: one chunk per section is enough
            path = f"doc-{doc:05d}.md"
            header = DocumentHeader(
                path=path, document_id=f"{scope_id}-{doc}", content_hash="h", indexed_at=now
            )
            for number, section in enumerate(text.split("## Part ")[1:]):
                chunk = DocumentChunk(path, number, "## Part " + section)
                vector = embedder.embed(chunk.content).vector
                sources.append(
                    chunk_document(
                        scope, header, chunk, vector=vector, generation="g1", embedding_key="k"
                    )
                )
    base = index_body(
        vector_dimensions=embedder.dimensions,
        embedding_model=embedder.name,
        number_of_shards=1,
        number_of_replicas=0,
    )
    layouts: dict[str, dict[str, Any]] = {"vectors_in_source": base}
    excluded = {**base, "mappings": {**base["mappings"], "_source": {"excludes": [EMBEDDING]}}}
    layouts["source_excludes_vectors"] = excluded
    derived = {
        **base,
        "settings": {
            **base["settings"],
            "index": {**base["settings"]["index"], "knn.derived_source.enabled": True},
        },
    }
    layouts["derived_source"] = derived
    out: dict[str, Any] = {"chunks": len(sources)}
    for name, body in layouts.items():
        index = f"{prefix}-bytes-{name.replace('_', '-')}"
        client.indices.delete(index=index, ignore=[404])
        try:
            client.indices.create(index=index, body=body)
        except Exception as exc:  # a node without the feature: say so, keep the others
            out[name] = {"error": str(exc)[:300]}
            continue
        helpers.bulk(
            client,
            ({"_index": index, "_id": str(i), "_source": s} for i, s in enumerate(sources)),
            chunk_size=500,
        )
        client.indices.refresh(index=index)
        client.indices.forcemerge(index=index, max_num_segments=1, request_timeout=600)
        stats = client.indices.stats(index=index)["indices"][index]["primaries"]
        size = stats["store"]["size_in_bytes"]
        sample = client.get(index=index, id="0")["_source"]
        out[name] = {
            "bytes_per_chunk": size / len(sources),
            "vector_readable": isinstance(sample.get(EMBEDDING), list),
        }
        client.indices.delete(index=index)
    out["vector_json_bytes"] = statistics.fmean(
        len(str(s.get(EMBEDDING, ""))) for s in sources[:500]
    )
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunks", type=int, default=250_000, help="chunks at the end")
    parser.add_argument("--scopes", type=int, default=1_000)
    parser.add_argument("--big-share", type=float, default=0.2, help="the big scope's share")
    parser.add_argument("--queries", type=int, default=30, help="queries per group and step")
    parser.add_argument(
        "--ef-search",
        default="0,100,200,400",
        help="ef_search values for recall; chunks/N: the product's rule with that ratio",
    )
    parser.add_argument("--writer-chunks", type=int, default=None, help="default: chunks / 10")
    parser.add_argument("--bytes-chunks", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--name", default="scale", help="bench/results/<name>.json")
    parser.add_argument("--hnsw-m", type=int, default=None, help="default: the store's")
    parser.add_argument("--ef-construction", type=int, default=None, help="default: the store's")


def main(args: argparse.Namespace) -> None:
    ef_values: list[int | str] = [
        x if x.startswith("chunks/") else int(x) for x in str(args.ef_search).split(",")
    ]
    corpus = Corpus(args.seed)
    per_document = chunks_per_document(corpus)
    schedule = plan(args.chunks, args.scopes, args.big_share, args.seed, per_document)
    embedder = HashingEmbedder()
    result: dict[str, Any] = {
        "chunks": args.chunks,
        "scopes": args.scopes,
        "big_scope_chunks": round(schedule.sizes[0] * per_document),
        "small_scope_median_chunks": statistics.median(schedule.sizes[1:]) * per_document,
        "chunks_per_document": per_document,
        "chunks_per_document_measured": True,
        "ef_search_values": ef_values,
        "steps": [],
    }
    with opensearch_node() as url:
        index = f"bench-scale-{int(time.time())}"
        config = OpenSearchConfig(
            url=url,
            index_name=index,
            number_of_shards=1,
            number_of_replicas=0,
            timeout=120.0,
            search_timeout=30.0,
            **{
                name: value
                for name, value in (
                    ("hnsw_m", args.hnsw_m),
                    ("hnsw_ef_construction", args.ef_construction),
                )
                if value is not None
            },
        )
        result["hnsw"] = {"m": config.hnsw_m, "ef_construction": config.hnsw_ef_construction}
        store = OpenSearchKnowledgeStore(config, embedder=embedder)
        result["store_ef_search"] = config.ef_search
        client = OpenSearch(url, timeout=600)  # the bench's own reads: stats, exact, bulk
        indexed: dict[int, int] = {}
        total = 0
        try:
            for number, step in enumerate(schedule.steps):
                new_chunks = 0
                big_seconds = 0.0
                started = time.perf_counter()
                for scope_id, documents in step:
                    call_started = time.perf_counter()
                    outcome = index_source(
                        store,
                        scope_of(scope_id),
                        CorpusSource(corpus, scope_id, documents),
                        OPTIONS,
                    )
                    if scope_id == 0:
                        big_seconds = time.perf_counter() - call_started
                    new_chunks += outcome.indexed_chunks
                    indexed[scope_id] = documents
                seconds = time.perf_counter() - started
                total += new_chunks
                client.indices.refresh(index=index)
                facts = index_facts(client, index)
                log(f"step {number}: {total} chunks, {new_chunks / seconds:.0f} chunks/s; {facts}")
                probe = Probe(corpus, indexed, per_document, args.queries, args.seed + number)
                measured = measure_step(store, client, index, embedder, probe, ef_values)
                log(f"step {number}: {measured['recall']}")
                result["steps"].append(
                    {
                        "chunks": total,
                        "new_chunks": new_chunks,
                        "seconds": seconds,
                        "chunks_per_s": new_chunks / seconds,
                        "big_scope_chunks": round(indexed[0] * per_document),
                        "big_scope_call_seconds": big_seconds,
                        "scopes_indexed": len(indexed),
                        "index": facts,
                        **measured,
                    }
                )
            writer_documents = max(
                1, round((args.writer_chunks or args.chunks // 10) / per_document)
            )
            probe = Probe(corpus, indexed, per_document, args.queries, args.seed + 99)
            result["interference"] = interference(
                url, client, index, embedder, probe, (args.seed, args.scopes + 1, writer_documents)
            )
            log(f"interference: {result['interference']}")
            result["bytes"] = bytes_per_chunk(client, corpus, args.bytes_chunks, embedder, index)
            log(f"bytes: {result['bytes']}")
        finally:
            client.indices.delete(index=index, ignore=[404])
            store.close()
    write_result(args.name, result)
