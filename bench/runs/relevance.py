"""Top score: answerable vs unanswerable questions (raw per-question records).

Absolute relevance and abstention: how well the top score separates the questions the
indexed documents answer from those they do not.

For each abstention set (``bench/corpora/unanswerable.py``: answerable, near-miss, off-domain
and in-domain near-miss questions over the indexed two thirds of a corpus), embedder and
store, the set's docs
folder is indexed into a fresh store as ``bench/runs/quality.py`` does (``reindex_source`` of
a ``LocalDirectorySource``), and every question is sent in every mode (keyword, vector,
hybrid) as ``SearchQuery(text, mode=mode, max_results=10, min_score=0.0)`` inside
``knowledge.ranking.explain.explaining()``: nothing is filtered, so any floor can be
applied afterwards. Each question's raw record keeps, per mode, its ranking of documents
and its first 10 results (document, chunk, ``score``: the absolute relevance,
``rank_score``: the relative score the list is ordered by, and the explanation's
``relevance`` features whole: coverage, vector, ...), next to plain BM25's raw top score
over the same docs (``bench/common/baselines.py``). They go, with the summary below, to
``bench/results/relevance-<set>-<embedder>-<store>[-<label>].json`` (on one line: they
are large), so fitting (``bench/runs/relevance_fit.py``) and the summary (``--summarize``)
never search again.

The summary, per set, embedder, store and mode (``summarize_mode``):

- AUROC (Mann-Whitney, ties count half) of the top result's ``score`` (no result: 0)
  separating answerable from unanswerable questions: all, near-miss (held-out answer)
  only, off-domain only (and its ``shares_words`` part), in-domain near-miss
  (``domain``) only, and ``written``: the hand-written ones (off and domain: everything
  but the held-out-answer kind); the same for ``rank_score``, for the best
  result's ``score`` (the list is ordered by ``rank_score``, so the top result need not
  have the best absolute score) and for plain BM25's raw top score;
- at a floor ``f`` (``--floor``; default the product's ``DEFAULT_MIN_SCORE``), applied as
  the product applies its default floor (a search whose best result scores below it
  answers nothing, else its whole list): the share of unanswerable questions answered
  with nothing (all, and per kind as for AUROC), and the loss of answerable ones: the
  share whose relevant document is in the top 5 at ``min_score`` 0 and that are
  answered with nothing at ``f``;
- MRR@10 of the answerable questions on the whole list and on the filtered list.

Until the product gives results ``rank_score`` and ``explanation["relevance"]`` the run
still works: ``rank_score`` falls back to ``score`` and the features are recorded empty.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import tempfile
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.common.baselines import Fts5Baseline
from bench.common.embedding_cache import CachingEmbedder
from bench.common.environment import DATA_DIR, log, node_if, write_result
from bench.common.metrics import document_ranking, reciprocal_rank
from bench.common.stores import (
    EMBEDDERS,
    SCOPE,
    STORES,
    delete_index,
    make_embedder,
    open_store,
    refresh_index,
    unique_index_name,
)
from bench.corpora.unanswerable import SETS, AbstentionSet, Question, even_sample, load_set
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.embedding.base import EmbeddingClient
from knowledge.ingest.pipeline import reindex_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.ranking import explain
from knowledge.ranking.fusion import model_family
from knowledge.stores.protocol import KnowledgeStore

__all__ = [
    "MODES",
    "Result",
    "abstains",
    "add_arguments",
    "auroc",
    "default_floor",
    "floor_for_keep",
    "keeps",
    "main",
    "result_name",
    "summarize_mode",
]

MODES = (SearchMode.KEYWORD, SearchMode.VECTOR, SearchMode.HYBRID)
KINDS = ("answerable", "near", "off", "domain")
WRITTEN_KINDS = ("off", "domain")
"""The hand-written unanswerable kinds: everything but the held-out-answer ("near") one."""
MAX_RESULTS = 10
TOP = 5
FALLBACK_FLOOR = 0.5
DEFAULT_EMBEDDERS = ("hashing", "minilm", "multilingual")
_DIGITS = 6

Result = Mapping[str, Any]
"""One recorded result: ``document_path``, ``chunk_index``, ``score``, ``rank_score``,
``relevance`` (the explanation's features whole, ``strength`` among them; ``{}`` when
absent)."""
ScoreOf = Callable[[Result], float]


def default_floor() -> float:
    """The product's default ``min_score`` (``knowledge.ranking.relevance``), else 0.5."""
    try:
        from knowledge.ranking.relevance import DEFAULT_MIN_SCORE
    except ImportError:
        return FALLBACK_FLOOR
    return float(DEFAULT_MIN_SCORE)


