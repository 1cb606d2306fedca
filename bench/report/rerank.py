"""``bench/REPORT.md``'s reranking section: what the optional reranking stage costs a
search (``bench/runs/rerank.py``)."""

from __future__ import annotations

from bench.common.environment import read_result
from bench.report.helpers import Report, _provenance, _table

__all__ = ["rerank_section"]


def rerank_section(report: Report) -> None:
    result = read_result("rerank")
    title = "## 3.1 Reranking cost (Bedrock Rerank through boto3, fake endpoint on loopback)"
    if result is None:
        report.add(f"{title}\n\nMissing: run `python -m bench rerank`.")
        return
    rows = []
    for run in result["runs"].values():
        rows.append(
            [
                run["top_n"],
                f"{run['plain_ms']['p50']:.1f}",
                f"{run['rerank_ms']['p50']:.1f}",
                f"{run['ratio_p50']:.2f}x",
                f"{run['plain_ms']['p95']:.1f}",
                f"{run['rerank_ms']['p95']:.1f}",
                f"{run['ratio_p95']:.2f}x",
                f"{run['rerank_call_ms']['p50']:.1f}",
                f"{run['direct_call_ms']['p50']:.1f}" if "direct_call_ms" in run else "-",
                run["fallbacks"],
            ]
        )
    parts = [
        title,
        "Hybrid searches of the man-pages corpus (hashing embedder, OpenSearch node) through "
        "`KnowledgeApi.search`, `max_results=5`, without and with the reranking stage "
        "(`knowledge.reranking`, docs/reranking.md); per query both, back to back in "
        "alternating order. The reranker is the real `BedrockReranker` (boto3 builds, "
        "signs (SigV4) and sends the `Rerank` request and parses the answer) talking to "
        "`tests/support/fake_rerank.py` on 127.0.0.1, which answers at once: the figures are the "
        "product's own cost of the stage (the larger candidate page it asks the store for, "
        "the request, the thread hand-off), not a model's. A real model adds its inference "
        "and the round trip to AWS on top, and what reranking gains in MRR can only be "
        "measured there: no benchmark here can, so the stage stays off by default. Under "
        "load, like 3c (load average 11-20, the benchmark niced): the call itself (boto3 "
        'building, signing and parsing, the loopback round trip; the "direct" column is '
        "the same call made in the benchmark's thread) is most of the added time, and it "
        "grows with the candidates sent; the stage runs it on a thread of its own so that "
        "a search can stop waiting at its deadline, and that hand-off is the difference "
        "between the two call columns (each thread wake-up waits for a CPU on this "
        "machine; a Lambda function has its CPU to itself).",
        _table(
            [
                "top N",
                "plain p50",
                "rerank p50",
                "ratio p50",
                "plain p95",
                "rerank p95",
                "ratio p95",
                "stage's call p50",
                "same call, direct, p50",
                "fallbacks",
            ],
            rows,
        ),
        _provenance(result, "rerank"),
    ]
    report.add("\n\n".join(parts))
