"""What the folder watcher does with one key, and how it says so.

``AppliedChange`` is one key's outcome (``indexed``, ``unchanged``, ``deleted``,
``ignored``, ``rejected``, ``failed``, with why); ``upsert_key`` and ``delete_key`` apply
one file's change to the store and turn any failure into a ``failed`` change (the
watcher retries it next poll). ``LOG_LEVELS`` is the level each outcome is logged at,
``log_result`` logs a start-up index's result, and ``shown`` escapes a path for a log
line. They log under the watcher's logger (``knowledge.local.watcher``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Literal

from knowledge.core.model import IndexResult
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import delete_document, upsert_document
from knowledge.stores.protocol import KnowledgeStore

__all__ = [
    "LOG_LEVELS",
    "AppliedChange",
    "ChangeAction",
    "delete_key",
    "log_result",
    "shown",
    "upsert_key",
]

logger = logging.getLogger("knowledge.local.watcher")  # one log for what the watcher does

ChangeAction = Literal["indexed", "unchanged", "deleted", "ignored", "rejected", "failed"]

LOG_LEVELS: dict[str, int] = {
    "indexed": logging.INFO,
    "deleted": logging.INFO,
    "unchanged": logging.INFO,
    "ignored": logging.DEBUG,  # not a document (a .pdf without a pattern, say): no news
    "rejected": logging.WARNING,
    "failed": logging.WARNING,
}


@dataclass(frozen=True, slots=True)
class AppliedChange:
    """What the watcher did with one key, and why."""

    key: str
    action: ChangeAction
    detail: str = ""


def upsert_key(
    store: KnowledgeStore, key: str, scope: KnowledgeScope, document: SourceDocument
) -> AppliedChange:
    """Upsert ``document`` (the file at ``key``): what was done, a failure as ``failed``."""
    try:
        result = upsert_document(store, scope, document)
    except Exception as exc:
        logger.debug("upsert of %s failed", key, exc_info=exc)
        return AppliedChange(key, "failed", str(exc) or type(exc).__name__)
    if result.errors:
        return AppliedChange(key, "failed", "; ".join(p.reason for p in result.errors))
    if result.indexed_documents:
        return AppliedChange(key, "indexed", f"{result.indexed_chunks} chunks")
    reason = "; ".join(p.reason for p in result.skipped) or "unchanged"
    return AppliedChange(key, "unchanged", reason)


def delete_key(store: KnowledgeStore, key: str, scope: KnowledgeScope, path: str) -> AppliedChange:
    """Delete ``path`` (the file at ``key`` is gone): what was done, a failure as ``failed``."""
    try:
        removed = delete_document(store, scope, path)
    except Exception as exc:
        logger.debug("delete of %s failed", key, exc_info=exc)
        return AppliedChange(key, "failed", str(exc) or type(exc).__name__)
    return AppliedChange(key, "deleted" if removed else "ignored", "" if removed else "not indexed")


def shown(path: str) -> str:
    """``path`` for a log line: control characters escaped, so a file name cannot forge one."""
    return path if path.isprintable() else json.dumps(path, ensure_ascii=False)[1:-1]


def log_result(scope: KnowledgeScope, result: IndexResult) -> None:
    logger.info(
        "indexed %s: %d documents (%d chunks), %d unchanged or skipped, %d deleted, %d errors",
        scope,
        result.indexed_documents,
        result.indexed_chunks,
        result.skipped_documents,
        result.deleted_documents,
        len(result.errors),
    )
    for problem in result.skipped:
        if problem.reason.startswith("symlink"):
            logger.warning("skipped %s/%s: %s", scope, shown(problem.path), problem.reason)
    for problem in result.errors:
        logger.warning("not indexed %s/%s: %s", scope, shown(problem.path), problem.reason)
