"""``bench/REPORT.md`` section 7.1 (embedding at the provider's quota,
``bench/embedding_pool.py --only-quota``)."""

from __future__ import annotations

from typing import Any

from bench.environment import read_result
from bench.report_common import Report, _met, _provenance, _table
from knowledge.ingest.lookahead import DEFAULT_WINDOW, MAX_AHEAD_BYTES

__all__ = ["quota_section"]

QUOTA = "embedding-quota"
QUOTA_TARGET = 150.0


def _load(result: dict[str, Any]) -> str:
    machine = result.get("machine", {})
    load = machine.get("load_average")
    if not load:
        return "not recorded"
    return f"{load[0]:.2f} (1 min), {load[1]:.2f} (5 min) on {machine.get('cpus', '?')} CPUs"


def quota_section(report: Report) -> None:
    title = "## 7.1 Embedding at the provider's quota (Titan-like, 429 beyond 24 in flight)"
    result = read_result(QUOTA)
    if result is None:
        report.add(f"{title}\n\nMissing: `python -m bench embedding-pool --only-quota`.")
        return
    base, new = result["baseline"], result["adaptive"]
    rows = [
        [
            label,
            run["seconds"],
            run["chunks_per_s"],
            run["requests"],
            run["throttled"],
            run["max_in_flight"],
            run["limit_at_end"],
            run["errors"],
            run["wrong_or_missing_vectors"],
        ]
        for label, run in (("before: 16 in flight, one document at a time", base),
                           ("product: adaptive limit + lookahead", new))
    ]  # fmt: skip
    header = ["run", "seconds", "texts/s", "requests", "429s", "most in flight"]
    header += ["limit at the end", "errors", "lost or wrong vectors"]
    lost = new["errors"] + new["wrong_or_missing_vectors"] + (base["chunks"] - new["chunks"])
    ok = new["chunks_per_s"] >= QUOTA_TARGET and lost == 0
    report.headlines.append(
        (
            "kb index against a Titan-like quota (80 ms, 429 beyond 24 in flight), texts/s",
            f">= {QUOTA_TARGET:.0f}, nothing lost",
            f"{new['chunks_per_s']:.0f} (before, same run: {base['chunks_per_s']:.0f}); "
            f"{lost} lost, {new['throttled']} throttled",
            _met(ok),
        )
    )
    report.add(
        f"""{title}

`kb index`'s path (the embedded store, `Indexer.index`) over {result["documents_sampled"]}
man pages ({new["chunks"]} chunks), embedding through the real `BedrockEmbeddingClient`
(boto3) against the fake on loopback: {result["latency_per_call_s"] * 1000:.0f} ms a call,
one text a call, and a 429 (no `Retry-After`, as Bedrock's `ThrottlingException`) for a
call that arrives with {result["max_in_flight"]} others in flight. Before = what the
product did: at most 16 calls in flight, one document after another (the same code with
`concurrency=16` and `lookahead=0`). Product = the adaptive limit
(`knowledge.embedding.aimd`: from 16, +1/limit per answer while in use, x0.7 on a
throttle) under a ceiling of 64, and the next {DEFAULT_WINDOW} documents (of at most
{MAX_AHEAD_BYTES // 2**20} MiB together) read, chunked and embedded while one is written
(`knowledge.ingest.lookahead`). Every stored vector is checked against
the one the fake made for its chunk's text. Same run, in this order.

{_table(header, rows, "{:.1f}")}

**{new["chunks_per_s"]:.0f} texts/s** (target >= {QUOTA_TARGET:.0f}: {_met(ok)}),
{result["speedup"]:.2f}x the old pipeline's; the quota allows about
{result["max_in_flight"] / result["latency_per_call_s"]:.0f}. What is left: a 429 without
`Retry-After` cuts the limit and holds back only the call that got it, for its jittered
backoff, but the writer takes documents in order, so that document holds the ones after
it (the window of documents ahead is what keeps the quota busy meanwhile: 8 gave about
155 texts/s, 16 about 170); and the client's own work per boto3 call (signing, parsing;
one core under the GIL) bounds what is in flight on this 2-core machine, so the figure
moves with the machine's load (load average when the run ended: {_load(result)}).

{_provenance(result, QUOTA)}"""
    )
