"""What a hit of the OpenSearch store says of itself through named clauses.

A candidate is read without its ``_source`` (a hybrid side, a grouped search), and no hit
carries the terms its chunk was indexed with (``content_terms`` is indexed, not
returned). What the ranking needs of them anyway is asked of the node as named clauses
(optional, score 0, so no hit's score or order changes: ``queries.with_named`` around
the keyword query, ``queries.named_filters`` inside the vector query's filter), and
each hit lists those it matches (``matched_queries``, kept as ``MATCHED``):

- ``lesson``: the hit is a lesson card, and ``origin:<origin>``: its origin, when the
  weights need them (``named_clauses``, read back by ``facts``);
- ``t:<i>``: the hit's chunk holds the ``i``-th of the query's terms
  (``relevance.query_terms``) in ``content_terms``, its text and heading terms: what
  its coverage in the absolute score is made of (``ranking.relevance``; read back by
  ``matched_terms``). Every search sends them, in every mode and form, so that a hit
  the vector side alone found is judged on the same terms as a keyword hit.

The names cannot collide: none of the term clauses' is ``lesson`` or starts with
``origin:``, and a term clause is named by the term's position, not by the term.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from knowledge.core.origin import ORIGIN
from knowledge.ranking.origin_weights import KIND, LESSON, RankWeights, is_lesson
from knowledge.stores.opensearch import request_filters
from knowledge.stores.opensearch.hits import MATCHED
from knowledge.stores.opensearch.mapping import CONTENT_TERMS, METADATA

__all__ = ["TERM_CLAUSE", "facts", "matched_terms", "named_clauses", "term_clauses"]

_LESSON_CLAUSE: Final = "lesson"
_ORIGIN_CLAUSE: Final = "origin:"
TERM_CLAUSE: Final = "t:"
"""The prefix of the name of a query term's clause (``t:<position>``)."""


def term_clauses(terms: Sequence[str]) -> dict[str, dict[str, Any]]:
    """One ``term`` clause on ``content_terms`` per query term, named by its position in
    ``terms``: the field's ``whitespace`` analysis indexes each of a chunk's terms as it
    is, so a ``term`` clause is exactly "the chunk holds this term"."""
    return {f"{TERM_CLAUSE}{i}": {"term": {CONTENT_TERMS: term}} for i, term in enumerate(terms)}


def named_clauses(
    weights: RankWeights, pairs: bool, terms: Sequence[str] = ()
) -> dict[str, Mapping[str, Any]]:
    """The named clauses a search sends (module docstring): the lesson and origin clauses
    the weights need (a candidate has no ``_source``; the metadata filters' own term
    clauses tell: ``pairs``, the index holds metadata as key/value terms), and one
    clause per query term of ``terms``."""
    named: dict[str, Mapping[str, Any]] = {}
    if not weights.inert and (weights.lesson != 1.0 or weights.extra_lessons):
        (clause,) = request_filters.metadata_filters({KIND: LESSON}, pairs=pairs)
        named[_LESSON_CLAUSE] = clause
    for origin, weight in weights.origins.items():
        if weight != 1.0:
            (clause,) = request_filters.metadata_filters({ORIGIN: origin}, pairs=pairs)
            named[_ORIGIN_CLAUSE + origin] = clause
    named.update(term_clauses(terms))
    return named


def facts(source: Mapping[str, Any]) -> tuple[object, bool]:
    """A hit's ``(origin, is_lesson)``: from its metadata (a hit with its source), or
    from the named clauses it matched (a candidate read without it)."""
    metadata = source.get(METADATA)
    if isinstance(metadata, Mapping):
        return metadata.get(ORIGIN), is_lesson(metadata)
    matched = source.get(MATCHED, ())
    origin = next(
        (name[len(_ORIGIN_CLAUSE) :] for name in matched if name.startswith(_ORIGIN_CLAUSE)),
        None,
    )
    return origin, _LESSON_CLAUSE in matched


def matched_terms(matched: Iterable[str], terms: Sequence[str]) -> frozenset[str]:
    """The query's ``terms`` a hit's chunk holds, from the names of the clauses it matched
    (``MATCHED``); other names are ignored."""
    found: set[str] = set()
    for name in matched:
        if name.startswith(TERM_CLAUSE):
            position = name[len(TERM_CLAUSE) :]
            if position.isdigit() and int(position) < len(terms):
                found.add(terms[int(position)])
    return frozenset(found)
