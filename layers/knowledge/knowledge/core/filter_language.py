"""The search ``filter`` language: parsing into an immutable tree, limits, and evaluation.

A filter is JSON (docs/filters.md)::

    {"and": [f, ...]}  {"or": [f, ...]}  {"not": f}
    {"field": "<key>", "op": "<op>", "value": <value>}

``op`` is one of ``COMPARISON_OPS``. ``field`` is a metadata key, or one of the reserved
fields ``document_path`` (the path in the scope), ``indexed_at`` (when the document was
indexed), ``origin`` and ``format`` (the metadata keys the indexer sets on every chunk,
``knowledge.core.origin``). An ``origin`` compared for equality must be an origin (a typo
would match nothing). ``source_type`` is the design's name for ``origin``: the parsed
comparison says ``origin``, so every store filters one field, and a value that is no
origin (``pdf``) is refused with a pointer to ``format``.

Typing rule (the same in every store; the stores' translations use ``element_text`` and
``element_number``, so there is one copy of it):

- a comparison whose value is a **number** compares doubles (the filter's number is the
  double nearest to it; ``-0`` equals ``0``): a metadata value that is a JSON number, or
  a string spelling a number as OpenSearch's ``double`` field reads it (sidecar values
  are strings: ``"2024"``, ``"0.5"``, ``"-1e3"``, ``" 5"``, ``"5d"``); anything else
  never matches it;
- a metadata text longer than ``MAX_COMPARED_TEXT_UNITS`` (OpenSearch's keyword
  ``ignore_above``) is not compared as text: it matches only ``ne``/``nin``;
- a comparison whose value is a **string** compares text by Unicode code point: strings
  as they are, numbers by their JSON spelling, booleans as ``"true"``/``"false"``.
  ISO 8601 dates written the same way (``2024-05-01``, or all in UTC with ``Z``) sort
  chronologically as text, so ``{"op": "gte", "value": "2024-01-01"}`` works on dates;
- a boolean value is its JSON spelling (``true`` is ``"true"``);
- a list value (``tags: ["ops", "k8s"]``) matches when **any** element matches;
  ``ne`` and ``nin`` are the negations of ``eq`` and ``in`` (no element matches; a
  missing key matches them);
- ``indexed_at`` takes an ISO 8601 date or date-time (no zone: UTC) and compares instants.

Limits (anything larger is a 400 ``ValidationError`` naming the position, never a slow
query): ``MAX_FILTER_DEPTH``, ``MAX_FILTER_NODES``, ``MAX_IN_VALUES``,
``MAX_FILTER_STRING_BYTES``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any, Final

from knowledge.core.errors import ValidationError
from knowledge.core.origin import FORMAT, ORIGIN, SOURCE_TYPE, check_origins

__all__ = [
    "COMPARISON_OPS",
    "DOCUMENT_PATH",
    "INDEXED_AT",
    "MAX_COMPARED_TEXT_UNITS",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_NODES",
    "MAX_FILTER_STRING_BYTES",
    "MAX_IN_VALUES",
    "NUMBER_SUBFIELD",
    "RESERVED_FIELDS",
    "AllOf",
    "AnyOf",
    "Comparison",
    "FilterNode",
    "Not",
    "check_metadata_key",
    "element_number",
    "element_text",
    "filter_to_json",
    "matches_filter",
    "metadata_elements",
    "parse_filter",
]

MAX_FILTER_DEPTH: Final = 8
"""Nesting of ``and``/``or``/``not`` (a bare comparison has depth 1)."""
MAX_FILTER_NODES: Final = 100
"""Operators and comparisons in one filter, together."""
MAX_IN_VALUES: Final = 100
"""Values in one ``in``/``nin`` list."""
MAX_FILTER_STRING_BYTES: Final = 1024
"""UTF-8 bytes of one string value or field name."""
MAX_COMPARED_TEXT_UNITS: Final = 2048
"""The longest metadata text a text comparison reads, in UTF-16 code units (characters,
for most scripts): OpenSearch does not index a longer keyword (``ignore_above``), so in
every store a longer text matches only ``ne``/``nin``."""

NUMBER_SUBFIELD: Final = "number"
"""Where OpenSearch keeps a metadata key's numbers (``metadata.<key>.number``), so a key
ending in ``.number`` would name that sub-field, not a key: ``check_metadata_key``
refuses one in every store."""

DOCUMENT_PATH: Final = "document_path"
INDEXED_AT: Final = "indexed_at"
RESERVED_FIELDS: Final = (DOCUMENT_PATH, INDEXED_AT, ORIGIN, FORMAT)

COMPARISON_OPS: Final = (
    "eq",
    "ne",
    "gt",
    "gte",
    "lt",
    "lte",
    "in",
    "nin",
    "starts_with",
    "contains",
)
_RANGE_OPS: Final = frozenset({"gt", "gte", "lt", "lte"})
_LIST_OPS: Final = frozenset({"in", "nin"})
_TEXT_OPS: Final = frozenset({"starts_with", "contains"})
_INDEXED_AT_OPS: Final = ("eq", "ne", "gt", "gte", "lt", "lte")

# A metadata key: letters (any script), digits and _ . : @ / -; no quotes, wildcards,
# backslashes or spaces, which mean something in a JSON path or an OpenSearch field name.
_KEY: Final = re.compile(r"[\w.:@/-]+")
# A number in a string as OpenSearch's ``double`` sub-field reads it (Java's
# ``Double.parseDouble``), so that every store agrees on which strings are numbers:
# blanks (code points up to U+0020) around it, a sign, decimal digits with an optional
# point and exponent, or hexadecimal digits with a binary exponent (``0x1p4``), and an
# optional ``d``/``f`` suffix. ``NaN``/``Infinity`` are not finite, so never numbers.
_NUMBER_TEXT: Final = re.compile(
    r"[\x00-\x20]*(?P<number>[+-]?(?:"
    r"(?P<decimal>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<hex>0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+)"
    r"))[fFdD]?[\x00-\x20]*"
)

Scalar = str | int | float
Value = Scalar | tuple[Scalar, ...] | datetime


@dataclass(frozen=True, slots=True)
class Comparison:
    """``field op value``. ``value`` is a string or a number (a tuple of them for
    ``in``/``nin``; an aware UTC ``datetime`` for ``indexed_at``)."""

    field: str
    op: str
    value: Value

    @property
    def numeric(self) -> bool:
        """True when the comparison compares numbers (its value is a number)."""
        first = self.value[0] if isinstance(self.value, tuple) else self.value
        return isinstance(first, int | float)


@dataclass(frozen=True, slots=True)
class AllOf:
    children: tuple[FilterNode, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    children: tuple[FilterNode, ...]


@dataclass(frozen=True, slots=True)
class Not:
    child: FilterNode


FilterNode = Comparison | AllOf | AnyOf | Not


# --- parsing ------------------------------------------------------------------------------


class _Budget:
    def __init__(self) -> None:
        self.nodes = 0

    def take(self, where: str) -> None:
        self.nodes += 1
        if self.nodes > MAX_FILTER_NODES:
            raise ValidationError(
                where, f"the filter has more than {MAX_FILTER_NODES} operators and comparisons"
            )


def parse_filter(raw: object, field_name: str = "filter") -> FilterNode:
    """Validate a decoded JSON filter into its tree.

    Raises ``ValidationError`` whose field is the exact position of the problem
    (``filter.and[2].value``) and whose message says what is wrong there.
    """
    return _node(raw, field_name, 1, _Budget())


def _node(raw: object, where: str, depth: int, budget: _Budget) -> FilterNode:
    if depth > MAX_FILTER_DEPTH:
        raise ValidationError(where, f"the filter nests deeper than {MAX_FILTER_DEPTH} levels")
    if not isinstance(raw, Mapping):
        raise ValidationError(
            where, "must be an object: {'and': [...]}, {'or': [...]}, {'not': ...} or a comparison"
        )
    budget.take(where)
    keys = set(raw)
    for name in ("and", "or", "not"):
        if name in keys:
            if len(keys) != 1:
                others = ", ".join(sorted(str(k) for k in keys - {name}))
                raise ValidationError(
                    where, f"'{name}' must be alone in its object (also: {others})"
                )
            return _logical(name, raw[name], f"{where}.{name}", depth, budget)
    unknown = sorted(str(k) for k in keys - {"field", "op", "value"})
    if unknown:
        shown = unknown[0] if len(unknown[0]) <= 64 else unknown[0][:61] + "..."
        raise ValidationError(
            f"{where}.{shown}",
            "is not a filter key (allowed: and, or, not, or field, op, value)",
        )
    return _comparison(raw, where)


def _logical(name: str, raw: object, where: str, depth: int, budget: _Budget) -> FilterNode:
    if name == "not":
        return Not(_node(raw, where, depth + 1, budget))
    if not isinstance(raw, list) or not raw:
        raise ValidationError(where, f"must be a non-empty list of filters for '{name}'")
    children = tuple(_node(item, f"{where}[{i}]", depth + 1, budget) for i, item in enumerate(raw))
    return AllOf(children) if name == "and" else AnyOf(children)


def _check_string(where: str, value: str) -> str:
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValidationError(where, "contains an unpaired surrogate; not text") from None
    if size > MAX_FILTER_STRING_BYTES:
        raise ValidationError(where, f"must be at most {MAX_FILTER_STRING_BYTES} bytes of UTF-8")
    return value


def _comparison(raw: Mapping[str, Any], where: str) -> Comparison:
    for key in ("field", "op", "value"):
        if key not in raw:
            raise ValidationError(f"{where}.{key}", "is required in a comparison")
    field = raw["field"]
    if not isinstance(field, str) or not field:
        raise ValidationError(f"{where}.field", "must be a non-empty string")
    _check_string(f"{where}.field", field)
    if not _KEY.fullmatch(field):
        raise ValidationError(
            f"{where}.field",
            "must be a metadata key of letters, digits and _ . : @ / - (or document_path, "
            "indexed_at, origin, format)",
        )
    named = field
    if field == SOURCE_TYPE:  # the design's name for the origin: one field for every store
        field = ORIGIN
    check_metadata_key(f"{where}.field", field)
    op = raw["op"]
    if not isinstance(op, str) or op not in COMPARISON_OPS:
        raise ValidationError(f"{where}.op", f"must be one of: {', '.join(COMPARISON_OPS)}")
    value_at = f"{where}.value"
    if field == INDEXED_AT:
        if op not in _INDEXED_AT_OPS:
            raise ValidationError(
                f"{where}.op", f"'indexed_at' takes only: {', '.join(_INDEXED_AT_OPS)}"
            )
        return Comparison(field, op, _instant(value_at, raw["value"]))
    value = raw["value"]
    if op in _LIST_OPS:
        if not isinstance(value, list) or not value:
            raise ValidationError(value_at, f"must be a non-empty list for '{op}'")
        if len(value) > MAX_IN_VALUES:
            raise ValidationError(value_at, f"must hold at most {MAX_IN_VALUES} values for '{op}'")
        items = tuple(_scalar(f"{value_at}[{i}]", item) for i, item in enumerate(value))
        if len({isinstance(item, str) for item in items}) > 1:
            raise ValidationError(value_at, f"must be all strings or all numbers for '{op}'")
        _text_only(field, op, items[0], f"{where}.op")
        if field == ORIGIN:
            check_origins(items, value_at, named=named)
        return Comparison(field, op, items)
    if op in _TEXT_OPS and not isinstance(value, str):
        raise ValidationError(value_at, f"must be a string for '{op}'")
    scalar = _scalar(value_at, value)
    _text_only(field, op, scalar, value_at)
    if field == ORIGIN and op in ("eq", "ne"):
        check_origins((scalar,), value_at, named=named)
    return Comparison(field, op, scalar)


def check_metadata_key(where: str, key: str) -> str:
    """``key`` if a search may compare it; ``ValidationError`` at ``where`` for one whose
    last dotted part is ``NUMBER_SUBFIELD`` (``year.number``): the name of a key's
    numeric sub-field in OpenSearch, so no store compares a key of that name. (``source_type``
    never gets here: it is resolved to ``origin`` first, ``knowledge.core.origin``.)"""
    if not key.strip():
        raise ValidationError(where, "a metadata key must not be blank")
    if key.endswith(f".{NUMBER_SUBFIELD}"):
        raise ValidationError(
            where,
            f"a metadata key must not end in '.{NUMBER_SUBFIELD}' (reserved for numeric "
            f"comparisons: compare the key itself with a number), got '{key[:64]}'",
        )
    return key


def _text_only(field: str, op: str, value: Scalar, where: str) -> None:
    if field == DOCUMENT_PATH and not isinstance(value, str):
        raise ValidationError(where, f"'document_path' compares strings only (op '{op}')")


def _scalar(where: str, value: object) -> Scalar:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        # Every store compares doubles (OpenSearch's sub-field is one): an integer past
        # 2**53 means the double nearest to it, -0 means 0, and a number no double holds
        # is refused here rather than by a store.
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise ValidationError(where, "must be a finite number")
        return number + 0.0
    if isinstance(value, str):
        return _check_string(where, value)
    raise ValidationError(where, "must be a string, a number or a boolean")


def _instant(where: str, value: object) -> datetime:
    if not isinstance(value, str):
        raise ValidationError(
            where, "must be an ISO 8601 date or date-time string for 'indexed_at'"
        )
    text = _check_string(where, value)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            moment = datetime.combine(date.fromisoformat(text), time())
        except ValueError:
            raise ValidationError(
                where, "must be an ISO 8601 date or date-time (2024-05-01T12:00:00Z)"
            ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def filter_to_json(node: FilterNode) -> dict[str, Any]:
    """The JSON form of a tree, which ``parse_filter`` reads back as an equal tree (what a
    client sends for a ``SearchQuery``)."""
    if isinstance(node, AllOf):
        return {"and": [filter_to_json(c) for c in node.children]}
    if isinstance(node, AnyOf):
        return {"or": [filter_to_json(c) for c in node.children]}
    if isinstance(node, Not):
        return {"not": filter_to_json(node.child)}
    value = node.value
    if isinstance(value, datetime):
        shown: object = value.isoformat()
    elif isinstance(value, tuple):
        shown = list(value)
    else:
        shown = value
    return {"field": node.field, "op": node.op, "value": shown}


# --- the typing rule ----------------------------------------------------------------------


def element_text(value: object) -> str | None:
    """A metadata element as text for string comparisons; ``None`` for no text form."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if _utf16_units(value) <= MAX_COMPARED_TEXT_UNITS else None
    if isinstance(value, int | float):
        return json.dumps(value)
    return None


