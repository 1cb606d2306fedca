"""The layer's, the Lambda handlers' and the benchmarks' comments and docstrings say what
the code does and why, not where it came from: no issue, round, stop or session numbers
and no sections of the seed documents, which a reader of the code cannot follow (history
lives in git and docs/). A file of the repository (``bench/REPORT.md``'s "Synonyms",
``docs/ranking.md``) may be named. Comments are read with ``tokenize``; docstrings are the
string statements of the syntax tree (module, class and function docstrings, and those
under an assignment)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCANNED = (ROOT / "layers" / "knowledge" / "knowledge", ROOT / "functions", ROOT / "bench")
SKIPPED = ("__pycache__", "data")  # bench/data: downloaded and generated sets, not our code

HISTORY = re.compile(
    r"""
    # issue 29, round 6, stop 34, session 3: the word needs a number after it, so "round
    # trip", "rounded", "stop words" and "a write session" are ordinary words
      \b(?:issues?|rounds?|stops?|sessions?)[\s-]+\#?\d+(?:\.\d+)*
    # seed section 3.5, seed 8.1, the seed document (a random seed 0 is not one)
    | (?<!random\s)\bseeds?(?:'s)?[\s-]+(?:sections?|docs?\b|documents?|\#?\d+(?:\.\d+)*)
    # the seed's order, as the seed has it
    | \bthe[\s-]+seed\b
    """,
    re.IGNORECASE | re.VERBOSE,
)


def _python_files() -> list[Path]:
    return sorted(
        path
        for folder in SCANNED
        for path in folder.rglob("*.py")
        if not any(part in SKIPPED for part in path.relative_to(folder).parts)
    )


def _texts(source: str) -> list[tuple[int, str]]:
    """``(first line, text)`` of every comment and docstring of a module's source."""
    found: list[tuple[int, str]] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found.append((token.start[0], token.string))
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            # The source text, not the value: its lines are the file's lines.
            found.append((node.lineno, ast.get_source_segment(source, node) or ""))
    return found


def history_references(source: str) -> list[tuple[int, str]]:
    """``(line, matched text)`` of every history reference in the comments and docstrings."""
    hits: list[tuple[int, str]] = []
    for first_line, text in _texts(source):
        for match in HISTORY.finditer(text):
            line = first_line + text.count("\n", 0, match.start())
            hits.append((line, " ".join(match.group().split())))
    return sorted(hits)


def test_no_history_references_in_comments_or_docstrings() -> None:
    files = _python_files()
    assert len(files) > 50, "the layer's files were not found"
    assert any(path.is_relative_to(ROOT / "bench" / "runs") for path in files), "nor bench's"
    problems = []
    for path in files:
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for line, text in history_references(source):
            problems.append(
                f"{path.relative_to(ROOT)}:{line}: {text!r} in {lines[line - 1].strip()!r}"
            )
    assert not problems, (
        "comments and docstrings cite history (say what the code does and why instead):\n"
        + "\n".join(problems)
    )


@pytest.mark.parametrize(
    "text",
    [
        "(issue 29)",
        "issues 24 and 25",
        "Issue #9",
        "before round 6, hybrid answered nothing then",
        "Round 9's SharedLibraryStore.search",
        "stop 34",
        "session 12",
        "seed section 3.5",
        "(seed 8.1)",
        "the seed's order",
        "as the seed has it",
        "the seed document",
    ],
)
def test_history_references_are_found(text: str) -> None:
    source = f'"""Docstring {text}."""\n\nX = 1  # comment {text}\n'
    assert [line for line, _ in history_references(source)] == [1, 3]


@pytest.mark.parametrize(
    "text",
    [
        "one round trip per request",
        "a round-trip of the record",
        "rounded up",
        "one call per round of answers",
        "English stop words dropped",
        "the writes stop, the run ends",
        "stops waiting at 3 seconds",
        "the write session's 2 threads",
        "a session ends",
        "issues a request",
        "the random seed 0",
        "bench/REPORT.md section 1.3",
        "docs/ranking.md, section 3",
        "bench/results/history.md 1c",
        "step 4 of the generation protocol",
    ],
)
def test_ordinary_words_are_not_history(text: str) -> None:
    source = f'"""Docstring: {text}."""\n\nX = 1  # comment: {text}\n'
    assert history_references(source) == []


def test_a_wrapped_docstring_names_the_line_of_the_reference() -> None:
    source = 'def f() -> None:\n    """First line.\n\n    Then (issue 29)."""\n'
    assert history_references(source) == [(4, "issue 29")]
