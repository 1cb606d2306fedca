"""Man-pages keyword MRR@10 under other BM25 k1/b on the real node (a probe).

Keyword analysis probe for the man-pages benchmark: BM25 parameters on the real node.

Why keyword MRR@10 sits near 0.82 on the 300-page man-pages sample: the index of the
product (hashing embedder, ``index_source``) is copied server-side (``_reindex``, vectors
left out) into indexes that differ only in their BM25 ``k1``/``b`` (the product's mapping
otherwise), and every query runs the product's own keyword request
(``queries.keyword_search_body``, 50 chunks) on each; MRR@10 at document level as in
``bench/runs/quality.py``. Only OpenSearch can change ``k1``/``b``: SQLite FTS5's ``bm25()``
has them fixed at 1.2 / 0.75, so the embedded store could not follow. Writes
``bench/results/bm25-manpages-300.json``.
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.common.environment import log, opensearch_node, write_result
from bench.common.stores import SCOPE, delete_index, open_store, unique_index_name
from bench.corpora.manpages import load_corpus
from knowledge.core.model import IndexOptions
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import LocalDirectorySource

__all__ = ["add_arguments", "main"]

PARAMETERS = ((1.2, 0.75), (1.2, 0.5), (1.2, 0.3), (0.9, 0.4), (1.5, 0.75), (2.0, 0.75))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=300, help="man pages (default 300)")


def _mrr(client: Any, index: str, corpus: Any) -> float:
    from knowledge.stores.opensearch import request_filters
    from knowledge.stores.opensearch.read import queries

    filters = request_filters.query_filters(SCOPE)
    total = 0.0
    for query in corpus.queries:
        body = queries.keyword_search_body(query.text, filters, 50)
        documents: list[str] = []
        for hit in client.search(index=index, body=body)["hits"]["hits"]:
            path = hit["_source"]["document_path"]
            if path not in documents:
                documents.append(path)
        for rank, path in enumerate(documents[:10], 1):
            if path in query.relevant:
                total += 1.0 / rank
                break
    return total / len(corpus.queries)


def main(args: argparse.Namespace) -> None:
    from knowledge.stores.opensearch.client import create_client
    from knowledge.stores.opensearch.mapping import index_body
    from knowledge.stores.opensearch.settings import OpenSearchConfig

    corpus = load_corpus(args.limit or None)
    rows: list[dict[str, Any]] = []
    with opensearch_node() as url:
        source = unique_index_name("bench-bm25")
        client = create_client(OpenSearchConfig(url=url, timeout=600))
        store = open_store(
            "opensearch", HashingEmbedder(), workdir=None, node_url=url, index_name=source
        )
        made = [source]
        try:
            index_source(
                store,
                SCOPE,
                LocalDirectorySource(corpus.docs_dir),
                IndexOptions(max_documents=100_000),
            )
            client.indices.refresh(index=source)  # every chunk searchable before the copies
            for k1, b in PARAMETERS:
                name = unique_index_name("bench-bm25-variant")
                body = index_body(vector_dimensions=None, embedding_model=None)
                body["settings"]["index"]["similarity"] = {
                    "default": {"type": "BM25", "k1": k1, "b": b}
                }
                client.indices.create(index=name, body=body)
                made.append(name)
                client.reindex(
                    body={
                        "source": {"index": source, "_source": {"excludes": ["embedding"]}},
                        "dest": {"index": name},
                    },
                    refresh=True,
                    request_timeout=600,
                )
                rows.append({"k1": k1, "b": b, "mrr_at_10": round(_mrr(client, name, corpus), 4)})
                log(f"k1={k1} b={b}: MRR@10 {rows[-1]['mrr_at_10']}")
        finally:
            store.close()
            client.close()
            for name in made:
                delete_index(url, name)
    write_result(
        f"bm25-manpages-{args.limit or 'all'}",
        {
            "corpus": corpus.describe(),
            "request": "queries.keyword_search_body, 50 chunks",
            "runs": rows,
        },
    )
