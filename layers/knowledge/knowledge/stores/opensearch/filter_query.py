"""The search ``filter`` (``knowledge.core.filter_language``) as an OpenSearch query, pure.

One function per comparison, chosen from ``COMPARISON_QUERIES`` by operator; ``and``,
``or`` and ``not`` become ``bool`` ``filter``/``should``/``must_not``. The result goes
into the same filter list as the scope (``request_filters.query_filters``), so it is applied
inside the kNN clause for vector search and in the ``bool`` filter for keyword search,
and can never widen the scope.

Fields: ``document_path`` is the keyword field of that name and ``indexed_at`` the
``date`` field. A metadata key ``k``, in an index of schema 4 (``pairs``), is the terms
``k\x1f<text>`` of ``metadata_terms`` for string comparisons and ``k\x1f<number code>`` of
``metadata_numbers`` for numeric ones (``metadata_pairs``): an equality is a ``term``, an
order comparison a ``range`` held inside the key's terms (``metadata_pairs.key_range``),
``starts_with`` a ``prefix`` and ``contains`` a ``wildcard`` behind the key. In an older
index it is ``metadata.k`` (a keyword: strings, numbers by their JSON spelling, booleans
as ``true``/``false``) for string comparisons and ``metadata.k.number`` (a ``double``
sub-field, filled from JSON numbers and from strings that spell one) for numeric ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import Any, Final

from knowledge.core.filter_language import (
    DOCUMENT_PATH,
    INDEXED_AT,
    AllOf,
    AnyOf,
    Comparison,
    FilterNode,
    Not,
)
from knowledge.stores.opensearch.mapping import METADATA, NUMBER_SUBFIELD
from knowledge.stores.opensearch.metadata_pairs import (
    METADATA_NUMBERS,
    METADATA_TERMS,
    key_range,
    number_term,
    text_term,
)

__all__ = ["COMPARISON_QUERIES", "comparison_field", "filter_query", "pair_query"]

Query = dict[str, Any]


def comparison_field(comparison: Comparison) -> str:
    """The indexed field a comparison reads."""
    if comparison.field in (DOCUMENT_PATH, INDEXED_AT):
        return comparison.field
    base = f"{METADATA}.{comparison.field}"
    return f"{base}.{NUMBER_SUBFIELD}" if comparison.numeric else base


def _json_value(value: object) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _equal(field: str, value: Any) -> Query:
    return {"term": {field: _json_value(value)}}


def _not_equal(field: str, value: Any) -> Query:
    return {"bool": {"must_not": [_equal(field, value)]}}


def _ordered(op: str, field: str, value: Any) -> Query:
    return {"range": {field: {op: _json_value(value)}}}


def _in(field: str, values: Any) -> Query:
    return {"terms": {field: [_json_value(v) for v in values]}}


def _not_in(field: str, values: Any) -> Query:
    return {"bool": {"must_not": [_in(field, values)]}}


def _starts_with(field: str, value: Any) -> Query:
    return {"prefix": {field: {"value": value}}}


def _wildcard_literal(text: str) -> str:
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("?", "\\?")


def _contains(field: str, value: Any) -> Query:
    return {"wildcard": {field: {"value": f"*{_wildcard_literal(value)}*"}}}


COMPARISON_QUERIES: Final[Mapping[str, Callable[[str, Any], Query]]] = {
    "eq": _equal,
    "ne": _not_equal,
    "gt": partial(_ordered, "gt"),
    "gte": partial(_ordered, "gte"),
    "lt": partial(_ordered, "lt"),
    "lte": partial(_ordered, "lte"),
    "in": _in,
    "nin": _not_in,
    "starts_with": _starts_with,
    "contains": _contains,
}
"""Operator -> the function building its query from (field, value)."""


_ORDER_BOUNDS: Final = {
    "gt": ("gt", "lt"),
    "gte": ("gte", "lt"),
    "lt": ("lt", "gte"),
    "lte": ("lte", "gte"),
}
"""An order operator -> (its own bound, the bound that keeps the range inside the key)."""


def pair_query(comparison: Comparison) -> Query:
    """A comparison on a metadata key of a schema-4 index (module docstring)."""
    key, op, value = comparison.field, comparison.op, comparison.value
    numeric = comparison.numeric
    field = METADATA_NUMBERS if numeric else METADATA_TERMS

    def term(item: Any) -> str:
        return number_term(key, item) if numeric else text_term(key, str(item))

    if op in ("eq", "ne"):
        found: Query = {"term": {field: term(value)}}
    elif op in ("in", "nin"):
        assert isinstance(value, tuple)
        found = {"terms": {field: [term(item) for item in value]}}
    elif op in _ORDER_BOUNDS:
        own, keep = _ORDER_BOUNDS[op]
        lowest, above = key_range(key)
        found = {"range": {field: {own: term(value), keep: above if keep == "lt" else lowest}}}
    elif op == "starts_with":
        found = {"prefix": {field: {"value": term(value)}}}
    else:  # contains: strings only (search_filter)
        pattern = f"{_wildcard_literal(text_term(key, ''))}*{_wildcard_literal(str(value))}*"
        found = {"wildcard": {field: {"value": pattern}}}
    return {"bool": {"must_not": [found]}} if op in ("ne", "nin") else found


def filter_query(node: FilterNode, *, pairs: bool = False) -> Query:
    """The OpenSearch query (filter context) for a parsed filter; ``pairs``: the index
    holds metadata as key/value terms (schema 4, ``metadata_pairs``)."""
    if isinstance(node, AllOf):
        return {"bool": {"filter": [filter_query(c, pairs=pairs) for c in node.children]}}
    if isinstance(node, AnyOf):
        children = [filter_query(c, pairs=pairs) for c in node.children]
        return {"bool": {"should": children, "minimum_should_match": 1}}
    if isinstance(node, Not):
        return {"bool": {"must_not": [filter_query(node.child, pairs=pairs)]}}
    if pairs and node.field not in (DOCUMENT_PATH, INDEXED_AT):
        return pair_query(node)
    if node.numeric:
        return _numeric_query(node)
    return COMPARISON_QUERIES[node.op](comparison_field(node), node.value)


def _numeric_query(node: Comparison) -> Query:
    """A numeric comparison where ``-0`` equals ``0``, as in the other stores (an index
    before schema 4; the number codes of ``metadata_pairs`` make ``-0`` ``0`` already).

    The ``double`` sub-field keeps the sign of a zero (``"-0"`` is indexed as -0.0) and
    Lucene orders -0.0 below 0.0, so a bare ``term``/``range`` on 0 would part them.
    ``parse_filter`` leaves no -0.0 in a value: a zero is widened to both zeros where
    the comparison includes it (``gt 0`` and ``lte 0`` already treat them alike).
    """
    field = comparison_field(node)
    value = node.value
    if isinstance(value, tuple):
        if 0.0 in value:
            value = (*value, -0.0)
        return COMPARISON_QUERIES[node.op](field, value)
    if value != 0.0 or node.op in ("gt", "lte"):
        return COMPARISON_QUERIES[node.op](field, value)
    if node.op in ("eq", "ne"):
        both_zeros = {"range": {field: {"gte": -0.0, "lte": 0.0}}}
        return both_zeros if node.op == "eq" else {"bool": {"must_not": [both_zeros]}}
    return COMPARISON_QUERIES[node.op](field, -0.0)  # gte and lt: from below -0.0
