"""``bench/REPORT.md`` and its plots, from ``bench/results/*.json``.

Every table says which result file it comes from and the exact command that produced
that file. A benchmark that has not been run is listed as missing, not left out quietly.
Plots are PNGs next to the results (matplotlib, Agg backend).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.environment import RESULTS_DIR, log
from bench.report_common import REPORT, Report
from bench.report_concurrency import concurrency_section
from bench.report_controls import controls_section
from bench.report_documents import documents_section
from bench.report_embedding import embedding_pool_section
from bench.report_fairness import noisy_neighbour_section
from bench.report_footprint import coldstart_section, memory_section
from bench.report_headings import headings_section
from bench.report_keyword_scale import keyword_scale_section
from bench.report_korean import korean_section
from bench.report_korean_help import korean_help_section
from bench.report_korean_sets import korean_sets_section
from bench.report_korean_v5 import korean_v5_section
from bench.report_layout import HISTORY, history_text
from bench.report_layout import header as _header
from bench.report_mutation import mutation_section
from bench.report_named_clauses import named_clauses_section
from bench.report_page_signal import page_signal_section
from bench.report_perf import index_command_section, quota_section
from bench.report_quality import quality_section, questions_section
from bench.report_ranking import (
    context_section,
    fusion_section,
    hashing_variants_section,
    hybrid_fetch_section,
    hybrid_ids_section,
    hybrid_page_section,
    hybrid_python_section,
    keyword_probe_section,
    rerank_section,
)
from bench.report_relevance import relevance_section
from bench.report_repos import incremental_section, repos_section
from bench.report_resources import resources_section
from bench.report_runtime import indexing_section, latency_section, ranking_latency_section
from bench.report_scale import scale_section
from bench.report_scope_recall import scope_recall_section
from bench.report_shared import shared_section
from bench.report_synonyms import synonyms_section

__all__ = ["Report", "add_arguments", "main"]

# --- the report ------------------------------------------------------------------------------


def _superseded_sections(report: Report) -> None:
    """The sections a later run, or the decision they informed, superseded: ablations and
    probes behind today's defaults, and past rounds' before/after runs. They go to
    ``bench/results/history.md`` (``Report.superseded``)."""
    fusion_section(report)  # 1c: the fusion defaults (docs/ranking.md)
    context_section(report)  # 1d: title and headings embedded in front
    keyword_probe_section(report)  # 1e: BM25 parameters
    korean_section(report)  # 1f: bigrams vs morphemes (docs/korean.md)
    headings_section(report)  # 1g: headings on the keyword side
    hashing_variants_section(report)  # 1h: a probe
    korean_v5_section(report)  # 1i: superseded by 1k
    korean_help_section(report)  # 1j: superseded by 1k
    ranking_latency_section(report)  # 3b-3g: issue 11's rounds; section 3 is today's
    hybrid_fetch_section(report)
    hybrid_ids_section(report)
    hybrid_python_section(report)
    hybrid_page_section(report)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", type=Path, default=REPORT)
    parser.add_argument(
        "--history", type=Path, default=HISTORY, help="where the superseded sections go"
    )


def main(args: argparse.Namespace) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    report = Report(args.output, args.history)
    with report.superseded():
        _superseded_sections(report)
    args.history.write_text(history_text(report), encoding="utf-8")
    log(f"wrote {args.history}")
    # The current sections, in the order of their numbers. A new benchmark's section
    # takes the next number and goes last; when it replaces an older one, move that
    # one's call to _superseded_sections.
    quality_section(report)
    questions_section(report)
    korean_sets_section(report)
    page_signal_section(report)
    indexing_section(report)
    latency_section(report)
    rerank_section(report)
    coldstart_section(report)
    memory_section(report)
    documents_section(report)
    embedding_pool_section(report)
    quota_section(report)
    index_command_section(report)
    mutation_section(report)
    scale_section(report)
    scope_recall_section(report)
    repos_section(report)
    incremental_section(report)
    shared_section(report)
    controls_section(report)
    named_clauses_section(report)
    synonyms_section(report)
    relevance_section(report)
    noisy_neighbour_section(report)
    keyword_scale_section(report)
    resources_section(report)
    concurrency_section(report)
    text = _header(report) + "\n" + "\n".join(report.sections)
    args.output.write_text(text, encoding="utf-8")
    log(f"wrote {args.output}")
