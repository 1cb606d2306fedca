"""``bench/REPORT.md`` section 10: a repository source synced incrementally
(``bench/repo_sync.py``)."""

from __future__ import annotations

from typing import Any

from bench.environment import read_result
from bench.report import Report, _met, _provenance, _table

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
