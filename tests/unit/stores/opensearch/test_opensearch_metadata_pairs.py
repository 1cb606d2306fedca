"""knowledge.stores.opensearch.metadata_pairs and the filters that read its terms."""

from __future__ import annotations

import json
import math
import random

import pytest

from knowledge.core.filter_language import parse_filter
from knowledge.stores.opensearch.filter_query import filter_query
from knowledge.stores.opensearch.metadata_pairs import (
    key_range,
    metadata_terms,
    number_code,
    number_term,
    text_term,
)

EDGES = [
    -math.inf,
    -1.7976931348623157e308,
    -1e300,
    -2.5,
    -1.0,
    -5e-324,
    0.0,
    5e-324,
    1e-300,
    0.5,
    1.0,
    2.0,
    2024.0,
    9007199254740993.0,
    1e300,
    1.7976931348623157e308,
    math.inf,
]


def test_number_codes_sort_as_the_numbers_do() -> None:
    rng = random.Random(7)
    numbers = EDGES + [rng.uniform(-1e6, 1e6) for _ in range(500)]
    numbers += [rng.choice((-1, 1)) * 10 ** rng.uniform(-300, 300) for _ in range(500)]
    codes = [number_code(n) for n in numbers]
    assert all(len(code) == 16 for code in codes)
    by_code = [n for _, n in sorted(zip(codes, numbers, strict=True))]
    assert by_code == sorted(numbers)


def test_minus_zero_is_zero() -> None:
    assert number_code(-0.0) == number_code(0.0) == number_code(0)


@pytest.mark.parametrize(
    ("number", "code"),
    [
        (0.0, "8000000000000000"),
        (1.0, "bff0000000000000"),
        (-1.0, "400fffffffffffff"),
        (2024, "c09fa00000000000"),
        (-2.5, "3ffbffffffffffff"),
    ],
)
def test_number_codes_are_the_ieee_bits_with_the_sign_turned(number: float, code: str) -> None:
    assert number_code(number) == code


def test_terms_hold_every_element_as_text_and_numbers_as_codes() -> None:
    terms = metadata_terms(
        {"year": "2024", "tags": ["ops", "k8s"], "ok": True, "n": 3, "x": None, "obj": {}}
    )
    assert terms["metadata_terms"] == [
        "year\x1f2024",
        "tags\x1fops",
        "tags\x1fk8s",
        "ok\x1ftrue",
        "n\x1f3",
    ]
    assert terms["metadata_numbers"] == [number_term("year", 2024), number_term("n", 3)]


def test_a_key_holding_the_separator_is_left_out_and_no_terms_no_fields() -> None:
    assert metadata_terms({"a\x1fb": "c"}) == {}
    assert metadata_terms({"a\x1fb": "c", "d": "e"}) == {"metadata_terms": ["d\x1fe"]}
    assert metadata_terms({}) == {}
    assert metadata_terms({"word": "not a number"}) == {"metadata_terms": ["word\x1fnot a number"]}


def test_a_key_range_holds_every_term_of_the_key_and_no_other_keys() -> None:
    lowest, above = key_range("team")
    inside = [text_term("team", v) for v in ("", "a", "\x00", "\U0010ffff" * 3)]
    outside = [
        text_term("tea", "z"),
        text_term("teamx", ""),
        text_term("team.lead", "a"),
        text_term("team-b", "a"),
        text_term("teal", "\U0010ffff"),
    ]
    assert all(lowest <= term < above for term in inside)
    assert not any(lowest <= term < above for term in outside)


@pytest.mark.parametrize(
    ("op", "bounds"),
    [
        ("gt", {"gt": "year\x1f2024", "lt": "year\x20"}),
        ("gte", {"gte": "year\x1f2024", "lt": "year\x20"}),
        ("lt", {"lt": "year\x1f2024", "gte": "year\x1f"}),
        ("lte", {"lte": "year\x1f2024", "gte": "year\x1f"}),
    ],
)
def test_text_order_comparisons_stay_inside_the_key(op: str, bounds: dict[str, str]) -> None:
    node = parse_filter({"field": "year", "op": op, "value": "2024"})
    assert filter_query(node, pairs=True) == {"range": {"metadata_terms": bounds}}