def _utf16_units(text: str) -> int:
    if len(text) * 2 <= MAX_COMPARED_TEXT_UNITS:
        return len(text)  # at most two units a code point: short enough either way
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def element_number(value: object) -> float | None:
    """A metadata element as a number for numeric comparisons: a JSON number, or a string
    spelling one as ``_NUMBER_TEXT`` reads it (``"2024"``, ``"-0.5"``, ``"1e3"``, ``" 5"``);
    ``None`` otherwise (and for one that is not finite as a double)."""
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str) and (match := _NUMBER_TEXT.fullmatch(value)):
            spelled = match["number"]
            number = float.fromhex(spelled) if match["hex"] else float(spelled)
        else:
            return None
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


# --- evaluation (the memory store, and the reference for the others) ----------------------


def metadata_elements(value: object) -> list[object]:
    """The elements a metadata value compares by: a list's items (any one may match), a
    scalar itself, none for a missing value. The stores' translations index the same."""
    if value is None:
        return []
    if isinstance(value, list | tuple | set | frozenset):
        return list(value)
    return [value]


def _holds(op: str, have: Any, want: Any) -> bool:
    if op in ("eq", "in", "ne", "nin"):
        return bool(have == want)
    if op == "gt":
        return bool(have > want)
    if op == "gte":
        return bool(have >= want)
    if op == "lt":
        return bool(have < want)
    if op == "lte":
        return bool(have <= want)
    if op == "starts_with":
        return bool(have.startswith(want))
    return bool(want in have)  # contains


