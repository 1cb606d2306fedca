"""The filter clauses every OpenSearch request carries (scope, file patterns, metadata, the
search filter), tested as data (no node, no client)."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

import pytest
from opensearch_requests import AGENT_TERM, CONTEXT_TERM, SCOPE

from knowledge.core.filter_language import parse_filter
from knowledge.core.path_filters import matches_file_patterns
from knowledge.stores.opensearch.request_filters import (
    MATCH_NOTHING,
    file_pattern_filter,
    glob_to_regexp,
    glob_to_wildcard,
    metadata_filters,
    query_filters,
    scope_filters,
    scope_query,
)


# --- scope ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cross_context", "expected"),
    [
        (False, [AGENT_TERM, CONTEXT_TERM]),
        (True, [AGENT_TERM]),  # the agent boundary is never lifted
    ],
)
def test_scope_filters(cross_context: bool, expected: list[dict]) -> None:
    assert scope_filters(SCOPE, cross_context=cross_context) == expected


def test_scope_query_is_the_exact_scope() -> None:
    assert scope_query(SCOPE) == {"bool": {"filter": [AGENT_TERM, CONTEXT_TERM]}}


# --- file patterns ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "wildcard"),
    [
        ("*.md", "*.md"),
        ("runbooks/*.md", "runbooks/*.md"),
        ("deploy.md", "deploy.md"),
        ("doc?.txt", "doc?.txt"),
        ("**/x", "*/x"),  # consecutive stars are one star, as in fnmatch
        ("a\\b", "a\\\\b"),  # a backslash is literal in fnmatch, escaped in wildcard
        ("[abc].md", None),  # a class needs a regexp
        ("unclosed[", "unclosed["),  # no closing bracket: a literal '['
        ("[!z-a]x", "?x"),  # a negated empty class is any one character, as in fnmatch
    ],
)
def test_glob_to_wildcard(pattern: str, wildcard: str | None) -> None:
    assert glob_to_wildcard(pattern) == wildcard


@pytest.mark.parametrize(
    ("pattern", "regexp"),
    [
        ("*.md", ".*\\.md"),
        ("[abc].md", "[abc]\\.md"),
        ("[a-c]*", "[a-c].*"),
        ("[!a-c]?", "[^a-c]."),
        ("[]x]", "[\\]x]"),  # ']' first in a class is literal
        ("[^x]", "[\\^x]"),  # '^' is literal in fnmatch classes
        ("[!]", "\\[\\!\\]"),  # no ']' after "[!]": literal brackets, as in fnmatch
        ("a+b(c)|d", "a\\+b\\(c\\)\\|d"),  # regexp operators are literal
        ("배포*.md", "배포.*\\.md"),
        ("[z-a]x", None),  # an empty class matches nothing
        ("[]", "\\[\\]"),  # no closing bracket after ']': literal brackets
        ("[X]", "[X]"),  # only \\ ] ^ - [ are escaped in a class
        ("a[!]]", "a[^\\]]"),  # ']' right after '[!' is literal too, not only at the start
        ("[a-]", "[a\\-]"),  # a '-' last in a class is a literal '-', not a range
        ("[a-a]x", "[a-a]x"),  # a one-character range is kept
        ("[ab-d]", "[ab-d]"),  # a range after a single character
        ("[a-cx]", "[a-cx]"),  # a single character after a range
        ("[!z-a]x", ".x"),  # a negated empty class is any one character, as in fnmatch
    ],
)
def test_glob_to_regexp(pattern: str, regexp: str | None) -> None:
    assert glob_to_regexp(pattern) == regexp


GLOBS = [
    "*.md",
    "runbooks/*",
    "[a-d]*.txt",
    "[!r]*",
    "doc?.md",
    "*/deploy.md",
    "x[]]y",
    "[z-a]",
    "[!]",
    "a[!]]",
    "[a-]",
    "[ab-d]",
    "[a-cx]",
    "[!z-a]x",
]


PATHS = [
    "deploy.md",
    "runbooks/deploy.md",
    "runbooks/sub/db.txt",
    "b.txt",
    "docs.md",
    "doc1.md",
    "x]y",
    "r.md",
    "배포.md",
    "[!]",
    "-",
    "a-",
    "ab",
    "c",
    "x",
    "ax",
]


@pytest.mark.parametrize("pattern", GLOBS)
def test_glob_translation_agrees_with_fnmatch(pattern: str) -> None:
    # Lucene regexp, as generated here, reads the same in Python's re.
    regexp = glob_to_regexp(pattern)
    for path in PATHS:
        expected = fnmatchcase(path, pattern)
        actual = regexp is not None and re.fullmatch(regexp, path) is not None
        assert actual == expected, (pattern, path)


def test_no_file_patterns_is_no_filter() -> None:
    assert file_pattern_filter(()) is None


def test_file_patterns_match_path_or_base_name() -> None:
    assert file_pattern_filter(["*.md", "[ab]*"]) == {
        "bool": {
            "should": [
                {"wildcard": {"document_path": {"value": "*.md"}}},
                {"wildcard": {"document_name": {"value": "*.md"}}},
                {"regexp": {"document_path": {"value": "[ab].*", "flags": "NONE"}}},
                {"regexp": {"document_name": {"value": "[ab].*", "flags": "NONE"}}},
            ],
            "minimum_should_match": 1,
        }
    }


def test_file_patterns_that_cannot_match_filter_everything_out() -> None:
    assert file_pattern_filter(["[z-a]"]) == MATCH_NOTHING
    # a literal body, not the module's own constant: a misspelt key would match nothing
    assert MATCH_NOTHING == {"bool": {"must_not": [{"match_all": {}}]}}


@pytest.mark.parametrize(("path", "pattern"), [(p, g) for p in PATHS for g in GLOBS])
def test_path_or_base_name_semantics_match_knowledge_filters(path: str, pattern: str) -> None:
    base = path.rsplit("/", 1)[-1]
    regexp = glob_to_regexp(pattern)
    engine = regexp is not None and any(re.fullmatch(regexp, s) for s in (path, base))
    assert engine == matches_file_patterns(path, [pattern])


# --- metadata ---------------------------------------------------------------------------
def test_metadata_filters_are_sorted_term_filters() -> None:
    assert metadata_filters({"team": "ops", "env": "prod"}) == [
        {"term": {"metadata.env": "prod"}},
        {"term": {"metadata.team": "ops"}},
    ]
    assert metadata_filters({}) == []


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, [AGENT_TERM, CONTEXT_TERM]),
        ({"cross_context": True}, [AGENT_TERM]),
        (
            {"file_patterns": ["*.md"], "metadata": {"team": "ops"}},
            [
                AGENT_TERM,
                CONTEXT_TERM,
                {
                    "bool": {
                        "should": [
                            {"wildcard": {"document_path": {"value": "*.md"}}},
                            {"wildcard": {"document_name": {"value": "*.md"}}},
                        ],
                        "minimum_should_match": 1,
                    }
                },
                {"term": {"metadata.team": "ops"}},
            ],
        ),
    ],
)
def test_query_filters(kwargs: dict, expected: list[dict]) -> None:
    assert query_filters(SCOPE, **kwargs) == expected


def test_the_search_filter_is_the_last_filter() -> None:
    search_filter = parse_filter({"field": "team", "op": "eq", "value": "ops"})
    assert query_filters(SCOPE, search_filter=search_filter) == [
        {"term": {"agent": "ops-bot"}},
        {"term": {"context": "runbooks"}},
        {"term": {"metadata.team": "ops"}},
    ]