def test_numeric_comparisons_read_the_number_codes() -> None:
    node = parse_filter({"field": "year", "op": "gte", "value": 2024})
    assert filter_query(node, pairs=True) == {
        "range": {"metadata_numbers": {"gte": number_term("year", 2024), "lt": "year\x20"}}
    }
    node = parse_filter({"field": "n", "op": "nin", "value": [1, 2]})
    assert filter_query(node, pairs=True) == {
        "bool": {
            "must_not": [
                {"terms": {"metadata_numbers": [number_term("n", 1), number_term("n", 2)]}}
            ]
        }
    }


def test_text_matches_escape_the_wildcard_and_keep_the_key() -> None:
    node = parse_filter({"field": "title", "op": "contains", "value": "a*b?c\\"})
    assert filter_query(node, pairs=True) == {
        "wildcard": {"metadata_terms": {"value": "title\x1f*a\\*b\\?c\\\\*"}}
    }
    node = parse_filter({"field": "title", "op": "starts_with", "value": "Dep"})
    assert filter_query(node, pairs=True) == {
        "prefix": {"metadata_terms": {"value": "title\x1fDep"}}
    }


def test_reserved_fields_keep_their_own_fields() -> None:
    node = parse_filter({"field": "document_path", "op": "starts_with", "value": "guides/"})
    assert filter_query(node, pairs=True) == filter_query(node, pairs=False)
    assert filter_query(node, pairs=True) == {"prefix": {"document_path": {"value": "guides/"}}}


@pytest.mark.parametrize(
    ("raw", "body"),
    [
        (
            {"field": "team", "op": "eq", "value": "sre"},
            {"term": {"metadata_terms": "team\x1fsre"}},
        ),
        (
            {"field": "team", "op": "ne", "value": "sre"},
            {"bool": {"must_not": [{"term": {"metadata_terms": "team\x1fsre"}}]}},
        ),
        (
            {"field": "tags", "op": "in", "value": ["a", "b"]},
            {"terms": {"metadata_terms": ["tags\x1fa", "tags\x1fb"]}},
        ),
        (
            {"field": "tags", "op": "nin", "value": ["a"]},
            {"bool": {"must_not": [{"terms": {"metadata_terms": ["tags\x1fa"]}}]}},
        ),
        (
            {"field": "n", "op": "eq", "value": 3},
            {"term": {"metadata_numbers": number_term("n", 3)}},
        ),
    ],
)
def test_equalities_are_terms_of_the_key(raw: dict[str, object], body: dict[str, object]) -> None:
    assert filter_query(parse_filter(raw), pairs=True) == body


def test_and_or_not_read_the_terms_all_the_way_down() -> None:
    leaf = {"field": "team", "op": "eq", "value": "sre"}
    term = {"term": {"metadata_terms": "team\x1fsre"}}
    node = parse_filter({"and": [{"or": [leaf, {"not": leaf}]}]})
    assert filter_query(node, pairs=True) == {
        "bool": {
            "filter": [
                {
                    "bool": {
                        "should": [term, {"bool": {"must_not": [term]}}],
                        "minimum_should_match": 1,
                    }
                }
            ]
        }
    }


# --- an index before schema 4: numbers in the ``double`` sub-field, where -0.0 < 0.0 ------


@pytest.mark.parametrize(
    ("op", "value", "body"),
    [
        ("eq", 0, {"range": {"metadata.n.number": {"gte": -0.0, "lte": 0.0}}}),
        (
            "ne",
            0,
            {"bool": {"must_not": [{"range": {"metadata.n.number": {"gte": -0.0, "lte": 0.0}}}]}},
        ),
        ("gte", 0, {"range": {"metadata.n.number": {"gte": -0.0}}}),
        ("lt", 0, {"range": {"metadata.n.number": {"lt": -0.0}}}),
        ("gt", 0, {"range": {"metadata.n.number": {"gt": 0.0}}}),
        ("lte", 0, {"range": {"metadata.n.number": {"lte": 0.0}}}),
        ("eq", 5, {"term": {"metadata.n.number": 5.0}}),
        ("in", [0, 2], {"terms": {"metadata.n.number": [0.0, 2.0, -0.0]}}),
        ("nin", [2], {"bool": {"must_not": [{"terms": {"metadata.n.number": [2.0]}}]}}),
    ],
)
def test_an_older_index_compares_both_zeros_alike(op: str, value: object, body: object) -> None:
    node = parse_filter({"field": "n", "op": op, "value": value})
    # json.dumps tells -0.0 from 0.0 (== does not).
    assert json.dumps(filter_query(node), sort_keys=True) == json.dumps(body, sort_keys=True)
