"""What the write session's sender thread does with one ``_bulk`` request.

The session (``session.py``) fills a ``RequestBuffer`` and hands each ``Request`` it
makes to a ``bulk.BulkSender``, whose one background thread runs ``RequestWriter.send``
on each, in order: the chunks (and deletes) of the request, then the removal of deleted
documents' records, then the records of the documents whose last chunk it carried
(``_mget``, then ``create`` or a conditional ``index``: steps 2 and 3 of
``generations``), then the deletes of the generations those records replaced, and the
point-back of a record whose old chunks could not be removed. What the session and the
thread both touch is a ``generations.WriteState``, under its lock.

``RequestWriter`` is the managed-domain variant (client ids, conditional writes);
``serverless.ServerlessWriter`` is the one for Serverless.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from knowledge.core.errors import KnowledgeError, StoreUnavailableError
from knowledge.core.identity import is_newer_version
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch.hits import item_reason
from knowledge.stores.opensearch.mapping import REPLACES
from knowledge.stores.opensearch.write import records
from knowledge.stores.opensearch.write.bulk import byte_length, item_ok, send_bulk, serialize
from knowledge.stores.opensearch.write.generations import (
    Commit,
    Switch,
    WriteState,
    generation_ids,
    record_states,
)
from knowledge.stores.protocol import REASON_STALE_VERSION, REASON_SUPERSEDED

if TYPE_CHECKING:
    from knowledge.stores.opensearch.connection import Connection

__all__ = ["Request", "RequestBuffer", "RequestWriter", "lost_to"]

logger = logging.getLogger("knowledge.stores.opensearch.write.session")  # the write session's log

_CONFLICT_ROUNDS = 5
"""How often a record changed by another writer (409) is read and decided again."""


@dataclass(slots=True)
class Request:
    """One ``_bulk`` request: serialized actions with their document paths, and the
    documents whose last chunk it carries."""

    actions: list[str]
    owners: list[str]
    commits: list[Commit]
    final: bool = False
    removals: list[tuple[str, str]] = field(default_factory=list)


class RequestBuffer:
    """The request being filled: bulk lines with the path each is for, the documents
    whose last chunk it holds, and the record removals that follow their chunks."""

    def __init__(self, max_actions: int, max_bytes: int) -> None:
        self._max_actions = max_actions
        self._max_bytes = max_bytes
        self.actions: list[str] = []
        self.owners: list[str] = []
        self.commits: list[Commit] = []
        self.removals: list[tuple[str, str]] = []  # (path, record id) after their chunks
        self._bytes = 0

    def full_for(self, size: int) -> bool:
        """Whether lines of ``size`` bytes have to go into the next request."""
        return bool(self.actions) and (
            len(self.actions) >= self._max_actions or self._bytes + size > self._max_bytes
        )

    def append(self, lines: str, size: int, path: str) -> None:
        self.actions.append(lines)
        self.owners.append(path)
        self._bytes += size

    def take(self, *, final: bool) -> Request | None:
        """The request (``None`` if there is nothing to send and it is not the last);
        the buffer is empty after."""
        if not self.actions and not self.commits and not self.removals and not final:
            return None
        request = Request(
            self.actions, self.owners, self.commits, final=final, removals=self.removals
        )
        self.clear()
        return request

    def clear(self) -> None:
        self.actions, self.owners, self.commits, self._bytes = [], [], [], 0
        self.removals = []

    def forget(self, path: str, start: int | None) -> None:
        """Drop the lines from ``start`` on (``None``: every line of ``path``)."""
        if start is not None:
            del self.actions[start:]
            del self.owners[start:]
        else:
            keep = [i for i, owner in enumerate(self.owners) if owner != path]
            self.actions = [self.actions[i] for i in keep]
            self.owners = [self.owners[i] for i in keep]
        self._bytes = sum(byte_length(lines) for lines in self.actions)


def lost_to(commit: Commit, stored: records.RecordState | None) -> str | None:
    """Why ``commit`` must not replace the record as it is now (``stored``, read in real
    time), or ``None`` to write it. A newer indexed version wins ("stale version"); a
    write with a ``Precondition`` (an upsert) that no longer holds loses too
    ("superseded": another writer committed since it read the document, with content
    that may be newer), unless both carry a version, whose order then decides."""
    indexed = None if stored is None else stored.generation
    if stored is not None and indexed is not None:
        if not is_newer_version(commit.version, stored.version):
            return (
                f"{REASON_STALE_VERSION}: {commit.version} is older than the indexed "
                f"{stored.version}"
            )
        if commit.version is not None and stored.version is not None:
            return None
    expected = commit.precondition
    if expected is None or expected.generation == indexed:
        return None
    return (
        f"{REASON_SUPERSEDED}: another write of the document was committed while this "
        "one was made; the indexed version is kept and the document is read again"
    )


def _replaced(commit: Commit, stored: records.RecordState | None) -> str | None:
    """The indexed generation ``commit``'s record write replaces (None: none, or its own)."""
    if stored is None or stored.generation in (None, commit.generation):
        return None
    return stored.generation


