"""The search ``filter`` (``knowledge.search_filter``) as an OpenSearch query: pure functions.

One function per comparison, chosen from ``COMPARISON_QUERIES`` by operator; ``and``,
``or`` and ``not`` become ``bool`` ``filter``/``should``/``must_not``. The result goes
into the same filter list as the scope (``queries.query_filters``), so it is applied
inside the kNN clause for vector search and in the ``bool`` filter for keyword search,
and can never widen the scope.

Fields (``mapping``): a metadata key ``k`` is ``metadata.k`` (a keyword: strings, numbers
by their JSON spelling, booleans as ``true``/``false``) for string comparisons and
``metadata.k.number`` (a ``double`` sub-field, filled from JSON numbers and from strings
that spell one) for numeric comparisons; ``document_path`` is the keyword field of that
name and ``indexed_at`` the ``date`` field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from knowledge.search_filter import (
    DOCUMENT_PATH,
    INDEXED_AT,
    AllOf,
    AnyOf,
    Comparison,
    FilterNode,
    Not,
)
from knowledge.stores.opensearch.mapping import METADATA, NUMBER_SUBFIELD

__all__ = ["COMPARISON_QUERIES", "comparison_field", "filter_query"]

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


def _range(op: str) -> Callable[[str, Any], Query]:
    def build(field: str, value: Any) -> Query:
        return {"range": {field: {op: _json_value(value)}}}

    return build


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
    "gt": _range("gt"),
    "gte": _range("gte"),
    "lt": _range("lt"),
    "lte": _range("lte"),
    "in": _in,
    "nin": _not_in,
    "starts_with": _starts_with,
    "contains": _contains,
}
"""Operator -> the function building its query from (field, value)."""


def filter_query(node: FilterNode) -> Query:
    """The OpenSearch query (filter context) for a parsed filter."""
    if isinstance(node, AllOf):
        return {"bool": {"filter": [filter_query(c) for c in node.children]}}
    if isinstance(node, AnyOf):
        return {
            "bool": {"should": [filter_query(c) for c in node.children], "minimum_should_match": 1}
        }
    if isinstance(node, Not):
        return {"bool": {"must_not": [filter_query(node.child)]}}
    if node.numeric:
        return _numeric_query(node)
    return COMPARISON_QUERIES[node.op](comparison_field(node), node.value)


def _numeric_query(node: Comparison) -> Query:
    """A numeric comparison where ``-0`` equals ``0``, as in the other stores.

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