def _element_matches(comparison: Comparison, element: object) -> bool:
    op = comparison.op
    wants = comparison.value if isinstance(comparison.value, tuple) else (comparison.value,)
    have: object = element_number(element) if comparison.numeric else element_text(element)
    if have is None:
        return False
    return any(_holds(op, have, want) for want in wants)


def matches_filter(
    node: FilterNode,
    *,
    path: str,
    metadata: Mapping[str, Any],
    indexed_at: datetime | None,
) -> bool:
    """True if a chunk of document ``path`` with ``metadata``, indexed at ``indexed_at``,
    passes ``node`` (module docstring)."""
    if isinstance(node, AllOf):
        return all(
            matches_filter(c, path=path, metadata=metadata, indexed_at=indexed_at)
            for c in node.children
        )
    if isinstance(node, AnyOf):
        return any(
            matches_filter(c, path=path, metadata=metadata, indexed_at=indexed_at)
            for c in node.children
        )
    if isinstance(node, Not):
        return not matches_filter(node.child, path=path, metadata=metadata, indexed_at=indexed_at)
    negated = node.op in ("ne", "nin")
    if node.field == INDEXED_AT:
        if indexed_at is None:
            return negated
        moment = indexed_at if indexed_at.tzinfo else indexed_at.replace(tzinfo=UTC)
        found = _holds(node.op, moment.astimezone(UTC), node.value)
    else:
        value = path if node.field == DOCUMENT_PATH else metadata.get(node.field)
        found = any(_element_matches(node, element) for element in metadata_elements(value))
    return not found if negated else found
