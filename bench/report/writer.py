"""``bench/REPORT.md`` and its plots, from ``bench/results/*.json``.

Every table says which result file it comes from and the exact command that produced
that file. A benchmark that has not been run is listed as missing, not left out quietly.
Plots are PNGs next to the results (matplotlib, Agg backend). The superseded sections are
frozen text in ``bench/results/history.md``: REPORT.md links to them, nothing rewrites them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench.common.environment import RESULTS_DIR, log
from bench.report.concurrency import concurrency_section
from bench.report.controls import controls_section
from bench.report.documents import documents_section
from bench.report.embedding import embedding_pool_section
from bench.report.footprint import coldstart_section, memory_section
from bench.report.keyword_scale import keyword_scale_section
from bench.report.korean_sets import korean_sets_section
from bench.report.layout import HISTORY, REPORT, Report, header
from bench.report.mutation import mutation_section
from bench.report.named_clauses import named_clauses_section
from bench.report.noisy_neighbour import noisy_neighbour_section
from bench.report.page_signal import page_signal_section
from bench.report.perf import index_command_section, quota_section
from bench.report.quality import quality_section, questions_section
from bench.report.relevance import relevance_section
from bench.report.repos import incremental_section, repos_section
from bench.report.rerank import rerank_section
from bench.report.resources import resources_section
from bench.report.runtime import indexing_section, latency_section
from bench.report.scale import scale_section
from bench.report.scope_recall import scope_recall_section
from bench.report.shared_library import shared_section
from bench.report.synonyms import synonyms_section

__all__ = ["SECTIONS", "write_report"]

SECTIONS: tuple[Callable[[Report], None], ...] = (
    quality_section,
    questions_section,
    korean_sets_section,
    page_signal_section,
    indexing_section,
    latency_section,
    rerank_section,
    coldstart_section,
    memory_section,
    documents_section,
    embedding_pool_section,
    quota_section,
    index_command_section,
    mutation_section,
    scale_section,
    scope_recall_section,
    repos_section,
    incremental_section,
    shared_section,
    controls_section,
    named_clauses_section,
    synonyms_section,
    relevance_section,
    noisy_neighbour_section,
    keyword_scale_section,
    resources_section,
    concurrency_section,
)
"""The current sections' generators, in reading order. A new benchmark's generator goes
last; one whose section a later one supersedes leaves this list and ``bench/report/``
(its text, as last generated, is appended to ``bench/results/history.md``)."""


def write_report(output: Path = REPORT, history: Path = HISTORY) -> None:
    """Write ``output`` (REPORT.md) and the plots; ``history`` is the frozen file it links."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    report = Report(output, history)
    for section in SECTIONS:
        section(report)
    text = header(report) + "\n" + "\n".join(report.sections)
    output.write_text(text, encoding="utf-8")
    log(f"wrote {output}")
