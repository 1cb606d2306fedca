"""What one indexing run did, and the problems it records: the pipeline's bookkeeping.

``RunReport`` accumulates what one ``index``/``reindex``/``upsert`` call wrote, deleted,
skipped and failed, and becomes its ``IndexResult``. Problems are visible: every document
skipped for a reason (too large, unsupported, corrupt, encrypted, over ``max_documents``,
left out by the source) or failed is recorded with ``WriteSession.record_problem``
(``record_problem``; the status lists them); "unchanged" and "stale version" are not
problems. A later successful write or delete clears it. ``WriteSession.failures``
reported at commit are recorded after the session (``record_all``) and count as errors,
not as indexed documents, except a write another writer's won at commit ("stale
version", "superseded": ``Indexer.upsert`` reports it skipped).

Files no pattern selects are visible too, as a count per extension: a listing's
``unread`` counts (``knowledge.ingest.sources.Listing``, read by ``listing_unread``) are
written with ``WriteSession.record_unread`` (``IndexStatus.unread_files``) and returned in
``IndexResult.unread_files``, never one problem per image of a repository. A store that
cannot record a problem is logged, not fatal: the run's own report still has it; only
``StoreUnavailableError`` stops a run (``reraise_if_unavailable``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from knowledge.core.errors import KnowledgeError, StoreUnavailableError
from knowledge.core.model import FileProblem, IndexOptions, IndexResult, capped_unread
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SYNONYMS_FILE, SourceDocument
from knowledge.ingest.sources import CANNOT_LIST, SynonymsFile, under_unlisted_folder
from knowledge.ingest.synonyms_file import apply_synonyms
from knowledge.stores.protocol import IndexWriter, WriteSession

__all__ = [
    "RunReport",
    "fail",
    "listing_problems",
    "listing_unread",
    "over_limit",
    "over_limit_problem",
    "record_all",
    "record_problem",
    "reraise_if_unavailable",
]

logger = logging.getLogger("knowledge.ingest.pipeline")


@dataclass
class RunReport:
    """Accumulates what one index/reindex/upsert call did (module docstring)."""

    started: float = field(default_factory=time.perf_counter)
    written: dict[str, int] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    skipped: list[FileProblem] = field(default_factory=list)
    errors: list[FileProblem] = field(default_factory=list)
    warnings: list[FileProblem] = field(default_factory=list)
    tokens: int = 0
    embedded: int = 0
    reused: int = 0
    unread: dict[str, int] = field(default_factory=dict)

    def take_listing_problems(self, listing: object, session: WriteSession) -> None:
        skipped, errors = listing_problems(listing)
        for problems, target in ((skipped, self.skipped), (errors, self.errors)):
            for problem in problems:
                target.append(problem)
                record_problem(session, problem.path, problem.reason)
        self._take_synonyms(listing, session)
        unread = listing_unread(listing)
        if unread is not None:
            self.unread = unread
            try:
                session.record_unread(unread)
            except KnowledgeError as exc:
                reraise_if_unavailable(exc)
                logger.warning("could not record the unread files (%s): %s", unread, exc)

    def _take_synonyms(self, listing: object, session: WriteSession) -> None:
        """Store what the listing found of the scope's synonyms file (``ingest.synonyms_file``);
        nothing when it does not look for one, or could not list the scope's folder."""
        found = getattr(listing, "synonyms", None)
        if not isinstance(found, SynonymsFile) or under_unlisted_folder(
            listing_problems(listing)[1]
        )(SYNONYMS_FILE):
            return
        try:
            problem = apply_synonyms(session, found)
        except KnowledgeError as exc:
            reraise_if_unavailable(exc)
            logger.warning("could not store the synonyms: %s", exc)
            problem = FileProblem(SYNONYMS_FILE, f"synonyms not stored: {exc}")
        if problem is not None:
            self.errors.append(problem)

    def skip(self, session: WriteSession, problem: FileProblem) -> None:
        self.skipped.append(problem)
        record_problem(session, problem.path, problem.reason)

    def result(self, failures: Sequence[FileProblem]) -> IndexResult:
        failed = {problem.path for problem in failures}
        indexed = {path: n for path, n in self.written.items() if path not in failed}
        return IndexResult(
            indexed_documents=len(indexed),
            indexed_chunks=sum(indexed.values()),
            deleted_documents=len(self.deleted - failed),
            duration_ms=(time.perf_counter() - self.started) * 1000.0,
            skipped=tuple(self.skipped),
            errors=(*self.errors, *failures),
            embedding_tokens=self.tokens,
            warnings=tuple(self.warnings),
            embedded_chunks=self.embedded,
            reused_chunks=self.reused,
            unread_files=self.unread,
        )


def over_limit(taken: int, options: IndexOptions) -> bool:
    return options.max_documents is not None and taken >= options.max_documents


def over_limit_problem(document: SourceDocument, options: IndexOptions) -> FileProblem:
    return FileProblem(
        document.path,
        f"over max_documents ({options.max_documents}): not indexed, and nothing was deleted; "
        "raise or unset max_documents to index the whole scope",
    )


def fail(session: WriteSession, run: RunReport, problem: FileProblem) -> None:
    run.errors.append(problem)
    record_problem(session, problem.path, problem.reason)


def listing_unread(listing: object) -> dict[str, int] | None:
    """The files a source's listing found and no pattern selects, by extension
    (``knowledge.ingest.sources.Listing.unread``, capped by ``model.capped_unread``); ``None``
    for a listing that does not count them, or that could not list a folder (its counts
    are partial): the store's counts then stay."""
    counts = getattr(listing, "unread", None)
    if not isinstance(counts, Mapping):
        return None
    if any(problem.reason.startswith(CANNOT_LIST) for problem in listing_problems(listing)[1]):
        return None
    return capped_unread({str(k): int(v) for k, v in counts.items() if isinstance(v, int)})


def listing_problems(listing: object) -> tuple[list[FileProblem], list[FileProblem]]:
    """``(skipped, errors)``: what a source's listing left out and found wrong while
    listing (``knowledge.ingest.sources.Listing``); none for a listing that reports nothing."""

    def reported(name: str) -> list[FileProblem]:
        problems = getattr(listing, name, None)
        if not isinstance(problems, list):
            return []
        return [problem for problem in problems if isinstance(problem, FileProblem)]

    return reported("skipped"), reported("errors")


def record_problem(session: WriteSession, path: str, reason: str) -> None:
    """Remember the problem in the store (the status lists it); a store that cannot is
    logged, not fatal: the run's own report still has it."""
    try:
        session.record_problem(path, reason)
    except KnowledgeError as exc:
        reraise_if_unavailable(exc)
        logger.warning("could not record the problem of %s (%s): %s", path, reason, exc)


def record_all(writer: IndexWriter, scope: KnowledgeScope, problems: Sequence[FileProblem]) -> None:
    """Record problems known only after a session ended (``WriteSession.failures``)."""
    if not problems:
        return
    try:
        with writer.write_session(scope) as session:
            for problem in problems:
                record_problem(session, problem.path, problem.reason)
    except KnowledgeError as exc:
        reraise_if_unavailable(exc)
        logger.warning("could not record %d problem(s) in %s: %s", len(problems), scope, exc)


def reraise_if_unavailable(exc: BaseException) -> None:
    if isinstance(exc, StoreUnavailableError):
        raise exc
