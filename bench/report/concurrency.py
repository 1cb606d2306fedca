"""``bench/REPORT.md`` section 18: ``kb serve --workers N`` under concurrent clients
(``bench/runs/concurrency.py``): searches/s of 16 clients over one client's with 1 and 2
worker processes, and the p95 of a search in a ~120k-chunk scope under 16 clients."""

from __future__ import annotations

from typing import Any

from bench.common.environment import read_result
from bench.report.helpers import Report, _load_note, _met, _provenance, _table

__all__ = ["concurrency_section"]

NAME = "concurrency"
OTHER_RUNS = ("concurrency-loaded",)
"""Runs of the same command on a busier machine, summed up after the table."""
TITLE = "## 18. Every core: `kb serve --workers N` under concurrent clients"
_BUSY_ENOUGH = 1.6
"""Cores the servers must have kept busy for the ratios to say what two processes give."""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _ratio(value: float | None, *, bold: bool = False) -> str:
    if value is None:
        return "-"
    return f"**{value:.2f}x**" if bold else f"{value:.2f}x"


def _cores(level: dict[str, Any]) -> str:
    cores = level.get("server_cores")
    return "-" if cores is None else f"{cores:.2f}"


def _load(level: dict[str, Any]) -> str:
    return f"{level['load_min']:.1f}-{level['load_max']:.1f}"


def _over_one_worker(result: dict[str, Any], run: dict[str, Any]) -> float | None:
    """The run's many-client searches/s over the same mode's with one worker."""
    base = next((r for r in result["runs"] if r["workers"] == 1 and r["mode"] == run["mode"]), None)
    if base is None or not base["levels"][1]["searches_per_s"]:
        return None
    return float(run["levels"][1]["searches_per_s"] / base["levels"][1]["searches_per_s"])


def _throughput_rows(result: dict[str, Any]) -> list[list[str]]:
    rows = []
    for run in result["runs"]:
        one, many = run["levels"]
        over = _over_one_worker(result, run)
        rows.append(
            [
                str(run["workers"]),
                run["mode"],
                f"{one['searches_per_s']:.1f}",
                f"{many['searches_per_s']:.1f}",
                _ratio(run["ratio"], bold=run["workers"] > 1),
                "-" if over is None else f"{over:.2f}x",
                f"{_ms(one['p50_ms'])} / {_ms(one['p95_ms'])}",
                f"{_ms(many['p50_ms'])} / {_ms(many['p95_ms'])}",
                str(one["errors"] + many["errors"]),
                f"{_cores(one)}; {_cores(many)}",
                f"{_load(one)}; {_load(many)}",
            ]
        )
    return rows


def _large_rows(large: dict[str, Any]) -> list[list[str]]:
    rows = []
    levels = [
        (run["workers"], level)
        for run in large["runs"]
        for level in (run.get("one_client"), run["level"])
        if level is not None
    ]
    for workers, level in levels:
        rows.append(
            [
                str(workers),
                str(level["clients"]),
                f"{level['searches_per_s']:.1f}",
                _ms(level["p50_ms"]),
                _ms(level["p95_ms"]),
                _ms(level["p99_ms"]),
                str(level["errors"]),
                _cores(level),
                f"{level['client_cpu_s']:.1f} of {level['seconds']:.0f}",
                _load(level),
            ]
        )
    return rows


def _cores_note(result: dict[str, Any], which: str = "this") -> str:
    """How many cores the servers got at most: what the ratios can show on this machine."""
    levels = [level for run in result["runs"] for level in run["levels"]]
    for run in (result.get("large") or {}).get("runs", []):
        levels += [level for level in (run.get("one_client"), run["level"]) if level]
    cores = [level["server_cores"] for level in levels if level.get("server_cores") is not None]
    if not cores:
        return ""
    text = (
        f"In {which} run the servers' processes kept at most {max(cores):.2f} of the 2 cores busy"
    )
    if max(cores) >= _BUSY_ENOUGH:
        return text + "."
    return text + (
        ": other work on the shared machine held the rest, so no server could run two "
        "searches at once for long, and the ratios measure the share of the machine each "
        "server got more than what a second process adds."
    )


