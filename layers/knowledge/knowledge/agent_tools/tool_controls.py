"""The ranking controls of the ``KnowledgeSearch`` tool and ``kb mcp``.

What a **model** may pass, beside the query and its narrowing filters (``tool``): the
controls the HTTP API has that change how results are ranked or shown, never which
documents may be searched:

- ``group_by``: ``"document"``, one result per document (``knowledge.ranking.grouping``);
- ``origin_weights``: ``{"manual": 1.5, "shared": 0.5}``, a weight per origin;
- ``lesson_weight``: the lesson cards' weight;
- ``explain``: ``true`` appends the trace (``knowledge.ranking.explain``) after the
  results, as text; ``ToolResult.trace`` holds it as data for the host.

Each is checked as the API checks it (the same functions: ``parse_group_by``,
``parse_origin_weights``, ``check_weight``, bounds ``WEIGHT_BOUNDS``); a bad one is
"Invalid parameter: origin_weights.shared: must be between 0.1 and 10".

What is the **host's** (``ToolContext``), never the model's: the scope, the mode,
``cross_context``, the shared-library grant (``include_shared`` can only leave it out),
and the default weights (``ToolContext.weights``: the deployment's, e.g.
``rank_weights_from_env()``; ``None``: the backend's own). A model's weights override the
host's for one search, within the bounds; the number of extra lesson cards
(``extra_lessons``) stays the host's, since it lengthens the answer past
``max_results``. A weight reorders what the scope holds: it cannot reach a document the
scope does not, so nothing here widens the scope.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from knowledge.core.errors import ValidationError
from knowledge.core.group_by import GROUP_BY_VALUES, parse_group_by
from knowledge.core.model import SearchQuery, SearchResult
from knowledge.core.origin import ORIGINS
from knowledge.core.rank_weights import WEIGHT_BOUNDS, RankWeights, check_weight
from knowledge.core.rank_weights import parse_origin_weights as _parse_origins
from knowledge.core.scope import KnowledgeScope
from knowledge.ranking import explain
from knowledge.ranking.vector_side import store_vector_side

__all__ = [
    "CONTROL_PROPERTIES",
    "Controls",
    "Searched",
    "control_schema",
    "parse_controls",
    "search_with_controls",
]

GROUP_BY = "group_by"
ORIGIN_WEIGHTS = "origin_weights"
LESSON_WEIGHT = "lesson_weight"
EXPLAIN = "explain"
CONTROL_PROPERTIES = (GROUP_BY, ORIGIN_WEIGHTS, LESSON_WEIGHT, EXPLAIN)


@dataclass(frozen=True, slots=True)
class Controls:
    """A model's ranking controls, checked (``parse_controls``)."""

    group_by: str | None = None
    origin_weights: Mapping[str, float] | None = None
    lesson_weight: float | None = None
    explain: bool = False

    @property
    def weighs(self) -> bool:
        return self.origin_weights is not None or self.lesson_weight is not None

    def over(self, weights: RankWeights) -> RankWeights:
        """``weights`` with the model's weights over them."""
        if not self.weighs:
            return weights
        return weights.override(self.origin_weights, self.lesson_weight)


def control_schema() -> dict[str, Any]:
    """The JSON Schema properties of the controls (the tool's ``input_schema`` adds them)."""
    low, high = WEIGHT_BOUNDS
    weight = {"type": "number", "minimum": low, "maximum": high}
    return {
        GROUP_BY: {
            "type": "string",
            "enum": list(GROUP_BY_VALUES),
            "description": (
                "document: one result per document (its best passage and how many of its "
                "chunks matched), for 'which documents talk about X'"
            ),
        },
        ORIGIN_WEIGHTS: {
            "type": "object",
            "properties": {origin: dict(weight) for origin in ORIGINS},
            "additionalProperties": False,
            "description": (
                f"Weigh results by source ({low}-{high}, 1 = neutral), e.g. "
                '{"manual": 1.5, "shared": 0.5}: written notes count more, the shared '
                "library less"
            ),
        },
        LESSON_WEIGHT: {
            **weight,
            "description": "Weight of lesson cards (documents marked kind: lesson)",
        },
        EXPLAIN: {
            "type": "boolean",
            "description": "Append how each score was made (query terms, weights, drops)",
        },
    }


def parse_controls(arguments: Mapping[str, Any]) -> Controls:
    """The controls among a tool call's ``arguments`` (absent or ``null``: not given);
    ``ValidationError`` naming the field for a bad one."""
    group_by = parse_group_by(arguments.get(GROUP_BY))
    raw_origins = arguments.get(ORIGIN_WEIGHTS)
    if raw_origins is not None and not isinstance(raw_origins, Mapping):
        raise ValidationError(ORIGIN_WEIGHTS, "must be an object of origin: weight")
    origins = None if raw_origins is None else _parse_origins(raw_origins, ORIGIN_WEIGHTS)
    raw_lesson = arguments.get(LESSON_WEIGHT)
    lesson = None if raw_lesson is None else check_weight(raw_lesson, LESSON_WEIGHT)
    wanted = arguments.get(EXPLAIN)
    if wanted is not None and not isinstance(wanted, bool):
        raise ValidationError(EXPLAIN, "must be true or false")
    return Controls(group_by, origins, lesson, wanted is True)


class Searched(NamedTuple):
    """What ``search_with_controls`` found: the results, the trace when asked for, and
    ``vector_side`` when a vector or hybrid search ran on the keyword side alone
    (``knowledge.ranking.vector_side``)."""

    results: list[SearchResult]
    trace: dict[str, Any] | None
    vector_side: str | None


def _takes(backend: Any, name: str) -> bool:
    return callable(getattr(backend, name, None))


def search_with_controls(
    backend: Any,
    scope: KnowledgeScope,
    query: SearchQuery,
    controls: Controls,
    *,
    host_weights: RankWeights | None,
    include: bool | None,
    search: Any,
) -> Searched:
    """The results of ``query`` with ``controls``, the trace when they ask for it, and
    why the vector side was not used when it was not (``Searched``).

    A deployed API (a backend with ``search_response``, ``knowledge.client``) is sent the
    model's fields alone, so the deployment's own defaults stand for the rest, or, when
    the host set ``host_weights``, those with the model's over them, whole; a store gets
    the model's over the host's (``None``: ``RankWeights()``, what a store applies unless
    told). ``search`` is the tool's plain search (``tool._search``)."""
    query = replace(query, group_by=controls.group_by)
    if _takes(backend, "search_response"):
        sent = replace(query, weights=None if host_weights is None else controls.over(host_weights))
        extra: dict[str, Any] = {}
        if include is not None:
            extra["include_shared"] = include
        if host_weights is None:
            extra["origin_weights"] = controls.origin_weights
            extra["lesson_weight"] = controls.lesson_weight
        response = backend.search_response(scope, sent, explain=controls.explain, **extra)
        trace = response.explain if controls.explain else None
        told = None if trace is None else dict(trace)
        return Searched(list(response.results), told, response.vector_side)
    weights = host_weights
    if controls.weighs:
        weights = controls.over(host_weights or RankWeights())
    query = replace(query, weights=weights)
    recording = explain.explaining() if controls.explain else contextlib.nullcontext()
    with recording as recorded:
        results: list[SearchResult] = search(backend, scope, query, include)
    trace = None if recorded is None else recorded.to_dict(results)
    return Searched(results, trace, store_vector_side(backend, query))
