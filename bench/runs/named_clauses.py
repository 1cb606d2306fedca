"""Node: hybrid/grouped p50 with the score-0 origin/lesson clauses vs none.

What the score-0 named clauses cost a search on the node, interleaved in one run.

A candidate read without its source (hybrid, or a ``group_by: "document"`` search) says
whether it is a lesson card and, for an origin weighted other than 1.0, its origin through
named clauses of score 0 (``opensearch.queries.with_named``). They add nothing to a score;
this measures what they add to the time. The man-pages corpus (``--limit`` pages, hashing
embedder), one page in ``--lesson-every`` marked ``"kind": "lesson"`` by its sidecar, is
indexed once into one index of one node; then, per mode, every query is searched in each
variant, taking turns (each variant first in turn), so all see the same machine and the
same index:

- ``inert``: weights that read nothing (neutral origins, lessons weighted 1.0, no
  extras): no named clause, the baseline;
- ``default``: what a search gets unless told (lessons at 1.4, 2 extras): one clause;
- ``weighted``: also ``shared`` 0.5 and ``manual`` 1.5: three clauses.

Each search is timed as ``bench latency`` times one (``store.search`` through
``recording_client.RecordingClient``: the wall clock, the ``took`` of its requests). Writes
``bench/results/named-clauses.json``: per mode and variant the p50 of the wall time and of
``took``, and each one's ratio to ``inert``.
Run: ``.venv/bin/python -m bench named-clauses --limit 0``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.common.environment import log, opensearch_node, write_result
from bench.common.metrics import summarize
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.ranking.origin_weights import NEUTRAL, RankWeights

__all__ = ["add_arguments", "main"]

VARIANTS: dict[str, RankWeights] = {
    "inert": RankWeights(lesson=1.0, extra_lessons=0),
    "default": NEUTRAL,
    "weighted": RankWeights({"shared": 0.5, "manual": 1.5}),
}
# (mode, group_by): the searches whose candidates carry no source.
MODES: tuple[tuple[SearchMode, str | None], ...] = (
    (SearchMode.HYBRID, None),
    (SearchMode.HYBRID, "document"),
    (SearchMode.KEYWORD, "document"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=0, help="pages (0 = all, the default)")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the queries per mode")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured queries per mode")
    parser.add_argument("--lesson-every", type=int, default=20, help="one lesson card in N pages")
    parser.add_argument("--max-results", type=int, default=10)


def _lesson_copy(source: Path, target: Path, every: int) -> int:
    """The corpus's pages copied to ``target``, one in ``every`` with a lesson sidecar."""
    shutil.copytree(source, target)
    pages = sorted(target.rglob("*.md"))
    sidecar = json.dumps({"metadataAttributes": {"kind": "lesson"}})
    for page in pages[::every]:
        page.with_name(page.name + ".metadata.json").write_text(sidecar, encoding="utf-8")
    return len(pages[::every])


def main(args: argparse.Namespace) -> None:
    from bench.common.recording_client import RecordingClient
    from bench.common.stores import SCOPE, delete_index, open_store, unique_index_name
    from bench.corpora.manpages import load_corpus
    from bench.runs.latency import _time_store
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.ingest.pipeline import index_source
    from knowledge.ingest.sources.folders import LocalDirectorySource
    from knowledge.stores.opensearch.client import create_client
    from knowledge.stores.opensearch.settings import OpenSearchConfig

    corpus = load_corpus(args.limit or None)
    texts = [q.text for q in corpus.queries]
    log(f"corpus {corpus.name}: {corpus.documents} documents, {len(texts)} queries")
    with tempfile.TemporaryDirectory() as tmp, opensearch_node() as url:
        docs = Path(tmp) / "docs"
        lessons = _lesson_copy(corpus.docs_dir, docs, args.lesson_every)
        name = unique_index_name("bench-named-clauses")
        probe = RecordingClient(create_client(OpenSearchConfig(url=url)))
        store = open_store(
            "opensearch", HashingEmbedder(), workdir=None, node_url=url, index_name=name,
            client=probe,
        )  # fmt: skip
        try:
            result = index_source(
                store, SCOPE, LocalDirectorySource(docs), IndexOptions(max_documents=100_000)
            )
            indexed = {
                "documents": result.indexed_documents,
                "chunks": result.indexed_chunks,
                "lesson_documents": lessons,
            }
            log(f"indexed {indexed}")
            modes: dict[str, Any] = {}
            for mode, group_by in MODES:
                label = mode.value + (f"+group_by={group_by}" if group_by else "")
                modes[label] = _measure(store, probe, texts, mode, group_by, args, _time_store)
                log(f"{label}: {modes[label]['wall_ratio_p50']}")
        finally:
            store.close()
            delete_index(url, name)
    write_result(
        "named-clauses",
        {
            "corpus": corpus.describe(),
            "indexed": indexed,
            "embedder": "hashing (256 dimensions)",
            "max_results": args.max_results,
            "rounds": args.rounds,
            "modes": modes,
        },
    )


def _measure(
    store: Any,
    probe: Any,
    texts: list[str],
    mode: SearchMode,
    group_by: str | None,
    args: argparse.Namespace,
    time_store: Any,
) -> dict[str, Any]:
    names = list(VARIANTS)

    def query(text: str, name: str) -> SearchQuery:
        return SearchQuery(
            text, mode=mode, max_results=args.max_results, group_by=group_by,
            weights=VARIANTS[name],
        )  # fmt: skip

    for text in texts[: args.warmup]:
        for name in names:
            time_store(store, probe, query(text, name))
    wall: dict[str, list[float]] = {name: [] for name in names}
    took: dict[str, list[float]] = {name: [] for name in names}
    turn = 0
    for _ in range(args.rounds):
        for text in texts:
            shift = turn % len(names)
            turn += 1
            for name in names[shift:] + names[:shift]:
                elapsed, node, _client = time_store(store, probe, query(text, name))
                wall[name].append(elapsed)
                took[name].append(node)
    summary = {
        name: {"wall": summarize(wall[name]), "took": summarize(took[name])} for name in names
    }
    base_wall, base_took = summary["inert"]["wall"]["p50"], summary["inert"]["took"]["p50"]
    return {
        "variants": summary,
        "wall_ratio_p50": {
            name: round(summary[name]["wall"]["p50"] / base_wall, 3) for name in names
        },
        "took_ratio_p50": {
            name: round(summary[name]["took"]["p50"] / max(base_took, 1e-9), 3) for name in names
        },
    }