def result_name(set_name: str, embedder: str, store: str, label: str = "") -> str:
    """The result file's name (without ``.json``) of one set, embedder and store."""
    suffix = f"-{label}" if label else ""
    return f"relevance-{set_name}-{embedder}-{store}{suffix}"


# --- Metrics (pure: records in, numbers out) -------------------------------------------


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """The probability that a random positive scores above a random negative, ties
    counted half (the Mann-Whitney U over both sizes); ``None`` when a side is empty."""
    if not positives or not negatives:
        return None
    pooled = sorted([(value, 1) for value in positives] + [(value, 0) for value in negatives])
    rank_sum = 0.0  # of the positives, 1-based, ties given their average rank
    start = 0
    while start < len(pooled):
        end = start
        while end + 1 < len(pooled) and pooled[end + 1][0] == pooled[start][0]:
            end += 1
        average = (start + end) / 2.0 + 1.0
        rank_sum += average * sum(label for _, label in pooled[start : end + 1])
        start = end + 1
    n_pos, n_neg = len(positives), len(negatives)
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


RAW_DIR = DATA_DIR / "relevance"
"""Where the raw per-question records go (tens of MB: regenerated, not committed);
``bench/results/`` gets the same file without them (``without_records``)."""


def write_raw(name: str, payload: Mapping[str, Any]) -> Path:
    """The raw records of a run, on one line, under ``RAW_DIR``."""
    RAW_DIR.mkdir(parents=True, exist_ok=True)
    path = RAW_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
    return path


def read_raw(name: str) -> dict[str, Any] | None:
    """A run's raw records (``write_raw``), ``None`` when it has not been run here."""
    path = RAW_DIR / f"{name}.json"
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def without_records(payload: Mapping[str, Any]) -> dict[str, Any]:
    """What ``bench/results/`` keeps of a run: everything but the per-question records."""
    return {key: value for key, value in payload.items() if key not in {"questions", "modes"}}


def score_of(result: Result) -> float:
    return float(result["score"])


def rank_score_of(result: Result) -> float:
    value = result.get("rank_score")
    return float(result["score"] if value is None else value)


def top_value(results: Sequence[Result], value_of: ScoreOf = score_of) -> float:
    """The first (top-ranked) result's value; 0.0 for an empty list."""
    return value_of(results[0]) if results else 0.0


def best_value(results: Sequence[Result], value_of: ScoreOf = score_of) -> float:
    """The highest value over the results; 0.0 for an empty list."""
    return max((value_of(r) for r in results), default=0.0)


def above(results: Sequence[Result], floor: float, value_of: ScoreOf = score_of) -> list[Result]:
    """What a search without ``min_score`` answers at the default floor ``floor``: nothing
    when its best result scores below it, else every result in its order (the product's
    evidence floor, ``knowledge.ranking.relevance``)."""
    if best_value(results, value_of) < floor:
        return []
    return list(results)


def abstains(results: Sequence[Result], floor: float, value_of: ScoreOf = score_of) -> bool:
    """Whether the question is answered with nothing at ``floor`` (every result below it)."""
    return not above(results, floor, value_of)


def keeps(
    results: Sequence[Result],
    relevant: Collection[str],
    floor: float,
    value_of: ScoreOf = score_of,
    k: int = TOP,
) -> bool:
    """Whether a relevant document is among the first ``k`` documents of the results at
    or above ``floor``."""
    ranking = document_ranking(r["document_path"] for r in above(results, floor, value_of))
    return any(path in relevant for path in ranking[:k])


