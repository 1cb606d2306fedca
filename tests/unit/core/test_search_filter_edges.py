"""knowledge.core.filter_language at its edges, with literal expectations: every error's exact
field and message, the depth of and/or, time zones of ``indexed_at``, each operator on
the values where it differs from its neighbours, and and/or/not over every kind of field."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.filter_language import (
    Comparison,
    Not,
    element_number,
    element_text,
    matches_filter,
    parse_filter,
)


def cmp(field: str, op: str, value: Any) -> dict[str, Any]:
    return {"field": field, "op": op, "value": value}


OPS = "eq, ne, gt, gte, lt, lte, in, nin, starts_with, contains"
KEY_RULE = (
    "must be a metadata key of letters, digits and _ . : @ / - (or document_path, "
    "indexed_at, origin, format)"
)

ERRORS: list[tuple[object, str, str]] = [
    (
        "team",
        "filter",
        "must be an object: {'and': [...]}, {'or': [...]}, {'not': ...} or a comparison",
    ),
    (
        {"and": [cmp("a", "eq", 1)], "or": [], "field": "a"},
        "filter",
        "'and' must be alone in its object (also: field, or)",
    ),
    (
        {**cmp("a", "eq", 1), "k" * 64: 1},
        "filter." + "k" * 64,
        "is not a filter key (allowed: and, or, not, or field, op, value)",
    ),
    (
        {**cmp("a", "eq", 1), "k" * 65: 1},
        "filter." + "k" * 61 + "...",
        "is not a filter key (allowed: and, or, not, or field, op, value)",
    ),
    ({"field": "a", "op": "eq"}, "filter.value", "is required in a comparison"),
    (cmp("", "eq", "x"), "filter.field", "must be a non-empty string"),
    (cmp("a b", "eq", "x"), "filter.field", KEY_RULE),
    (cmp("a\ud800", "eq", "x"), "filter.field", "contains an unpaired surrogate; not text"),
    (cmp("a", "eq", "x\ud800"), "filter.value", "contains an unpaired surrogate; not text"),
    (cmp("a", "eq", "x" * 1025), "filter.value", "must be at most 1024 bytes of UTF-8"),
    (cmp("a", "like", "x"), "filter.op", f"must be one of: {OPS}"),
    (
        cmp("indexed_at", "in", ["2024-05-01"]),
        "filter.op",
        "'indexed_at' takes only: eq, ne, gt, gte, lt, lte",
    ),
    (
        cmp("document_path", "in", [1]),
        "filter.op",
        "'document_path' compares strings only (op 'in')",
    ),
    (
        cmp("document_path", "gt", 3),
        "filter.value",
        "'document_path' compares strings only (op 'gt')",
    ),
    (cmp("a", "gt", float("nan")), "filter.value", "must be a finite number"),
    (cmp("a", "eq", None), "filter.value", "must be a string, a number or a boolean"),
    (
        cmp("indexed_at", "gt", 5),
        "filter.value",
        "must be an ISO 8601 date or date-time string for 'indexed_at'",
    ),
    (
        cmp("indexed_at", "gt", "2024-13-01"),
        "filter.value",
        "must be an ISO 8601 date or date-time (2024-05-01T12:00:00Z)",
    ),
    (
        cmp("indexed_at", "gt", "2024\ud800"),
        "filter.value",
        "contains an unpaired surrogate; not text",
    ),
]


@pytest.mark.parametrize(("raw", "field", "message"), ERRORS)
def test_each_error_names_its_position_and_says_exactly_what_is_wrong(
    raw: object, field: str, message: str
) -> None:
    with pytest.raises(ValidationError) as info:
        parse_filter(raw)
    assert (info.value.field, info.value.message) == (field, message)


def _chain(operator: str, depth: int) -> dict[str, Any]:
    node: dict[str, Any] = cmp("a", "eq", 1)
    for _ in range(depth - 1):
        node = {operator: [node]}
    return node


@pytest.mark.parametrize("operator", ["and", "or"])
def test_and_and_or_each_add_one_level(operator: str) -> None:
    parse_filter(_chain(operator, 8))
    with pytest.raises(ValidationError) as info:
        parse_filter(_chain(operator, 9))
    assert (info.value.field, info.value.message) == (
        "filter" + f".{operator}[0]" * 8,
        "the filter nests deeper than 8 levels",
    )


# --- parsed values ---------------------------------------------------------------------------


def test_booleans_become_their_json_spelling() -> None:
    assert parse_filter(cmp("draft", "eq", False)) == Comparison("draft", "eq", "false")
    assert parse_filter(cmp("draft", "in", [True, False])) == Comparison(
        "draft", "in", ("true", "false")
    )


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2024-05-01", datetime(2024, 5, 1, tzinfo=UTC)),
        ("2024-05-01T12:30:00", datetime(2024, 5, 1, 12, 30, tzinfo=UTC)),
        ("2024-05-01T14:30:00+02:00", datetime(2024, 5, 1, 12, 30, tzinfo=UTC)),
        ("2024-05-01T12:30:00Z", datetime(2024, 5, 1, 12, 30, tzinfo=UTC)),
    ],
)
def test_indexed_at_values_are_utc_instants(text: str, moment: datetime) -> None:
    node = parse_filter(cmp("indexed_at", "gte", text))
    assert isinstance(node, Comparison)
    assert node.value == moment
    assert isinstance(node.value, datetime)
    assert node.value.tzinfo is UTC


@pytest.fixture
def seoul_local_time() -> Iterator[None]:
    """The process's local zone set to UTC+9, so "no zone" and "local" differ."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "Asia/Seoul")
        time.tzset()
        try:
            yield
        finally:
            patch.undo()
            time.tzset()


