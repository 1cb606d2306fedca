"""Citations of merged passages in the KnowledgeSearch tool's result lines.

Adjacent chunks of one document are merged into one passage (knowledge.agent_tools.results); a
passage's citation must cover what it shows. Pages and rows of one sheet form a range;
chunks of two sheets or two slides cannot be named by one citation, so they stay two
passages (before, two sheets' chunks read ``sheet "Budget" rows 2-10``, rows 2-10 being
the other sheet's).
"""

from __future__ import annotations

from typing import Any

from knowledge.agent_tools.tool import format_search_results
from knowledge.core.model import SearchResult


def hit(path: str, index: int, score: float, **metadata: Any) -> SearchResult:
    return SearchResult(
        document_path=path,
        chunk_index=index,
        content=f"text of chunk {index} about the failover budget",
        score=score,
        metadata=metadata,
    )


def headers(results: list[SearchResult]) -> list[str]:
    lines = format_search_results("failover budget", results).splitlines()
    return [line.split(" (score")[0] for line in lines if line.startswith("[")]


def test_chunks_of_two_sheets_are_two_citations() -> None:
    results = [
        hit("plan.xlsx", 0, 0.9, format="xlsx", sheet="Budget", row_start=2, row_end=40),
        hit("plan.xlsx", 1, 0.8, format="xlsx", sheet="Staff", row_start=2, row_end=10),
    ]
    assert headers(results) == [
        '[1] plan.xlsx sheet "Budget" rows 2-40',
        '[2] plan.xlsx sheet "Staff" rows 2-10',
    ]


def test_chunks_of_two_slides_are_two_citations() -> None:
    results = [
        hit("deck.pptx", 3, 0.9, format="pptx", slide=2),
        hit("deck.pptx", 4, 0.8, format="pptx", slide=3),
    ]
    assert headers(results) == ["[1] deck.pptx slide 2", "[2] deck.pptx slide 3"]


def test_chunks_of_one_sheet_and_of_pages_still_merge_into_a_range() -> None:
    results = [
        hit("plan.xlsx", 0, 0.9, format="xlsx", sheet="Budget", row_start=2, row_end=40),
        hit("plan.xlsx", 1, 0.8, format="xlsx", sheet="Budget", row_start=41, row_end=70),
        hit("handbook.pdf", 3, 0.7, format="pdf", page=12),
        hit("handbook.pdf", 4, 0.6, format="pdf", page=12, page_end=13),
    ]
    assert headers(results) == [
        '[1] plan.xlsx sheet "Budget" rows 2-70',
        "[2] handbook.pdf pp. 12-13",
    ]