def _mrr(rankings: Sequence[tuple[list[str], Collection[str]]]) -> float | None:
    if not rankings:
        return None
    return math.fsum(reciprocal_rank(r, rel, 10) for r, rel in rankings) / len(rankings)


def _share(flags: Sequence[bool]) -> float | None:
    return None if not flags else sum(flags) / len(flags)


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _separation(
    questions: Sequence[Mapping[str, Any]], values: Sequence[float]
) -> dict[str, float | None]:
    """AUROC of ``values`` (one per question): answerable against all, near, off, off
    ``shares_words``, domain and written (off and domain) unanswerable questions."""
    positives = [v for q, v in zip(questions, values, strict=True) if q["kind"] == "answerable"]

    def against(keep: Callable[[Mapping[str, Any]], bool]) -> float | None:
        negatives = [v for q, v in zip(questions, values, strict=True) if keep(q)]
        return _round(auroc(positives, negatives))

    return {
        "all": against(lambda q: q["kind"] != "answerable"),
        "near": against(lambda q: q["kind"] == "near"),
        "off": against(lambda q: q["kind"] == "off"),
        "off_shares_words": against(lambda q: q["kind"] == "off" and bool(q.get("shares_words"))),
        "domain": against(lambda q: q["kind"] == "domain"),
        "written": against(lambda q: q["kind"] in WRITTEN_KINDS),
    }


def summarize_mode(
    questions: Sequence[Mapping[str, Any]],
    records: Sequence[Mapping[str, Any]],
    floor: float,
    value_of: ScoreOf = score_of,
) -> dict[str, Any]:
    """The module docstring's figures for one mode: ``questions`` and ``records`` (the
    mode's per-question records, ``results`` each) aligned; ``value_of`` reads a result's
    absolute score (the product's ``score`` by default, or a calibration's)."""
    results: list[list[Result]] = [list(r["results"]) for r in records]
    kinds = [q["kind"] for q in questions]
    answerable = [i for i, kind in enumerate(kinds) if kind == "answerable"]
    unanswerable = [i for i, kind in enumerate(kinds) if kind != "answerable"]
    found = [
        i for i in answerable if keeps(results[i], questions[i]["relevant"], -math.inf, value_of)
    ]
    kept = [i for i in found if keeps(results[i], questions[i]["relevant"], floor, value_of)]

    def abstained(*wanted: str) -> float | None:
        chosen = [i for i in unanswerable if not wanted or kinds[i] in wanted]
        return _round(_share([abstains(results[i], floor, value_of) for i in chosen]))

    def rankings(filtered: bool) -> list[tuple[list[str], Collection[str]]]:
        out: list[tuple[list[str], Collection[str]]] = []
        for i in answerable:
            shown = above(results[i], floor, value_of) if filtered else results[i]
            ranking = document_ranking(r["document_path"] for r in shown)
            out.append((ranking, questions[i]["relevant"]))
        return out

    bm25 = [float(q.get("bm25_top") or 0.0) for q in questions]
    return {
        "questions": {
            "answerable": len(answerable),
            "near": kinds.count("near"),
            "off": kinds.count("off"),
            "domain": kinds.count("domain"),
        },
        "auroc": {
            "score": _separation(questions, [top_value(r, value_of) for r in results]),
            "best_score": _separation(questions, [best_value(r, value_of) for r in results]),
            "rank_score": _separation(questions, [top_value(r, rank_score_of) for r in results]),
            "bm25": _separation(questions, bm25),
        },
        "floor": floor,
        "abstained": {
            "all": abstained(),
            "near": abstained("near"),
            "off": abstained("off"),
            "domain": abstained("domain"),
            "written": abstained(*WRITTEN_KINDS),
        },
        "answerable_abstained": _round(
            _share([abstains(results[i], floor, value_of) for i in answerable])
        ),
        "top5_at_0": _round(_share([i in found for i in answerable])),
        "lost": None if not answerable else round((len(found) - len(kept)) / len(answerable), 4),
        "kept_of_found": _round(_share([i in kept for i in found])),
        "mrr_at_10": _round(_mrr(rankings(False))),
        "mrr_at_10_filtered": _round(_mrr(rankings(True))),
    }


