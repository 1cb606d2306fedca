"""``bench/REPORT.md`` section 10: a repository source synced incrementally
(``bench/runs/repo_sync.py``)."""

from __future__ import annotations

from typing import Any

from bench.common.environment import read_result
from bench.report.helpers import Report, _met, _provenance, _table

__all__ = ["repos_section", "section_text"]

NAME = "repo-sync"
TITLE = "## 10. Git repository sources: a 5,000-file repository synced incrementally"


def _row(label: str, run: dict[str, Any]) -> list[str]:
    return [
        label,
        f"{run['sync_s']:.2f}",
        f"{run['index_s']:.2f}",
        f"{run['total_s']:.2f}",
        str(run["written"]),
        str(run["unchanged"]),
        str(run["indexed_documents"]),
    ]


def section_text(result: dict[str, Any]) -> str:
    header = [
        "run",
        "sync s (fetch + mirror)",
        "index s",
        "total s",
        "files written",
        "unchanged",
        "documents indexed",
    ]
    rows = [
        _row("first sync", result["first"]),
        _row("one-file commit", result["one_file_commit"]),
        _row("nothing changed (baseline)", result["nothing_changed"]),
    ]
    return (
        f"{TITLE}\n\n"
        f"A repository of {result['files']} Markdown files on a loopback `git http-backend`, "
        "synced with dulwich (depth 1) into a bucket folder and indexed into the embedded store "
        "(hashing embedder), as `kb repo sync` does; then a commit that changes one file; then "
        "a sync with nothing changed, the fixed cost of a sync (the tree fetched at depth 1 "
        "and walked, the folder listed and fingerprinted by the index run).\n\n"
        + _table(header, rows)
        + f"\n\nThe one-file commit took {result['one_file_vs_first']:.3f}x the first sync's "
        "time and re-indexed one document. Locally the index run still reads every mirrored "
        "file to fingerprint it (most of its time); on AWS only the changed objects' S3 "
        "events reach the indexer. Each sync fetches the whole tree at depth 1 (no local "
        "object cache), so the fetch is paid every time; the writes are not.\n\n"
        + _provenance(result, NAME)
    )


def repos_section(report: Report) -> None:
    result = read_result(NAME)
    if result is None:
        report.add(f"{TITLE}\n\nMissing: run `nice -n 10 python -m bench repo-sync`.")
        return
    one = result["one_file_commit"]
    report.headlines.append(
        (
            f"one-file commit in a {result['files']}-file repository: documents re-indexed",
            "1",
            str(one["indexed_documents"]),
            _met(one["indexed_documents"] == 1 and one["written"] == 1),
        )
    )
    report.add(section_text(result))


INCREMENTAL = "repo-sync-incremental"
INCREMENTAL_TITLE = "## 10.1 Git repository sources: the incremental fetch"


def _bytes(value: float) -> str:
    return f"{value / 1024:.1f} KiB" if value >= 1024 else f"{int(value)} B"


def incremental_section_text(result: dict[str, Any]) -> str:
    incr, full = result["incremental"], result["full"]
    ratios = result["ratio_incremental_to_full"]
    header = [
        "sync",
        "incremental s (median)",
        "full s (median)",
        "ratio",
        "incremental fetched",
        "full fetched",
        "ratio",
    ]
    rows = []
    labels = {
        "first": "first sync",
        "one_file_commit": f"one-file commit ({result['rounds']} rounds)",
        "nothing_changed": "nothing changed",
    }
    for phase, label in labels.items():
        i, f = incr[phase], full[phase]
        ratio = ratios.get(phase, {})
        rows.append(
            [
                label,
                f"{i['sync_s_median']:.3f}",
                f"{f['sync_s_median']:.3f}",
                f"{ratio['sync_s']:.3f}x" if ratio else "-",
                _bytes(i["fetched_bytes_median"]),
                _bytes(f["fetched_bytes_median"]),
                f"{ratio['fetched_bytes']:.4f}x" if ratio else "-",
            ]
        )
    reindexed = [
        r["indexed_documents"] for r in result["indexed"] if r["phase"] == "one_file_commit"
    ]
    return (
        f"{INCREMENTAL_TITLE}\n\n"
        f"The {result['files']}-file repository of section 10 (loopback `git http-backend`), "
        "registered twice in two scopes and synced in the same run: **incremental** is the "
        "product (the second sync on tells the server the commit it holds, "
        "`have` + `shallow`, and fetches a thin pack of what changed, walking the new tree "
        "with the trees kept from the last sync); **full** is the baseline, the same code "
        "with its kept trees dropped before every sync, which is the fetch before it (the whole "
        "tree at depth 1 every time). Each round commits a one-file change and syncs both, "
        "the order alternating. Sync = fetch + mirror writes; fetched = what the Git server "
        "sent (refs and pack); ratio = incremental / full.\n\n"
        + _table(header, rows)
        + "\n\nEach one-file commit re-indexed "
        + ", ".join(str(n) for n in reindexed)
        + f" document(s) of the incremental scope, which held {result['files']} documents "
        "after every sync. On loopback the bytes cost little time; over a network the "
        "full fetch's pack is paid per sync and the incremental one's is a few KiB. The "
        "kept trees (`.kb@repos/.../<name>.trees`) are the only cache: blobs are never "
        'cached, the mirror has them (docs/sources.md, "Incremental fetch"). The machine '
        "was shared with other work while this ran: read the ratios, not the absolute "
        "times.\n\n" + _provenance(result, INCREMENTAL)
    )


def incremental_section(report: Report) -> None:
    result = read_result(INCREMENTAL)
    if result is None:
        report.add(
            f"{INCREMENTAL_TITLE}\n\nMissing: run "
            "`nice -n 10 python -m bench repo-sync-incremental`."
        )
        return
    report.add(incremental_section_text(result))