@pytest.mark.usefixtures("seoul_local_time")
def test_no_zone_means_utc_not_local_time() -> None:
    assert time.localtime(0).tm_hour == 9  # the zone change took effect
    node = parse_filter(cmp("indexed_at", "eq", "2024-05-01T12:00:00"))
    assert isinstance(node, Comparison)
    assert node.value == datetime(2024, 5, 1, 12, tzinfo=UTC)
    # a chunk indexed at a naive 12:00 was indexed at 12:00 UTC
    naive = datetime(2024, 5, 1, 12)
    assert matches_filter(node, path="a.md", metadata={}, indexed_at=naive) is True


def test_an_aware_indexed_at_keeps_its_zone() -> None:
    node = parse_filter(cmp("indexed_at", "eq", "2024-05-01T12:00:00Z"))
    plus_two = datetime(2024, 5, 1, 14, tzinfo=timezone(timedelta(hours=2)))
    assert matches_filter(node, path="a.md", metadata={}, indexed_at=plus_two) is True
    naive = datetime(2024, 5, 1, 12)
    assert matches_filter(node, path="a.md", metadata={}, indexed_at=naive) is True
    for op, expected in (("eq", False), ("ne", True)):
        unknown = parse_filter(cmp("indexed_at", op, "2024-05-01"))
        assert matches_filter(unknown, path="a.md", metadata={}, indexed_at=None) is expected


def test_element_forms() -> None:
    assert (element_text(False), element_text(True)) == ("false", "true")
    assert (element_text(7), element_text(0.5), element_text("x")) == ("7", "0.5", "x")
    assert element_text(None) is None
    assert element_number("1e999") is None  # a decimal spelling, but not finite
    assert element_number(float("inf")) is None
    assert element_number("-1e3") == -1000.0
    assert element_number(True) is None


@pytest.mark.parametrize(
    ("text", "number"),
    [
        (" 5 ", 5.0),  # Java's Double.parseDouble, which OpenSearch's double field uses
        ("\t5\n", 5.0),
        ("5d", 5.0),
        ("2.5F", 2.5),
        ("1.", 1.0),
        (".5", 0.5),
        ("0x1p4", 16.0),
        ("-0x.8p1", -1.0),
        ("0x10", None),  # hexadecimal needs its binary exponent
        ("5 d", None),
        ("5dd", None),
        ("NaN", None),
        ("Infinity", None),
        ("0x1p99999", None),
        ("1_000", None),
        ("\u00a05", None),  # a no-break space is not a blank to Java
    ],
)
def test_numbers_in_text_are_read_as_opensearch_reads_them(text: str, number: float | None) -> None:
    assert element_number(text) == number


def test_integers_beyond_a_double_and_long_texts() -> None:
    assert element_number(10**400) is None
    assert element_text("L" * 2048) == "L" * 2048
    assert element_text("L" * 2049) is None
    assert element_text("\U0001f600" * 1024) == "\U0001f600" * 1024  # 2,048 UTF-16 units
    assert element_text("\U0001f600" * 1025) is None
    assert element_text("\ud800" * 3000) is None  # a lone surrogate (JSON allows one)


@pytest.mark.parametrize(
    ("value", "number"),
    [(2**53 + 1, 2.0**53), (-0.0, 0.0), (2**64, 2.0**64), (3, 3.0)],
)
def test_a_number_in_a_filter_is_the_double_nearest_to_it(value: Any, number: float) -> None:
    parsed = parse_filter(cmp("n", "eq", value))
    assert isinstance(parsed, Comparison)
    assert type(parsed.value) is float
    assert (parsed.value, str(parsed.value)) == (number, str(number))


