"""Whether a search can use its vector side: an embedder that cannot read the query.

An embedder trained on English only (``fusion.ENGLISH_ONLY_EMBEDDERS``: all-MiniLM-L6-v2)
maps a query in Korean, Chinese or Japanese to noise: its vector search finds almost
nothing relevant (MiniLM on the Korean help pages: vector MRR@10 0.05-0.06 against the
keyword side's 0.72-0.86; on the Korean FAQ 0.14 against 0.49, bench/REPORT.md section
14) and its similarity says nothing about whether an answer is there (AUROC 0.59-0.72).
So for such a query the vector side is not used: a vector search answers from the
keyword side, and a hybrid search drops the vector side, which ranks by the keyword
side alone (its fused list was below keyword's on every such set). The query is then
not embedded at all.

Every store asks ``searched_mode`` which mode it runs; the search answer says why with
``vector_side`` (``UNCOVERED_QUERY``), and so does the explain trace's search record
(``SearchedMode.traced``: the mode asked for, the keyword fusion that ran). Whatever
shows a store's answer (the ``KnowledgeSearch`` tool and ``kb mcp``, ``kb search``) asks
``store_vector_side`` for the same note. A caller's weights or mode cannot bring the
vector side back: the model cannot read the query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from knowledge.core.model import SearchMode, SearchQuery
from knowledge.ranking.analysis import has_cjk
from knowledge.ranking.fusion import english_only

__all__ = [
    "UNCOVERED_QUERY",
    "SearchedMode",
    "covers",
    "searched_mode",
    "store_vector_side",
    "vector_side_note",
]

UNCOVERED_QUERY: Final = "query language not covered by the embedder; keyword used"
"""The search answer's and the trace's ``vector_side`` when the vector side was dropped."""


def covers(embedder_name: str | None, text: str) -> bool:
    """Whether ``embedder_name``'s model can read ``text``: not when an English-only model
    (``fusion.english_only``) gets a query with Korean, Chinese or Japanese characters."""
    return not (english_only(embedder_name) and has_cjk(text))


def vector_side_note(mode: SearchMode, embedder_name: str | None, text: str) -> str | None:
    """``UNCOVERED_QUERY`` for a vector or hybrid search of ``text`` the embedder does not
    cover (``covers``), else ``None`` (the vector side runs, or none was asked for)."""
    if mode is SearchMode.KEYWORD or covers(embedder_name, text):
        return None
    return UNCOVERED_QUERY


def store_vector_side(store: object, query: SearchQuery) -> str | None:
    """``vector_side_note`` of ``query`` searched in ``store`` (a ``KnowledgeStore``, or
    what wraps one and shows its ``embedder`` and ``default_mode``): the query's mode, else
    the store's default, and the store's embedder. ``None`` for a backend that shows
    neither (it says for itself, as a deployed API's answer does)."""
    mode = query.mode or getattr(store, "default_mode", None)
    if not isinstance(mode, SearchMode):
        return None
    name = getattr(getattr(store, "embedder", None), "name", None)
    return vector_side_note(mode, name if isinstance(name, str) else None, query.text)


@dataclass(frozen=True, slots=True)
class SearchedMode:
    """The mode a search was asked for, the one it runs, and why they differ."""

    requested: SearchMode
    mode: SearchMode
    vector_side: str | None = None

    def traced(self, record: dict[str, Any]) -> dict[str, Any]:
        """A store's part of the explain record (``explain.record_search``) as run in
        ``mode``, naming the mode asked for and ``vector_side`` when they differ."""
        if self.vector_side is None:
            return record
        return {**record, "mode": self.requested.value, "vector_side": self.vector_side}

    def tracing(self, trace: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
        """``trace`` (a store's record maker, called only when explaining) ``traced``."""
        return lambda: self.traced(trace())


def searched_mode(requested: SearchMode, embedder_name: str | None, text: str) -> SearchedMode:
    """What a ``requested`` search of ``text`` runs (module docstring): keyword when the
    vector side is not usable (``vector_side_note``), else ``requested``."""
    note = vector_side_note(requested, embedder_name, text)
    return SearchedMode(requested, requested if note is None else SearchMode.KEYWORD, note)