def floor_for_keep(
    questions: Sequence[Mapping[str, Any]],
    records: Sequence[Mapping[str, Any]],
    target: float = 0.95,
    value_of: ScoreOf = score_of,
) -> tuple[float, float] | None:
    """The highest floor at which at least ``target`` of the answerable questions whose
    relevant document is in the top 5 at ``min_score`` 0 still have it in the top 5 of
    the results at or above the floor; ``(floor, kept share)``, ``None`` when no
    answerable question has its document in the top 5.

    A question's filtered list only changes at its own results' values, so each one is
    judged at those (and the global candidates looked up by bisection)."""
    steps: list[tuple[list[float], list[bool]]] = []
    candidates: set[float] = set()
    for question, record in zip(questions, records, strict=True):
        if question["kind"] != "answerable":
            continue
        results: list[Result] = list(record["results"])
        relevant = question["relevant"]
        if not keeps(results, relevant, -math.inf, value_of):
            continue
        values = sorted({value_of(r) for r in results})
        steps.append((values, [keeps(results, relevant, v, value_of) for v in values]))
        candidates.update(values)
    if not steps:
        return None
    best: tuple[float, float] | None = None
    for floor in sorted(candidates, reverse=True):
        kept = 0
        for values, kept_at in steps:
            position = bisect.bisect_left(values, floor)
            kept += position < len(values) and kept_at[position]
        share = kept / len(steps)
        if share >= target:
            best = (floor, share)
            break
    return best if best is not None else (0.0, 1.0)


# --- The run ---------------------------------------------------------------------------


