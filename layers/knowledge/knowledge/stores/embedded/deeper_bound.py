"""What a keyword page's deeper read could add, bounded without reading it.

A keyword page left short by the per-document cap is read again at ``DEEPEST`` unless
the chunks that read adds could not change it (``ranking.read_deeper``,
``ranking.deeper_read_same``). Reading those chunks means ranking and looking up every
one of them in ``chunks`` (in one long document, 160 rows more than the page's 40, a
random read each, and their facts). Here the proof asks for no chunk: ``unread_added``
gives stand-ins that bound every chunk the deeper read could add, so that if
``deeper_read_same`` finds that none of them changes the page, no added chunk can.

They exist when, in the one searched scope (no other context, no shared library):

- every chunk belongs to a document that already has ``max_chunks_per_document`` chunks
  on the page (``outside_sql``: no chunk of the scope sorts before, between or after
  those documents' paths, a few seeks in the ``(agent, context, path, chunk_index)``
  index), so any added chunk is of one of them;
- every chunk's facts are known: no weight reads them (``RankWeights.inert``), or only
  the lesson weight does (origins neutral) and no chunk of the scope names a ``kind``
  (``schema.KINDS_INDEX``, a partial index of the few that do), so none is a lesson.

Each stand-in is of one such document, with the facts every chunk of the scope has and
the weakest raw score of the first read's chunks: every added chunk scores no more (the
first read holds the best chunks that pass), and every score is monotonic in the raw
one. ``None`` when any condition fails: the deeper read's chunks are read as before.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Final

from knowledge.core.model import SearchQuery
from knowledge.core.rank_weights import NEUTRAL
from knowledge.core.scope import KnowledgeScope
from knowledge.ranking.page_signal import PageScores
from knowledge.ranking.weighted_page import Page

from .candidates import Candidate, ChunkKey
from .ranking import document_of
from .schema import KIND_NAMED, KINDS_INDEX

__all__ = ["NO_FACTS", "kinds_sql", "outside_params", "outside_sql", "unread_added"]

NO_FACTS: Final = (None, False)
"""``(origin, is_lesson)`` of a chunk when neither matters or it has neither."""

_IN_SCOPE: Final = "SELECT 1 FROM chunks WHERE agent = ? AND context = ? AND "


def outside_sql(paths: Sequence[str]) -> str:
    """Whether the scope (bound: agent, context) has a chunk outside the documents at
    the sorted, distinct ``paths``: one index seek per gap (before the first path,
    between two, after the last). Bound per gap: agent, context, then the path(s)."""
    gaps = ["path < ?", *(["path > ? AND path < ?"] * (len(paths) - 1)), "path > ?"]
    return "SELECT " + " OR ".join(f"EXISTS ({_IN_SCOPE}{gap})" for gap in gaps)


def outside_params(agent: str, context: str, paths: Sequence[str]) -> list[str]:
    """The values ``outside_sql(paths)`` binds."""
    bounds = [[paths[0]], *([low, high] for low, high in itertools.pairwise(paths)), [paths[-1]]]
    return [value for gap in bounds for value in (agent, context, *gap)]


def kinds_sql() -> str:
    """Whether the scope (bound: agent, context) has a chunk whose metadata names a
    ``kind``: read from the partial index alone (``INDEXED BY``: an error rather than a
    scan of the scope's chunks, should the index ever be missing)."""
    return (
        f"SELECT EXISTS (SELECT 1 FROM chunks INDEXED BY {KINDS_INDEX}"  # noqa: S608
        f" WHERE agent = ? AND context = ? AND {KIND_NAMED})"
    )


def unread_added(
    conn: sqlite3.Connection,
    scope: KnowledgeScope,
    query: SearchQuery,
    page: Page[ChunkKey],
    parts: PageScores[ChunkKey, Any],
) -> tuple[list[Candidate], Callable[[ChunkKey], tuple[object, bool]]] | None:
    """Stand-ins bounding every chunk a deeper read of this keyword page could add, and
    the facts of each (module docstring), or ``None``. ``parts`` are the first read's
    two keyword parts (``KeywordIndex.side``)."""
    cap = query.max_chunks_per_document
    weights = query.weights or NEUTRAL
    if (
        cap is None
        or query.cross_context
        or query.shared_libraries
        or not parts.chunks
        or not (weights.inert or weights.neutral_origins)
    ):
        return None
    count: dict[tuple[str, str, str], int] = {}
    for item in page.chosen:
        if item.key not in page.extras:
            document = document_of(item.key)
            count[document] = count.get(document, 0) + 1
    full = sorted(
        path
        for (agent, context, path), n in count.items()
        if n >= cap and (agent, context) == (scope.agent, scope.context)
    )
    if not full:
        return None
    outside = conn.execute(
        outside_sql(full), outside_params(scope.agent, scope.context, full)
    ).fetchone()[0]
    if outside:
        return None
    if not weights.inert:
        named = conn.execute(kinds_sql(), (scope.agent, scope.context)).fetchone()[0]
        if named:
            return None
    weakest = min(parts.chunks.values())
    added = [Candidate(-1, (path, -1, scope.context, scope.agent), weakest) for path in full]
    return added, lambda _key: NO_FACTS
