"""The search ``filter`` (``knowledge.core.filter_language``) as an SQL condition: pure functions.

One function per comparison, chosen from ``COMPARISON_SQL`` by operator; ``and``/``or``/
``not`` become ``AND``/``OR``/``NOT``. Every value is a bound parameter (``?``): a filter
is never spliced into the SQL text. Field names are bound too (as JSON paths), so the
SQL text depends only on the tree's shape and operators.

A condition reads the ``chunks`` row aliased ``c``:

- a metadata key: ``EXISTS`` over ``json_each(c.metadata, '$."<key>"')`` (a list yields
  its elements, a scalar itself), comparing ``kb_filter_text(type, atom)`` or
  ``kb_filter_number(type, atom)``: SQL functions registered on every connection
  (``register_functions``) that apply ``search_filter.element_text``/``element_number``,
  so the typing rule is the same Python code as in the other stores;
- ``document_path``: ``c.path``;
- ``indexed_at``: the document row's ``indexed_at`` (UTC text, one fixed format, so text
  order is time order).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from knowledge.core.filter_language import (
    DOCUMENT_PATH,
    INDEXED_AT,
    MAX_COMPARED_TEXT_UNITS,
    AllOf,
    AnyOf,
    Comparison,
    FilterNode,
    Not,
    element_number,
    element_text,
)

from .schema import utc_text

__all__ = ["COMPARISON_SQL", "filter_sql", "register_functions"]

Condition = tuple[str, list[Any]]

_TEXT_FUNCTION: Final = "kb_filter_text"
_NUMBER_FUNCTION: Final = "kb_filter_number"
# The common cases in plain SQL (a string's text is itself, a JSON number is a number);
# the registered functions only for the rest (CASE evaluates lazily): a Python call per
# element would cost some 20 times more.
# A text of at most half MAX_COMPARED_TEXT_UNITS code points is short enough in UTF-16
# too; a longer one goes through element_text, which applies the limit. An integer is
# compared as the double it is nearest to, as in the other stores.
_TEXT_OPERAND: Final = (
    f"(CASE WHEN e.type = 'text' AND length(e.atom) <= {MAX_COMPARED_TEXT_UNITS // 2}"
    f" THEN e.atom ELSE {_TEXT_FUNCTION}(e.type, e.atom) END)"
)
_NUMBER_OPERAND: Final = (
    "(CASE e.type WHEN 'real' THEN e.atom WHEN 'integer' THEN CAST(e.atom AS REAL)"
    f" WHEN 'text' THEN {_NUMBER_FUNCTION}(e.type, e.atom) END)"
)
_INDEXED_AT_SQL: Final = "(SELECT d.indexed_at FROM documents AS d WHERE d.doc_id = c.doc_id)"


def _sql_text(kind: str, atom: object) -> str | None:
    if kind == "true":
        return "true"
    if kind == "false":
        return "false"
    if kind in ("text", "integer", "real"):
        return element_text(atom)
    return None


def _sql_number(kind: str, atom: object) -> float | None:
    return element_number(atom) if kind in ("text", "integer", "real") else None


def register_functions(conn: sqlite3.Connection) -> None:
    """Make the typing functions that ``filter_sql`` conditions call available on ``conn``."""
    conn.create_function(_TEXT_FUNCTION, 2, _sql_text, deterministic=True)
    conn.create_function(_NUMBER_FUNCTION, 2, _sql_number, deterministic=True)


def _param(value: object) -> object:
    return utc_text(value) if isinstance(value, datetime) else value


def _compare(operator: str) -> Callable[[str, Any], Condition]:
    def build(operand: str, value: Any) -> Condition:
        return f"{operand} {operator} ?", [_param(value)]

    return build


def _in(operand: str, values: Any) -> Condition:
    marks = ", ".join("?" * len(values))
    return f"{operand} IN ({marks})", [_param(v) for v in values]


def _starts_with(operand: str, value: Any) -> Condition:
    return f"substr({operand}, 1, length(?)) = ?", [value, value]


def _contains(operand: str, value: Any) -> Condition:
    return f"instr({operand}, ?) > 0", [value]


COMPARISON_SQL: Final[Mapping[str, Callable[[str, Any], Condition]]] = {
    "eq": _compare("="),
    "ne": _compare("="),  # negated by filter_sql: no element is equal
    "gt": _compare(">"),
    "gte": _compare(">="),
    "lt": _compare("<"),
    "lte": _compare("<="),
    "in": _in,
    "nin": _in,  # negated by filter_sql
    "starts_with": _starts_with,
    "contains": _contains,
}
"""Operator -> the function building its condition on one operand (an SQL expression)."""

_NEGATED: Final = frozenset({"ne", "nin"})


def _comparison_sql(node: Comparison) -> Condition:
    build = COMPARISON_SQL[node.op]
    if node.field == DOCUMENT_PATH:
        sql, params = build("c.path", node.value)
    elif node.field == INDEXED_AT:
        sql, params = build(_INDEXED_AT_SQL, node.value)
    else:
        inner, values = build(_NUMBER_OPERAND if node.numeric else _TEXT_OPERAND, node.value)
        path = '$."' + node.field + '"'  # parse_filter allows no quote in a key
        # ``inner`` is built from this module's constant fragments; values are bound.
        sql = f"EXISTS (SELECT 1 FROM json_each(c.metadata, ?) AS e WHERE {inner})"  # noqa: S608
        params = [path, *values]
    if node.op in _NEGATED:
        # coalesce: a missing indexed_at (NULL) is "not equal", as in every store.
        return f"NOT coalesce({sql}, 0)", params
    return f"coalesce({sql}, 0)", params


def _join(nodes: Sequence[FilterNode], operator: str) -> Condition:
    parts = [filter_sql(n) for n in nodes]
    sql = f" {operator} ".join(f"({p[0]})" for p in parts)
    return sql, [v for p in parts for v in p[1]]


def filter_sql(node: FilterNode) -> Condition:
    """The SQL condition on ``chunks AS c`` for a parsed filter, and its parameters."""
    if isinstance(node, AllOf):
        return _join(node.children, "AND")
    if isinstance(node, AnyOf):
        return _join(node.children, "OR")
    if isinstance(node, Not):
        sql, params = filter_sql(node.child)
        return f"NOT ({sql})", params
    return _comparison_sql(node)