def concurrency_section(report: Report) -> None:
    result = read_result(NAME)
    if result is None:
        report.add(f"{TITLE}\n\nMissing: `python -m bench concurrency`.")
        return
    clients, target = result["clients"], result["target_ratio"]
    two = [r for r in result["runs"] if r["workers"] == 2]
    one = {r["mode"]: r for r in result["runs"] if r["workers"] == 1}
    measured = ", ".join(
        f"{r['mode']} {_ratio(r['ratio'])} (1 worker: {_ratio(one[r['mode']]['ratio'])}; "
        f"{clients} clients "
        f"{_over_one_worker(result, r):.2f}x 1 worker's)"
        for r in two
        if r["mode"] in one
    )
    report.headlines.append(
        (
            f"kb serve --workers 2: searches/s of {clients} clients over 1 client's "
            f"({result['corpus']['chunks']:,}-chunk scope)",
            f">= {target:g}x",
            measured,
            _met(bool(result["met"]["ratio"])),
        )
    )
    large = result.get("large")
    large_text = ""
    if large is not None:
        by_workers = {r["workers"]: r["level"] for r in large["runs"]}
        one_client = (large["runs"][-1].get("one_client") or {}).get("searches_per_s")
        gain = (
            f"; {clients} clients {by_workers[2]['searches_per_s'] / one_client:.2f}x one "
            "client's searches/s"
            if one_client
            else ""
        )
        p95_target = result["target_p95_s"]
        report.headlines.append(
            (
                f"kb serve --workers 2: search p95 under {clients} clients in a "
                f"{large['chunks']:,}-chunk scope (keyword)",
                f"<= {p95_target:g} s",
                f"{by_workers[2]['p95_ms'] / 1000:.2f} s (1 worker: "
                f"{by_workers[1]['p95_ms'] / 1000:.2f} s){gain}",
                _met(bool(result["met"]["p95"])),
            )
        )
        large_header = [
            "workers",
            "clients",
            "searches/s",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "errors",
            "server cores",
            "client CPU s of wall s",
            "load",
        ]
        large_text = f"""

The large scope: {large["chunks"]:,} chunks in {large["documents"]:,} documents
(`bench/runs/keyword_scale.py`'s `many` shape, its store copied once under
`bench/data/concurrency/`), 1 client, then {clients} clients, each for
{result["large_duration_s"]:g} s in the same rounds, keyword mode, {large["queries"]:,} queries
of 1 to 6 words made by that benchmark's generator, in turn (few repeat within a level):

{_table(large_header, _large_rows(large))}"""
    header = [
        "workers",
        "mode",
        "1 client /s",
        f"{clients} clients /s",
        "ratio",
        f"{clients} clients vs 1 worker",
        "1 client p50 / p95 ms",
        f"{clients} clients p50 / p95 ms",
        "errors",
        "server cores (1; N)",
        "load (1; N)",
    ]
    report.add(
        f"""{TITLE}

The real `kb serve` (embedded store, hashing embedder) over one scope of
{result["corpus"]["documents"]:,} generated Markdown files ({result["corpus"]["chunks"]:,}
chunks), two servers running side by side: `--workers 1` (one process: the baseline) and
`--workers 2` (the primary process and one worker accepting on the same port). Per mode,
1 client and then {clients} clients send searches back to back for
{result["duration_s"]:g} s each, in {result.get("rounds", 1)} rounds that take the two
servers in turn (so that other work on the shared machine weighs on both alike), every
client on its own keep-alive connection (threads of the benchmark's own process, which
spent a small share of a core: see the client CPU below). The ratio is the searches/s of
{clients} clients over one client's, same server, same run; "vs 1 worker" is the
{clients} clients' searches/s over those of `--workers 1` in the same mode, same run.
"Server cores": the CPU
seconds of the server's processes (primary and workers) over the level's wall time.

{_table(header, _throughput_rows(result))}{large_text}

One process runs its Python code on one core at a time (the GIL), however many threads
answer; a worker is a second process with its own store connection and caches, so two
searches run on the two cores, when the machine has two cores to give.
{_cores_note(result)} The load averages (1 minute) are shown per level (lowest-highest
around its rounds).
{_load_note(result)}

{_other_runs()}{_provenance(result, NAME)}"""
    )


def _other_runs() -> str:
    """One paragraph per other run (``OTHER_RUNS``): its ratios, p95, load and cores."""
    text = ""
    for name in OTHER_RUNS:
        other = read_result(name)
        if other is None:
            continue
        ratios = ", ".join(
            f"{run['mode']} {_ratio(run['ratio'])} with {run['workers']} "
            f"{'worker' if run['workers'] == 1 else 'workers'}"
            for run in other["runs"]
        )
        levels = [level for run in other["runs"] for level in run["levels"]]
        loads = [level["load_max"] for level in levels if level.get("load_max") is not None]
        large = {r["workers"]: r["level"] for r in (other.get("large") or {}).get("runs", [])}
        p95 = (
            f"; the large scope's p95 {large[2]['p95_ms'] / 1000:.2f} s with 2 workers "
            f"({large[1]['p95_ms'] / 1000:.2f} s with 1)"
            if 1 in large and 2 in large
            else ""
        )
        text += (
            f"The same command at a busier time (`bench/results/{name}.json`, load average "
            f"up to {max(loads):.1f}): {other['clients']} clients over 1 client's searches/s: "
            f"{ratios}{p95}. "
            f"{_cores_note(other, 'that')}\n\n{_provenance(other, name)}\n\n"
        )
    return text
