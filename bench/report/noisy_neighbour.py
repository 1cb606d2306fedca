"""``bench/REPORT.md`` section 15: one agent's new one-line file while another agent's
50 MiB file and 40 uploads are indexed, this code and the commit before fair scheduling
(``bench/runs/noisy_neighbour.py``)."""

from __future__ import annotations

from typing import Any

from bench.common.environment import read_result
from bench.report.helpers import Report, _met, _provenance, _table

__all__ = ["noisy_neighbour_section"]

NAME = "noisy-neighbour"
TITLE = "## 15. Noisy neighbour: a new file's wait while another agent indexes a big load"
_LABELS = {"new": "this code", "old": "before fair scheduling"}


def _s(value: float | None, lower_bound: bool = False) -> str:
    if value is None:
        return "-"
    return f"{'>= ' if lower_bound else ''}{value:.2f}"


def _three(summary: dict[str, Any]) -> str:
    if not summary.get("tries"):
        return "-"
    bounds = summary.get("lower_bounds", [])
    return " / ".join(_s(summary[k], k in bounds) for k in ("p50_s", "p95_s", "max_s"))


def _label(key: str, version: dict[str, Any]) -> str:
    label = _LABELS.get(key, key)
    return f"{label} ({version['commit']})" if "commit" in version else label


def _neighbour_row(key: str, version: dict[str, Any]) -> list[str]:
    load, tail = version["load"], version.get("tail", {})
    ratio = version.get("p95_ratio")
    bound = ">= " if "p95_s" in load.get("lower_bounds", []) else ""
    not_run = f" (+{load['not_run']} not run)" if load.get("not_run") else ""
    swap = tail.get("at_big_swap") or []
    return [
        _label(key, version),
        _three(version["baseline"]),
        _three(load),
        f"{bound}{ratio}x" if ratio is not None else "-",
        f"{load['timed_out']} of {load['tries']}{not_run}",
        str(load.get("started_under_load", "-")),
        f"{tail.get('tries', 0)}: {_three(tail)}",
        ", ".join(_s(t["seconds"]) for t in swap) or "-",
    ]


def _load_row(key: str, version: dict[str, Any]) -> list[str]:
    puts, drain, cpu = version["puts"], version["drain"], version["server_cpu"]
    progress = version.get("big_progress_seen")
    seen = (
        f"{progress['document']}: {progress['chunks_done']} of ~{progress['chunks_estimated']}"
        if progress
        else "no"
    )
    lock = version.get("write_lock", {})
    return [
        _label(key, version),
        f"{puts['202']} / {puts['429']} / {sum(puts['other'].values())}",
        seen,
        _s(drain.get("big_searchable_s")),
        _s(drain.get("all_searchable_s")),
        f"{drain['new_documents']['manuals']} + {drain['new_documents']['uploads']}",
        _s(lock.get("max_wait_s")),
        f"{cpu['cpu_s']:.0f} ({cpu.get('threads', {}).get('runqueue_wait_s', '-')})",
        f"{cpu['until_drained_cores']:.2f} of {cpu.get('machine_busy_cores', '?')}",
    ]


def _findings(new: dict[str, Any], old: dict[str, Any] | None) -> str:
    """What the figures say about where the time goes, from the result itself."""
    lock, tail, drain = new.get("write_lock", {}), new.get("tail", {}), new["drain"]
    longest = lock.get("longest") or []
    swap = tail.get("at_big_swap") or []
    text = (
        "A new file waits for the next 1 s poll, then for its own one-file job (the other "
        "worker is free), so the idle and loaded figures are both about the poll."
    )
    if longest:
        text += (
            f" The write lock's longest wait, {longest[0]['wait_s']:.2f} s at "
            f"{longest[0]['at_s']:.0f} s into the load (the big file was counted at "
            f"{_s(drain.get('big_searchable_s'))} s), is what the big file's swap (one "
            "short transaction moving its staged chunks in) cost the other scopes"
        )
        if len(longest) > 1:
            text += (
                f" (the next longest: {longest[1]['wait_s']:.2f} s at {longest[1]['at_s']:.0f} s)"
            )
        text += "."
    if swap:
        text += (
            f" The try under way at that swap took {swap[0]['seconds']:.2f} s, the slowest "
            f"of the {tail['tries']} tail tries."
        )
    if old is not None:
        old_lock = old.get("write_lock", {})
        text += (
            f" Before, every change waited for the poll that found it to finish, the whole "
            f"big file written in one transaction (the write lock held up to "
            f"{_s(old_lock.get('max_wait_s'))} s)."
        )
        cpu_new, cpu_old = new["server_cpu"], old["server_cpu"]
        text += (
            f" The load drained in {_s(drain.get('all_searchable_s'))} s on this code "
            f"({cpu_new['cpu_s']:.0f} CPU s) and {_s(old['drain'].get('all_searchable_s'))} s "
            f"before ({cpu_old['cpu_s']:.0f} CPU s); the servers' threads waited "
            f"{cpu_new.get('threads', {}).get('runqueue_wait_s', '?')} and "
            f"{cpu_old.get('threads', {}).get('runqueue_wait_s', '?')} s for a core other "
            "work held, so these wall times follow the shared machine's load."
        )
    return text


