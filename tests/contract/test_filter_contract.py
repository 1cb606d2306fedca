"""The search ``filter`` contract, run against every store (conftest.py) and mode.

The same table of filters and expected documents holds on every store: the memory
store's evaluator, the embedded store's SQL and OpenSearch's queries on the real node.
Expected sets are written out by hand from the sidecars below, never computed by the
code under test. Sidecar values are strings (``parse_metadata_sidecar``), so numeric
comparisons here prove that a string spelling a number compares as a number.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.stores.protocol import KnowledgeStore

A_X = KnowledgeScope("agent-a", "ctx-x")
A_Y = KnowledgeScope("agent-a", "ctx-y")
B_X = KnowledgeScope("agent-b", "ctx-x")

TEXT = "incident response review for the payments service"

DOCS: dict[str, dict[str, Any] | None] = {
    "reports/q1.md": {
        "team": "sre",
        "year": 2023,
        "score": "9",
        "released": "2023-03-31",
        "tags": ["ops", "oncall"],
        "draft": False,
    },
    "reports/q2.md": {
        "team": "dev",
        "year": 2024,
        "score": 10,
        "released": "2024-06-30",
        "tags": ["ops"],
    },
    "reports/q3.md": {
        "team": "sre",
        "year": "2024",
        "score": "10.5",
        "released": "2024-09-30T08:00:00Z",
        "tags": ["k8s"],
        "draft": True,
    },
    "notes/misc.txt": None,
    "notes/legacy.md": {"team": "platform-sre", "year": "unknown", "score": "n/a"},
}

ALL = frozenset(DOCS)
Q1, Q2, Q3 = "reports/q1.md", "reports/q2.md", "reports/q3.md"
MISC, LEGACY = "notes/misc.txt", "notes/legacy.md"


def _cmp(field: str, op: str, value: Any) -> dict[str, Any]:
    return {"field": field, "op": op, "value": value}


CASES: list[tuple[str, dict[str, Any], frozenset[str]]] = [
    ("eq", _cmp("team", "eq", "sre"), frozenset({Q1, Q3})),
    ("ne-includes-missing", _cmp("team", "ne", "sre"), frozenset({Q2, MISC, LEGACY})),
    ("eq-missing-key", _cmp("nokey", "eq", "x"), frozenset()),
    ("ne-missing-key", _cmp("nokey", "ne", "x"), ALL),
    ("number-gt", _cmp("year", "gt", 2023), frozenset({Q2, Q3})),
    ("number-gte", _cmp("year", "gte", 2023), frozenset({Q1, Q2, Q3})),
    ("number-eq", _cmp("year", "eq", 2024), frozenset({Q2, Q3})),
    ("number-in", _cmp("year", "in", [2023, 2025]), frozenset({Q1})),
    ("number-nin", _cmp("year", "nin", [2024]), frozenset({Q1, MISC, LEGACY})),
    # "10" and "10.5" are numbers: 9.5 < 10 although "10" < "9.5" as text.
    ("number-not-text", _cmp("score", "gt", 9.5), frozenset({Q2, Q3})),
    ("number-lte", _cmp("score", "lte", 10), frozenset({Q1, Q2})),
    # The same key compared as text: code point order.
    ("text-lt", _cmp("score", "lt", "9"), frozenset({Q2, Q3})),
    ("text-eq-number", _cmp("year", "eq", "2024"), frozenset({Q2, Q3})),
    ("date-gte", _cmp("released", "gte", "2024-01-01"), frozenset({Q2, Q3})),
    ("date-lt", _cmp("released", "lt", "2024"), frozenset({Q1})),
    (
        "date-range",
        {"and": [_cmp("released", "gt", "2024-06-30"), _cmp("released", "lt", "2024-12-31")]},
        frozenset({Q3}),
    ),
    ("list-eq", _cmp("tags", "eq", "ops"), frozenset({Q1, Q2})),
    ("list-in", _cmp("tags", "in", ["k8s", "oncall"]), frozenset({Q1, Q3})),
    ("list-nin", _cmp("tags", "nin", ["ops"]), frozenset({Q3, MISC, LEGACY})),
    ("starts-with", _cmp("team", "starts_with", "platform"), frozenset({LEGACY})),
    ("contains", _cmp("team", "contains", "sre"), frozenset({Q1, Q3, LEGACY})),
    ("contains-wildcard-literal", _cmp("team", "contains", "s*e"), frozenset()),
    ("boolean", _cmp("draft", "eq", True), frozenset({Q3})),
    ("boolean-false", _cmp("draft", "eq", False), frozenset({Q1})),
    ("path-prefix", _cmp("document_path", "starts_with", "reports/"), frozenset({Q1, Q2, Q3})),
    ("path-in", _cmp("document_path", "in", [Q2, MISC, "nope.md"]), frozenset({Q2, MISC})),
    ("path-contains", _cmp("document_path", "contains", "leg"), frozenset({LEGACY})),
    ("path-range", _cmp("document_path", "lt", "reports/q2.md"), frozenset({Q1, MISC, LEGACY})),
    ("source-type", _cmp("format", "eq", "text"), frozenset({MISC})),
    ("source-type-in", _cmp("format", "in", ["markdown"]), ALL - {MISC}),
    ("indexed-after-epoch", _cmp("indexed_at", "gte", "2000-01-01"), ALL),
    ("indexed-before-epoch", _cmp("indexed_at", "lt", "2000-01-01T00:00:00Z"), frozenset()),
    (
        "indexed-in-future",
        _cmp("indexed_at", "gt", (datetime.now(UTC) + timedelta(days=1)).isoformat()),
        frozenset(),
    ),
    ("indexed-ne-epoch", _cmp("indexed_at", "ne", "2000-01-01"), ALL),
    (
        "and-or",
        {
            "or": [
                {"and": [_cmp("team", "eq", "sre"), _cmp("year", "lt", 2024)]},
                _cmp("tags", "eq", "k8s"),
            ]
        },
        frozenset({Q1, Q3}),
    ),
    ("not-in", {"not": _cmp("team", "in", ["sre", "dev"])}, frozenset({MISC, LEGACY})),
    ("not-not", {"not": {"not": _cmp("team", "eq", "dev")}}, frozenset({Q2})),
    ("or-nothing", {"or": [_cmp("team", "eq", "x"), _cmp("year", "gt", 3000)]}, frozenset()),
]


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _index(store: KnowledgeStore, bucket: Path, scope: KnowledgeScope) -> None:
    for rel, attrs in DOCS.items():
        _write(bucket, f"{scope.key}/{rel}", f"# {rel}\n\n{TEXT}\n")
        if attrs is not None:
            body = json.dumps({"metadataAttributes": attrs})
            _write(bucket, f"{scope.key}/{rel}.metadata.json", body)
    result = index_source(store, scope, BucketFolderSource(bucket), IndexOptions())
    assert result.errors == (), result.errors


def _search(
    store: KnowledgeStore, scope: KnowledgeScope, mode: SearchMode, **fields: Any
) -> list[SearchResult]:
    return store.search(scope, SearchQuery(TEXT, mode=mode, max_results=50, **fields))


def _paths(results: list[SearchResult]) -> frozenset[str]:
    return frozenset(r.document_path for r in results)


def test_every_filter_finds_the_same_documents(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    _index(store, bucket, A_X)
    assert _paths(_search(store, A_X, mode)) == ALL  # every document is a candidate
    wrong = {}
    for name, raw, expected in CASES:
        found = _paths(_search(store, A_X, mode, filter=raw))
        if found != expected:
            wrong[name] = (sorted(found), sorted(expected))
    assert wrong == {}


def test_filter_and_metadata_both_hold(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    _index(store, bucket, A_X)
    found = _search(store, A_X, mode, metadata={"team": "sre"}, filter=_cmp("year", "eq", 2024))
    assert _paths(found) == {Q3}
    found = _search(store, A_X, mode, metadata={"team": "dev"}, filter=_cmp("year", "lt", 2024))
    assert found == []


def test_filtered_results_keep_scores_in_range(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    _index(store, bucket, A_X)
    found = _search(store, A_X, mode, filter=_cmp("team", "eq", "sre"))
    assert _paths(found) == {Q1, Q3}
    assert all(0.0 <= r.score <= 1.0 for r in found)
    assert all(r.rank_score is not None and 0.0 <= r.rank_score <= 1.0 for r in found)
    # Filter first, then normalise: the best chunk the caller can see ranks at 1 (keyword).
    if mode is SearchMode.KEYWORD:
        assert max(r.rank_score or 0.0 for r in found) == pytest.approx(1.0)


def test_a_key_holding_dates_and_other_text_indexes_and_compares_as_text(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    # Written in this order, a date first: a store must not type the key as a date and
    # then refuse the document whose value is not one.
    for rel, released in (("a.md", "2024-05-01"), ("b.md", "someday"), ("c.md", "2023-12-31")):
        _write(bucket, f"{A_X.key}/{rel}", f"# {rel}\n\n{TEXT}\n")
        sidecar = json.dumps({"metadataAttributes": {"released": released}})
        _write(bucket, f"{A_X.key}/{rel}.metadata.json", sidecar)
    result = index_source(store, A_X, BucketFolderSource(bucket), IndexOptions())
    assert (result.errors, result.indexed_documents) == ((), 3)
    found = _search(store, A_X, mode, filter=_cmp("released", "gte", "2024"))
    assert _paths(found) == {"a.md", "b.md"}  # "someday" > "2024" as text
    found = _search(store, A_X, mode, filter=_cmp("released", "lt", "2024-06"))
    assert _paths(found) == {"a.md", "c.md"}


# --- isolation: no filter reaches another scope ----------------------------------------


def test_no_filter_reaches_another_agent(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    _index(store, bucket, A_X)
    secret = {"team": "sre", "agent": "agent-a", "context": "ctx-x", "owner": "agent-b"}
    _write(bucket, f"{B_X.key}/secret.md", f"# Secret\n\n{TEXT}\n")
    _write(bucket, f"{B_X.key}/secret.md.metadata.json", json.dumps({"metadataAttributes": secret}))
    assert index_source(store, B_X, BucketFolderSource(bucket), IndexOptions()).errors == ()

    probes: list[dict[str, Any]] = [
        _cmp("document_path", "eq", "secret.md"),
        _cmp("owner", "eq", "agent-b"),
        _cmp("agent", "eq", "agent-b"),
        _cmp("context", "ne", "ctx-x"),
        _cmp("source_key", "starts_with", "agent-b/"),
        _cmp("source_key", "contains", "secret"),
        {"not": _cmp("document_path", "in", sorted(ALL))},
        {"or": [_cmp("owner", "eq", "agent-b"), {"not": _cmp("team", "ne", "zzz")}]},
    ]
    for probe in probes:
        for cross_context in (False, True):
            found = _search(store, A_X, mode, filter=probe, cross_context=cross_context)
            assert all(r.metadata["source_key"].startswith("agent-a/") for r in found), probe
            assert "secret.md" not in _paths(found), probe
    # Filters that match everything stay inside the scope.
    everything = {"not": _cmp("nokey", "eq", "x")}
    assert _paths(_search(store, A_X, mode, filter=everything)) == ALL
    assert _paths(_search(store, B_X, mode, filter=everything)) == {"secret.md"}


def test_a_filter_never_widens_to_another_context(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    _index(store, bucket, A_X)
    _write(bucket, f"{A_Y.key}/other.md", f"# Other\n\n{TEXT}\n")
    assert index_source(store, A_Y, BucketFolderSource(bucket), IndexOptions()).errors == ()
    probe = {"or": [_cmp("document_path", "eq", "other.md"), _cmp("team", "eq", "sre")]}
    assert _paths(_search(store, A_X, mode, filter=probe)) == {Q1, Q3}
    assert _paths(_search(store, A_X, mode, filter=probe, cross_context=True)) == {
        Q1,
        Q3,
        "other.md",
    }


# --- numbers and texts at the edges: the same answer on every store ---------------------

# Sidecar values as OpenSearch's ``double`` sub-field reads them (Java's number grammar:
# blanks around, a d/f suffix, hexadecimal with a binary exponent), zeros of both signs,
# integers past 2**53 (equal as doubles), and texts past the keyword length OpenSearch
# indexes (2,048 UTF-16 code units: "L" * 3000, and 1,500 emoji of two code units each).
EDGE_DOCS: dict[str, dict[str, str]] = {
    "pad.md": {"n": " 5 "},
    "suffix.md": {"n": "5d"},
    "hex.md": {"n": "0x1p2"},
    "five.md": {"n": "5.0"},
    "negzero.md": {"n": "-0"},
    "zero.md": {"n": "0"},
    "big.md": {"n": "9007199254740993"},
    "bigger.md": {"n": "9007199254740992"},
    "word.md": {"n": "five", "s": "x"},
    "long.md": {"s": "L" * 3000},
    "astral.md": {"s": "\U0001f600" * 1500},
    "short.md": {"s": "LL"},
}
NUMERIC = frozenset(
    {"pad.md", "suffix.md", "hex.md", "five.md", "negzero.md", "zero.md", "big.md", "bigger.md"}
)
EDGE_CASES: list[tuple[str, dict[str, Any], frozenset[str]]] = [
    ("java-spellings-eq", _cmp("n", "eq", 5), frozenset({"pad.md", "suffix.md", "five.md"})),
    ("java-spellings-gt", _cmp("n", "gt", 4.5), NUMERIC - {"hex.md", "negzero.md", "zero.md"}),
    ("hex-lt", _cmp("n", "lt", 4.5), frozenset({"hex.md", "negzero.md", "zero.md"})),
    ("zero-eq", _cmp("n", "eq", 0), frozenset({"negzero.md", "zero.md"})),
    ("negative-zero-eq", _cmp("n", "eq", -0.0), frozenset({"negzero.md", "zero.md"})),
    ("zero-lt", _cmp("n", "lt", 0), frozenset()),
    ("zero-gte", _cmp("n", "gte", 0), NUMERIC),
    ("zero-gt", _cmp("n", "gt", 0), NUMERIC - {"negzero.md", "zero.md"}),
    ("zero-lte", _cmp("n", "lte", 0), frozenset({"negzero.md", "zero.md"})),
    ("zero-in", _cmp("n", "in", [0, 4]), frozenset({"negzero.md", "zero.md", "hex.md"})),
    ("zero-nin", _cmp("n", "nin", [0]), frozenset(EDGE_DOCS) - {"negzero.md", "zero.md"}),
    ("zero-ne", _cmp("n", "ne", 0), frozenset(EDGE_DOCS) - {"negzero.md", "zero.md"}),
    ("past-2-53-eq", _cmp("n", "eq", 9007199254740993), frozenset({"big.md", "bigger.md"})),
    ("past-2-53-gt", _cmp("n", "gt", 9007199254740992), frozenset()),
    ("past-2-63-lt", _cmp("n", "lt", 2**63), NUMERIC),
    ("past-2-64-gt", _cmp("n", "gt", -(10**30)), NUMERIC),
    ("past-2-64-eq", _cmp("n", "eq", 2**64), frozenset()),
    ("long-starts-with", _cmp("s", "starts_with", "LL"), frozenset({"short.md"})),
    ("long-contains", _cmp("s", "contains", "L"), frozenset({"short.md"})),
    ("long-gt", _cmp("s", "gt", "A"), frozenset({"short.md", "word.md"})),
    ("long-ne", _cmp("s", "ne", "LL"), frozenset(EDGE_DOCS) - {"short.md"}),
    ("long-not-eq", {"not": _cmp("s", "eq", "x")}, frozenset(EDGE_DOCS) - {"word.md"}),
]


@pytest.mark.modes(SearchMode.KEYWORD, SearchMode.VECTOR)
def test_numbers_and_long_texts_at_the_edges_compare_alike(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    for rel, attrs in EDGE_DOCS.items():
        _write(bucket, f"{A_X.key}/{rel}", f"# {rel}\n\n{TEXT}\n")
        _write(bucket, f"{A_X.key}/{rel}.metadata.json", json.dumps({"metadataAttributes": attrs}))
    result = index_source(store, A_X, BucketFolderSource(bucket), IndexOptions())
    assert (result.errors, result.indexed_documents) == ((), len(EDGE_DOCS))
    wrong = {}
    for name, raw, expected in EDGE_CASES:
        try:
            found: object = sorted(_paths(_search(store, A_X, mode, filter=raw)))
        except Exception as exc:  # a store refusing a valid filter is a wrong answer too
            found = f"{type(exc).__name__}: {exc}"
        if found != sorted(expected):
            wrong[name] = (found, sorted(expected))
    assert wrong == {}


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"filter": _cmp("team.number", "eq", "x")}, "filter.field"),
        (
            {"filter": {"or": [_cmp("team", "eq", "x"), _cmp("n.number", "gt", 1)]}},
            "filter.or[1].field",
        ),
        ({"metadata": {"team.number": "x"}}, "metadata"),
        ({"metadata": {"n.number": "5"}}, "metadata"),
    ],
)
def test_a_key_naming_the_numeric_sub_field_is_refused(
    store: KnowledgeStore, bucket: Path, fields: dict[str, Any], where: str
) -> None:
    # ``<key>.number`` is where OpenSearch keeps a key's numbers: as a metadata key it
    # would read that sub-field (a 5xx for text, numbers as text) instead of a key of
    # that name. Every store refuses it alike, naming the position.
    _write(bucket, f"{A_X.key}/a.md", f"# a\n\n{TEXT}\n")
    sidecar = json.dumps({"metadataAttributes": {"team": "sre", "n": "5"}})
    _write(bucket, f"{A_X.key}/a.md.metadata.json", sidecar)
    assert index_source(store, A_X, BucketFolderSource(bucket), IndexOptions()).errors == ()
    with pytest.raises(ValidationError) as caught:
        _search(store, A_X, SearchMode.KEYWORD, **fields)
    assert caught.value.field == where
    assert "'.number'" in caught.value.message