@pytest.mark.parametrize("where", ["value", "value[1]"])
def test_a_number_no_double_holds_is_a_400_at_its_position(where: str) -> None:
    huge = 10**400
    raw = {
        "and": [
            cmp("n", "eq", 1),
            cmp("n", "in" if "[" in where else "eq", [1, huge] if "[" in where else huge),
        ]
    }
    with pytest.raises(ValidationError) as caught:
        parse_filter(raw)
    assert (caught.value.field, caught.value.message) == (
        f"filter.and[1].{where}",
        "must be a finite number",
    )


# --- operators, each where it differs from the others ----------------------------------


META = {"team": "sre", "n": 5, "tags": ["ops", "k8s"], "draft": False}


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("eq", "sr", False),  # contains would say True
        ("eq", "sre", True),
        ("ne", "sr", True),
        ("ne", "sre", False),
        ("in", ["sr", "dev"], False),
        ("in", ["dev", "sre"], True),
        ("nin", ["sr"], True),
        ("nin", ["dev", "sre"], False),
        ("gt", "sre", False),
        ("gte", "sre", True),
        ("gte", "srf", False),
        ("lt", "sre", False),
        ("lt", "srf", True),
        ("lte", "sre", True),
        ("lte", "srd", False),
        ("starts_with", "re", False),  # contains would say True
        ("starts_with", "sr", True),
        ("contains", "re", True),
        ("contains", "x", False),
    ],
)
def test_text_operators(op: str, value: Any, expected: bool) -> None:
    node = parse_filter(cmp("team", op, value))
    assert matches_filter(node, path="a.md", metadata=META, indexed_at=None) is expected


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("gt", 5, False),
        ("gte", 5, True),
        ("lt", 5, False),
        ("lte", 5, True),
        ("lt", 5.5, True),
        ("in", [4, 5], True),
        ("nin", [4, 5], False),
    ],
)
def test_number_operators(op: str, value: Any, expected: bool) -> None:
    node = parse_filter(cmp("n", op, value))
    assert matches_filter(node, path="a.md", metadata=META, indexed_at=None) is expected


def test_false_matches_false_only() -> None:
    for value, expected in ((False, True), ("false", True), (True, False), ("False", False)):
        node = parse_filter(cmp("draft", "eq", value))
        assert matches_filter(node, path="a.md", metadata=META, indexed_at=None) is expected


# --- and / or / not over path, metadata and time ------------------------------------------

AT = datetime(2024, 5, 1, 12, tzinfo=UTC)
PATH_YES, PATH_NO = cmp("document_path", "eq", "runbooks/a.md"), cmp("document_path", "eq", "b.md")
META_YES, META_NO = cmp("team", "eq", "sre"), cmp("team", "eq", "dev")
TIME_YES, TIME_NO = cmp("indexed_at", "gte", "2024-05-01"), cmp("indexed_at", "lt", "2024-05-01")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"and": [PATH_YES, META_YES, TIME_YES]}, True),
        ({"and": [PATH_YES, META_YES, TIME_NO]}, False),
        ({"and": [PATH_NO, META_YES, TIME_YES]}, False),
        ({"or": [PATH_NO, META_NO, TIME_YES]}, True),
        ({"or": [PATH_NO, META_YES, TIME_NO]}, True),
        ({"or": [PATH_YES, META_NO, TIME_NO]}, True),
        ({"or": [PATH_NO, META_NO, TIME_NO]}, False),
        ({"not": PATH_YES}, False),
        ({"not": PATH_NO}, True),
        ({"not": META_YES}, False),
        ({"not": TIME_YES}, False),
        ({"not": TIME_NO}, True),
        ({"not": {"and": [PATH_YES, META_YES]}}, False),
    ],
)
def test_and_or_not_pass_every_field_down(raw: dict[str, Any], expected: bool) -> None:
    node = parse_filter(raw)
    assert matches_filter(node, path="runbooks/a.md", metadata=META, indexed_at=AT) is expected


@pytest.mark.parametrize(
    ("key", "refused"),
    [
        ("number", False),  # a top-level key of that name is an ordinary key
        ("page.numbers", False),
        ("a.number.b", False),
        ("year.number", True),
        ("a..number", True),
        ("\uc5f0\ub3c4.number", True),
    ],
)
def test_only_a_key_ending_in_the_numeric_sub_field_is_refused(key: str, refused: bool) -> None:
    raw = {"not": cmp(key, "eq", "x")}
    if not refused:
        assert parse_filter(raw) == Not(Comparison(key, "eq", "x"))
        return
    with pytest.raises(ValidationError) as caught:
        parse_filter(raw)
    assert caught.value.field == "filter.not.field"
    assert caught.value.message.startswith("a metadata key must not end in '.number'")


def test_a_refused_long_key_is_shown_cut_to_64_characters() -> None:
    key = "k" * 70 + ".number"
    with pytest.raises(ValidationError) as caught:
        parse_filter(cmp(key, "eq", "x"))
    assert caught.value.message.endswith(f"got '{'k' * 64}'")