class RequestWriter:
    """Sends a session's requests (``send``, in the sender thread) on a managed domain:
    chunk ids of our own, records written under a condition (module docstring)."""

    def __init__(
        self,
        connection: Connection,
        scope: KnowledgeScope,
        index: str,
        state: WriteState,
        *,
        wait_for: bool,
    ) -> None:
        self.connection = connection
        self.scope = scope
        self.index = index
        self.state = state
        self.serializer: Any = None  # the connection's, set when the session is entered
        self._wait_for = wait_for
        self._refreshed = False

    def send(self, request: Request) -> None:
        """Send one request (in the sender thread): the chunks, then the records of the
        documents it completes, then the removal of what they replace."""
        scope = self.scope
        paths = list(dict.fromkeys([*request.owners, *(c.path for c in request.commits)]))
        action = f"index {len(paths)} document(s) in {scope}"
        retry = self.connection.retry
        refresh_now = "wait_for" if request.final and self._wait_for and self.state.wrote else None
        answers: list[dict[str, Any]] = []
        if request.actions:
            try:
                answers = send_bulk(
                    self.connection,
                    self.index,
                    request.actions,
                    action,
                    retry=retry,
                    refresh=refresh_now if not (request.commits or request.removals) else None,
                )
            except StoreUnavailableError:
                raise
            except KnowledgeError as exc:
                for path in paths:
                    self.state.reject(path, str(exc))
                answers = []
            self._refreshed = refresh_now is not None and not (request.commits or request.removals)
        for path, info in zip(request.owners, answers, strict=False):
            if info.get("op") == "delete":
                if not item_ok(info) and info.get("status") != 404:
                    self.state.reject(path, "removal: " + item_reason(info))
            elif not item_ok(info):
                self.state.reject(path, item_reason(info))
            elif info.get("op") == "index":
                self._accepted(path, info)
        if request.removals:
            self._remove_records(request.removals, action, refresh_now)
        if request.commits:
            switched: dict[str, Switch] = {}
            cleanup = self._commit_records(request.commits, action, refresh_now, switched)
            if cleanup:
                what = "removal of a replaced version"
                try:
                    failed = self.send_deletes(cleanup, action, refresh_now, what)
                except StoreUnavailableError:
                    raise
                except KnowledgeError as exc:
                    failed = {path for path, _ in cleanup}
                    for path in failed:
                        self.state.reject(path, f"{what}: {exc}")
                self._point_back(switched, failed, action)
            elif refresh_now is not None and not self._refreshed:
                # Rare: the records' request could not carry the wait (cleanup was expected).
                self.connection.refresh(self.index)

    def own_ids(self, commit: Commit) -> list[tuple[str, str]]:
        """The ids of the chunks ``commit``'s generation wrote (to remove it)."""
        ids = generation_ids(commit.document_id, commit.generation, commit.chunk_count)
        return [(commit.path, i) for i in ids]

    def send_deletes(
        self, deletes: Sequence[tuple[str, str]], action: str, refresh: str | None, what: str
    ) -> set[str]:
        """Delete the ids of ``deletes`` (``(path, id)``) in one bulk request; an item that
        fails (404, already gone, is fine) rejects its path with ``what: <reason>``.
        Returns the paths rejected here."""
        lines = [serialize(records.bulk_delete_action(i), self.serializer) for _, i in deletes]
        # The request carries the refresh (counted as sent even if it then fails: a failed
        # request fails the session or rejects its documents).
        self._refreshed = self._refreshed or refresh is not None
        answers = send_bulk(
            self.connection,
            self.index,
            lines,
            action,
            retry=self.connection.retry,
            refresh=refresh,
        )
        failed: set[str] = set()
        for (path, _), info in zip(deletes, answers, strict=True):
            if not item_ok(info) and info.get("status") != 404:
                self.state.reject(path, f"{what}: " + item_reason(info))
                failed.add(path)
        return failed

    def _accepted(self, path: str, info: Mapping[str, Any]) -> None:
        """An ``index`` item of ``path`` the node accepted (``info``: its answer)."""

    def _remove_records(
        self, removals: Sequence[tuple[str, str]], action: str, refresh: str | None
    ) -> None:
        """Remove the records of deleted documents whose chunk removals all succeeded
        (this request's and the earlier ones', answered in order before it)."""
        state = self.state
        with state.lock:
            ready = [(path, doc_id) for path, doc_id in removals if path not in state.rejections]
        if not ready:
            return
        try:
            self.send_deletes(ready, action, refresh, "removal")
        except StoreUnavailableError:
            raise
        except KnowledgeError as exc:
            for path, _ in ready:
                state.reject(path, "removal: " + str(exc))

    def _commit_records(
        self,
        commits: Sequence[Commit],
        action: str,
        refresh: str | None,
        switched: dict[str, Switch],
    ) -> list[tuple[str, str]]:
        """Write the records of the documents whose chunks were all accepted; returns the
        deletes (``(path, id)``) that follow: replaced generations, failed ones. Each
        record switched from an indexed generation goes into ``switched``."""
        cleanup: list[tuple[str, str]] = []
        pending: list[Commit] = []
        with self.state.lock:
            self.state.pending_commits -= len(commits)
            rejected = set(self.state.rejections)
        for commit in commits:
            if commit.path in rejected:
                cleanup.extend(self.own_ids(commit))
            else:
                pending.append(commit)
        return self._write_records(pending, action, refresh, switched, cleanup)

    def _write_records(
        self,
        pending: list[Commit],
        action: str,
        refresh: str | None,
        switched: dict[str, Switch],
        cleanup: list[tuple[str, str]],
    ) -> list[tuple[str, str]]:
        """Step 2 (``generations``): each record written only if it is unchanged since it
        was read; ``cleanup`` (the deletes so far) is extended and returned."""
        state = self.state
        for _ in range(_CONFLICT_ROUNDS):
            if not pending:
                break
            states = record_states(self.connection, self.index, [c.document_id for c in pending])
            decided, actions = self._decide_records(pending, states, cleanup)
            if not actions:
                pending = []
                break
            replaces = any(_replaced(c, s) is not None for c, s in decided)
            last = refresh if not cleanup and not replaces else None
            try:
                answers = send_bulk(
                    self.connection,
                    self.index,
                    actions,
                    action,
                    retry=self.connection.retry,
                    refresh=last,
                )
                self._refreshed = self._refreshed or last is not None
            except StoreUnavailableError:
                raise
            except KnowledgeError as exc:
                for commit, _ in decided:
                    state.reject(commit.path, f"document record: {exc}")
                    cleanup.extend(self.own_ids(commit))
                break
            pending = self._record_answers(decided, answers, switched, cleanup)
        for commit in pending:
            state.reject(commit.path, "document record: changed by other writers too often")
            cleanup.extend(self.own_ids(commit))
        return cleanup

    def _decide_records(
        self,
        pending: list[Commit],
        states: Mapping[str, records.RecordState],
        cleanup: list[tuple[str, str]],
    ) -> tuple[list[tuple[Commit, records.RecordState | None]], list[str]]:
        """Each pending record against the one stored: lost to a newer version (rejected,
        its chunks to ``cleanup``), or a conditional write (with the generation it
        replaces named). The commits decided with what they read, and their actions."""
        decided: list[tuple[Commit, records.RecordState | None]] = []
        actions: list[str] = []
        for commit in pending:
            stored = states.get(commit.document_id)
            lost = lost_to(commit, stored)
            if lost is not None:
                self.state.reject(commit.path, lost, plain=True)
                cleanup.extend(self.own_ids(commit))
                continue
            source = commit.record
            replaced = _replaced(commit, stored)
            if replaced is not None:
                # Named until step 3's deletes are searchable (``listing``).
                source = {**source, REPLACES: replaced}
            record = records.bulk_record_action(commit.document_id, source, stored)
            actions.append(serialize(record, self.serializer))
            decided.append((commit, stored))
        return decided, actions

    def _record_answers(
        self,
        decided: list[tuple[Commit, records.RecordState | None]],
        answers: list[dict[str, Any]],
        switched: dict[str, Switch],
        cleanup: list[tuple[str, str]],
    ) -> list[Commit]:
        """What the node answered each record write: written (a replaced generation's
        chunks to ``cleanup``, step 3), changed by another writer meanwhile (409: returned,
        to decide again), or refused (rejected)."""
        state = self.state
        again: list[Commit] = []
        for (commit, stored), info in zip(decided, answers, strict=True):
            if item_ok(info):
                if stored is not None and stored.generation is not None:
                    with state.lock:  # replaced a version: step 4 looks
                        state.replaced_documents[commit.document_id] = commit.generation
                replaced = _replaced(commit, stored)
                if stored is not None and replaced is not None:
                    switched[commit.path] = Switch(commit, stored, info)
                    cleanup.extend(
                        (commit.path, i)
                        for i in generation_ids(commit.document_id, replaced, stored.chunk_count)
                    )
            elif info.get("status") == 409:
                again.append(commit)  # another writer changed the record: decide again
            else:
                state.reject(commit.path, "document record: " + item_reason(info))
                cleanup.extend(self.own_ids(commit))
        return again

    def _point_back(self, switched: Mapping[str, Switch], failed: set[str], action: str) -> None:
        """Records switched to a new generation whose old chunks could not be removed point
        back at the old generation, marked incomplete: the document is rejected (its
        record is retried), and the retry, finding it incomplete instead of unchanged,
        writes it again and removes the old generation by id then. Without this the old
        version's chunks would stay, searchable, under a record that no longer names them.
        (The new generation left behind holds the new text, as the retry's does.)"""
        backs = [switched[path] for path in failed if path in switched]
        if not backs:
            return
        lines = [serialize(back.action(), self.serializer) for back in backs]
        try:
            answers = send_bulk(
                self.connection, self.index, lines, action, retry=self.connection.retry
            )
        except KnowledgeError as exc:
            answers = [{"status": 500, "error": str(exc)} for _ in backs]
        for back, info in zip(backs, answers, strict=True):
            if not item_ok(info):
                logger.warning(
                    "%s: the record of %s still names the new version while the old one's "
                    "chunks are left (%s); a later write of it removes them",
                    action,
                    back.commit.path,
                    item_reason(info),
                )
