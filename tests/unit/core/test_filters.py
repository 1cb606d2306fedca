from __future__ import annotations

import pytest

from knowledge.core.path_filters import matches_file_patterns, matches_metadata


@pytest.mark.parametrize(
    ("path", "patterns", "expected"),
    [
        ("runbooks/deploy.md", (), True),
        ("runbooks/deploy.md", ("*.md",), True),
        ("deploy.md", ("*.md",), True),
        ("runbooks/deploy.txt", ("*.md",), False),
        ("runbooks/deploy.txt", ("*.md", "*.txt"), True),
        # The base name alone matches.
        ("runbooks/deep/deploy.md", ("deploy.md",), True),
        ("runbooks/deep/other.md", ("deploy.md",), False),
        # The whole relative path matches; '*' crosses '/'.
        ("runbooks/deploy.md", ("runbooks/*",), True),
        ("runbooks/deep/deploy.md", ("runbooks/*",), True),
        ("guides/runbooks/deploy.md", ("runbooks/*",), False),
        ("runbooks/deploy.md", ("runbooks/*.md",), True),
        ("runbooks/deploy.md", ("guides/*",), False),
        # Case-sensitive, as S3 keys are.
        ("runbooks/DEPLOY.MD", ("*.md",), False),
        ("runbooks/deploy.md", ("Runbooks/*",), False),
        ("a/b/c.md", ("a/?/c.md",), True),
        ("a/b/c.md", ("a/[bc]/*",), True),
        ("a/d/c.md", ("a/[bc]/*",), False),
        # '**/' is zero or more folders (the glob models and people write for "anywhere").
        ("deploy.md", ("**/*.md",), True),
        ("runbooks/deploy.md", ("**/*.md",), True),
        ("runbooks/deep/deploy.md", ("**/*.md",), True),
        ("runbooks/deploy.txt", ("**/*.md",), False),
        ("runbooks/deploy.md", ("runbooks/**/*.md",), True),
        ("runbooks/deep/deploy.md", ("runbooks/**/deploy.md",), True),
        ("guides/deploy.md", ("runbooks/**/*.md",), False),
        ("runbooks/deploy.md", ("**/runbooks/**/*.md",), True),
        ("a/runbooks/b/deploy.md", ("**/runbooks/**/*.md",), True),
        ("runbooksdeploy.md", ("runbooks/**/*.md",), False),
    ],
)
def test_matches_file_patterns(path: str, patterns: tuple[str, ...], expected: bool) -> None:
    assert matches_file_patterns(path, patterns) is expected


META = {
    "team": "sre",
    "tags": ["ops", "oncall"],
    "heading_path": ("Deploy", "Rollback"),
    "flag": True,
    "draft": False,
    "year": 2024,
    "ratio": 0.5,
    "nothing": None,
}


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, True),
        ({"team": "sre"}, True),
        ({"team": "SRE"}, False),
        ({"team": "dev"}, False),
        ({"missing": "x"}, False),
        ({"tags": "ops"}, True),
        ({"tags": "oncall"}, True),
        ({"tags": "op"}, False),
        ({"heading_path": "Rollback"}, True),
        ({"flag": "true"}, True),
        ({"flag": "True"}, False),
        ({"flag": "false"}, False),
        ({"draft": "false"}, True),
        ({"draft": "true"}, False),
        ({"draft": "False"}, False),
        ({"year": "2024"}, True),
        ({"ratio": "0.5"}, True),
        ({"nothing": "None"}, False),
        ({"team": "sre", "tags": "ops"}, True),
        ({"team": "sre", "tags": "dev"}, False),
    ],
)
def test_matches_metadata(filters: dict[str, str], expected: bool) -> None:
    assert matches_metadata(META, filters) is expected


def test_no_metadata_matches_only_no_filters() -> None:
    assert matches_metadata({}, {}) is True
    assert matches_metadata({}, {"team": "sre"}) is False