def _loads(result: dict[str, Any]) -> str:
    parts = []
    for key, version in result["versions"].items():
        loads = version.get("load_average", {})
        start, end = loads.get("load_start"), loads.get("tries_end")
        if start and end:
            label = _LABELS.get(key, key)
            parts.append(f"{label}: {start[0]:.2f} as the load started, {end[0]:.2f} after")
    cpus = result.get("machine", {}).get("cpus", "?")
    return "; ".join(parts) + f" (1-minute load average, {cpus} CPUs)"


def noisy_neighbour_section(report: Report) -> None:
    result = read_result(NAME)
    if result is None:
        report.add(f"{TITLE}\n\nMissing: `python -m bench noisy-neighbour`.")
        return
    setup, versions = result["setup"], result["versions"]
    new, old = versions["new"], versions.get("old")
    target = result["target_p95_s"]
    measured = f"{new['load']['p95_s']:.2f} s"
    if old is not None:
        bound = ">= " if "p95_s" in old["load"].get("lower_bounds", []) else ""
        measured += f" (before, same run: {bound}{old['load']['p95_s']:.1f} s)"
    big_mib = setup["big_file_bytes"] / 2**20
    load_text = f"{big_mib:.0f} MiB + {setup['puts']} x {setup['put_bytes'] // 2**20} MiB"
    report.headlines.append(
        (
            "kb serve: a neighbour's new one-line file searchable while another agent "
            f"indexes {load_text}, p95",
            f"<= {target:g} s",
            measured,
            _met(bool(result["met"])),
        )
    )
    neighbour_header = [
        "version",
        "idle p50 / p95 / max s",
        "under load p50 / p95 / max s",
        "p95 / idle p95",
        "gave up",
        "started while indexing",
        "tail: tries: p50 / p95 / max s",
        "try at the big swap s",
    ]
    load_header = [
        "version",
        "PUTs 202 / 429 / other",
        "big file's progress seen",
        "big file searchable s",
        "all searchable s",
        "new documents",
        "longest write-lock wait s",
        "server CPU s (waiting for a CPU s)",
        "server cores of machine's busy",
    ]
    keys = list(versions)
    refused = new.get("refused_with_default_quotas")
    quota = (
        f"The default write quotas refused {refused} PUTs (429), so this code's run was "
        "repeated with `--max-write-mib-per-minute 0`."
        if refused
        else "The default write quotas (120 requests, 256 MiB a minute) refused none."
    )
    report.add(
        f"""{TITLE}

The real `kb serve ROOT --allow-writes` (embedded store, hashing embedder, the default
1 s poll), started fresh for each version on a folder of three scopes
(`uploader/manuals`, `uploader/uploads`, `neighbour/notes`). The neighbour copies a new
one-line file into `neighbour/notes/` and searches for its one keyword every
{setup["search_every_s"] * 1000:.0f} ms until it is found, {setup["tries"]} times with a
seeded 0-1 s pause before each: first on the idle server, then while the other agent's
load is indexed: a {big_mib:.0f} MiB text file copied into `uploader/manuals/` and
{setup["puts"]} parallel PUTs of {setup["put_bytes"] // 2**20} MiB (the largest body the
route takes) into `uploader/uploads`. A try gives up after {setup["give_up_s"]:.0f} s
(counted as that, so a p95 with one is a lower bound) and none starts after
{setup["cap_s"]:.0f} s of load. {quota} After the measured tries the neighbour keeps
trying until the load is searchable (the *tail*), so the big document's swap is covered
too. Same run, this code first.

{_table(neighbour_header, [_neighbour_row(k, versions[k]) for k in keys])}

"Started while indexing": tries begun before every upload was searchable (the old code
holds a try until its poll is done, so few of its tries start while it indexes). "Try at
the big swap": the tail try under way when the big file became searchable.

{_table(load_header, [_load_row(k, versions[k]) for k in keys])}

"Searchable": seconds from the load's start until the scope's status counted the new
documents (one transaction writes the document row and swaps its chunks in); a search
for each file's own keyword found every one afterwards. "Longest write-lock wait": a
connection of the benchmark's own took the index file's write lock every 0.1 s
(`BEGIN IMMEDIATE`, `ROLLBACK`); the longest it waited is what another scope's write
could wait at worst (to about 0.1 s: SQLite's busy handler sleeps). "Server CPU": its
CPU seconds from the load's start until drained, and (`schedstat`) the seconds its
threads were runnable but waited for a core that other work on the machine held.
"Server cores": its CPU seconds over that wall time, next to the cores the whole machine
kept busy meanwhile.

**Neighbour p95 under load {new["load"]["p95_s"]:.2f} s** (target <= {target:g} s:
{_met(bool(result["met"]))}), {new["p95_ratio"]}x the idle p95 measured just before.
{_findings(new, old)} Load: {_loads(result)}.

{_provenance(result, NAME)}"""
    )