def _rounded(value: Any) -> Any:
    """``value`` with every float rounded to ``_DIGITS`` decimals (smaller files)."""
    if isinstance(value, float):
        return round(value, _DIGITS)
    if isinstance(value, Mapping):
        return {str(k): _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def _result_record(result: Any) -> dict[str, Any]:
    explanation: Mapping[str, Any] = getattr(result, "explanation", None) or {}
    rank_score = getattr(result, "rank_score", None)
    return {
        "document_path": result.document_path,
        "chunk_index": result.chunk_index,
        "score": round(float(result.score), _DIGITS),
        "rank_score": round(float(result.score if rank_score is None else rank_score), _DIGITS),
        "relevance": _rounded(dict(explanation.get("relevance") or {})),
    }


def search_modes(store: KnowledgeStore, questions: Sequence[Question]) -> dict[str, dict[str, Any]]:
    """Every question in every mode the store supports, unfiltered, explained: per mode
    the seconds it took and one record per question (ranking, results, the search's
    ``relevance`` record)."""
    modes: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        if mode not in store.supported_modes:
            continue
        records: list[dict[str, Any]] = []
        calibration: Any = None
        started = time.perf_counter()
        for question in questions:
            query = SearchQuery(
                text=question.text, mode=mode, max_results=MAX_RESULTS, min_score=0.0
            )
            with explain.explaining() as trace:
                hits = store.search(SCOPE, query)
            searches = trace.searches
            search_relevance = dict((searches[-1].get("relevance") or {}) if searches else {})
            # The same in every search of a mode: kept once, in the mode's record.
            calibration = search_relevance.pop("calibration", None) or calibration
            records.append(
                {
                    "ranking": document_ranking(hit.document_path for hit in hits),
                    "results": [_result_record(hit) for hit in hits[:MAX_RESULTS]],
                    "search_relevance": _rounded(search_relevance),
                }
            )
        modes[mode.value] = {
            "seconds": round(time.perf_counter() - started, 2),
            "calibration": calibration,
            "records": records,
        }
        log(f"{store.name} {mode.value}: {len(questions)} questions")
    return modes


def _question_records(questions: Sequence[Question], bm25: Fts5Baseline) -> list[dict[str, Any]]:
    return [{**q.to_dict(), "bm25_top": round(bm25.best_score(q.text), _DIGITS)} for q in questions]


def _limited(questions: Sequence[Question], limit: int) -> list[Question]:
    """At most ``limit`` questions of each kind (an even sample); 0: all."""
    if limit <= 0:
        return list(questions)
    out: list[Question] = []
    for kind in KINDS:
        out.extend(even_sample([q for q in questions if q.kind == kind], limit))
    return out


def _run_store(
    kind: str,
    embedder: EmbeddingClient,
    embedder_name: str,
    abstention: AbstentionSet,
    questions: Sequence[Question],
    url: str | None,
    workdir: Path,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Index the set's docs into a fresh ``kind`` store and search; (indexing, modes)."""
    index_name = None
    options: dict[str, Any] = {}
    if kind == "opensearch":
        index_name = unique_index_name(f"bench-relevance-{embedder_name}")
        options = {"wait_for_refresh": True}
    store = open_store(
        kind, embedder, workdir=workdir, node_url=url, index_name=index_name, options=options
    )
    try:
        started = time.perf_counter()
        result = reindex_source(
            store,
            SCOPE,
            LocalDirectorySource(abstention.docs_dir),
            IndexOptions(max_documents=100_000),
        )
        if result.errors:
            raise SystemExit(f"indexing failed for {len(result.errors)} documents")
        indexing = {
            "documents": result.indexed_documents,
            "chunks": result.indexed_chunks,
            "seconds": round(time.perf_counter() - started, 2),
        }
        log(f"{abstention.name} {store.name}: indexed {result.indexed_documents} docs")
        if url is not None and index_name is not None:
            refresh_index(url, index_name)
        return indexing, search_modes(store, questions)
    finally:
        store.close()
        if url is not None and index_name is not None:
            delete_index(url, index_name)


def summarize(payload: Mapping[str, Any], floor: float) -> dict[str, Any]:
    """``summarize_mode`` of every mode of one result file's payload."""
    questions = payload["questions"]
    return {
        mode: summarize_mode(questions, body["records"], floor)
        for mode, body in payload["modes"].items()
    }


def _fmt(value: float | None) -> str:
    return "  -  " if value is None else f"{value:.3f}"


def print_summary(payload: Mapping[str, Any], floor: float) -> None:
    """One line per mode of one result file (stdout)."""
    described = payload["set"]
    head = (
        f"{described['name']} / {payload['embedder']['name']} / {payload['store']}  "
        f"(answerable {described['answerable_run']}, near {described['near_run']}, "
        f"off {described['off_run']}, domain {described.get('domain_run', 0)}; "
        f"floor {floor})"
    )
    print(head)
    print(
        "  mode     AUROC score all/near/off/offhard/domain/written | best  | rank_score | "
        "bm25  | abstain all/near/off/domain/written | lost  | MRR@10 / filtered"
    )
    for mode, s in summarize(payload, floor).items():
        a = s["auroc"]
        score = " ".join(
            _fmt(a["score"][key])
            for key in ("all", "near", "off", "off_shares_words", "domain", "written")
        )
        abstained = " ".join(
            _fmt(s["abstained"][key]) for key in ("all", "near", "off", "domain", "written")
        )
        print(
            f"  {mode:<8} {score:<47} | {_fmt(a['best_score']['all'])} | "
            f"{_fmt(a['rank_score']['all'])}      | {_fmt(a['bm25']['all'])} | "
            f"{abstained:<35} | {_fmt(s['lost'])} | {_fmt(s['mrr_at_10'])} / "
            f"{_fmt(s['mrr_at_10_filtered'])}"
        )


def run_set(
    abstention: AbstentionSet,
    embedder_names: Sequence[str],
    stores: Sequence[str],
    url: str | None,
    limit: int,
    label: str,
    floor: float,
) -> None:
    questions = _limited(abstention.questions, limit)
    tokenizer = "trigram" if abstention.language == "ko" else "porter unicode61"
    bm25 = Fts5Baseline(abstention.docs_dir, tokenizer)
    question_records = _question_records(questions, bm25)
    described = {
        **abstention.describe(),
        "answerable_run": sum(q.kind == "answerable" for q in questions),
        "near_run": sum(q.kind == "near" for q in questions),
        "off_run": sum(q.kind == "off" for q in questions),
        "domain_run": sum(q.kind == "domain" for q in questions),
        "limit_per_kind": limit,
    }
    for embedder_name in embedder_names:
        embedder = make_embedder(embedder_name)
        try:
            for kind in stores:
                with tempfile.TemporaryDirectory(prefix="kb-bench-") as workdir:
                    indexing, modes = _run_store(
                        kind, embedder, embedder_name, abstention, questions, url, Path(workdir)
                    )
                present = any(
                    result["relevance"]
                    for body in modes.values()
                    for record in body["records"]
                    for result in record["results"]
                )
                if not present:
                    log("no result has explanation['relevance'] (the product has not landed it)")
                payload: dict[str, Any] = {
                    "set": described,
                    "embedder": {
                        "name": embedder.name,
                        "key": embedder_name,
                        "family": model_family(embedder.name),
                        "dimensions": embedder.dimensions,
                    },
                    "store": kind,
                    "indexing": indexing,
                    "max_results": MAX_RESULTS,
                    "min_score": 0.0,
                    "default_min_score": default_floor(),
                    "relevance_features": present,
                    "bm25": {"tokenizer": tokenizer, "value": "raw -bm25() of the best document"},
                    "questions": question_records,
                    "modes": modes,
                }
                payload["summary"] = summarize(payload, floor)
                name = result_name(abstention.name, embedder_name, kind, label)
                write_raw(name, payload)
                write_result(name, without_records(payload))
                print_summary(payload, floor)
            if isinstance(embedder, CachingEmbedder):
                log(f"embedding cache: {embedder.hits} hits, {embedder.misses} misses")
        finally:
            if isinstance(embedder, CachingEmbedder):
                embedder.close()


def _names(value: str, allowed: Sequence[str], what: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    for name in names:
        if name not in allowed:
            raise SystemExit(f"unknown {what} {name!r}: one of {', '.join(allowed)}")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated abstention sets")
    parser.add_argument(
        "--embedders", default=",".join(DEFAULT_EMBEDDERS), help="comma-separated embedders"
    )
    parser.add_argument("--stores", default="embedded", help="comma-separated: embedded,opensearch")
    parser.add_argument(
        "--limit",
        type=int,
        default=0,
        help="at most this many questions of each kind (answerable, near, off, domain); "
        "0 = all. "
        "Names the result file '-limit<N>' unless --label is given",
    )
    parser.add_argument("--label", default="", help="suffix of the result file names")
    parser.add_argument(
        "--floor",
        type=float,
        default=None,
        help="the min_score the summary applies (default: the product's DEFAULT_MIN_SCORE)",
    )
    parser.add_argument(
        "--summarize",
        action="store_true",
        help="no search: print the summary of the existing result files at --floor",
    )
    parser.add_argument(
        "--manpages-limit", type=int, default=300, help="man pages in the corpus (0 = all)"
    )


def main(args: argparse.Namespace) -> None:
    sets = _names(args.sets, SETS, "set")
    embedders = _names(args.embedders, EMBEDDERS, "embedder")
    stores = _names(args.stores, STORES, "store")
    floor = default_floor() if args.floor is None else args.floor
    label = args.label or (f"limit{args.limit}" if args.limit > 0 else "")
    if args.summarize:
        for name in sets:
            for embedder_name in embedders:
                for kind in stores:
                    payload = read_raw(result_name(name, embedder_name, kind, label))
                    if payload is not None:
                        print_summary(payload, floor)
        return
    with node_if("opensearch" in stores) as url:
        for name in sets:
            abstention = load_set(name, args.manpages_limit or None)
            log(f"set {name}: {json.dumps(abstention.counts())}")
            run_set(abstention, embedders, stores, url, args.limit, label, floor)
