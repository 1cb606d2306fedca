"""knowledge.agent_tools.prompt_context: the block's guarantees as data, over many budgets."""

from __future__ import annotations

import random
import re

import pytest

from knowledge.agent_tools.prompt_context import (
    DEFAULT_MAX_TOKENS,
    MAX_CONTEXT_TOKENS,
    PREAMBLE,
    PromptContext,
    build_prompt_context,
    parse_max_tokens,
)
from knowledge.agent_tools.results import CUT_MARKER, estimate_tokens, merge_adjacent
from knowledge.agent_tools.tool import format_search_results
from knowledge.core.errors import ValidationError
from knowledge.core.model import SearchResult

SENTENCE_END = re.compile(r"[.!?\u2026\u3002\uff01\uff1f][\"'\u201d\u2019)\]]*$")
WORDS = ["deploy", "rollback", "배포", "롤백", "kubectl", "service", "의", "pods", "canary"]


def random_text(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(1, 30)):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 15)))
        sentences.append(words + rng.choice([".", "!", "?", "。", "", "\n"]))
    return " ".join(sentences)


def random_results(rng: random.Random) -> list[SearchResult]:
    results: list[SearchResult] = []
    seen: set[tuple[str, int]] = set()  # a search never returns one chunk twice
    for rank in range(rng.randint(0, 12)):
        metadata = rng.choice([{}, {"page": 3, "format": "pdf"}, {"origin": "repo", "url": "u"}])
        path = f"docs/{rng.choice(['a', 'b', 'c', '장애'])}-{rank % 5}.md"
        chunk = rng.randint(0, 6)
        if (path, chunk) in seen:
            continue
        seen.add((path, chunk))
        results.append(
            SearchResult(
                document_path=path,
                chunk_index=chunk,
                content=random_text(rng),
                score=1.0 - rank / 20,
                metadata=metadata,
            )
        )
    return results


@pytest.mark.parametrize("seed", range(12))
def test_the_block_is_never_over_the_budget_and_cites_before_content(seed: int) -> None:
    rng = random.Random(seed)
    results = random_results(rng)
    merged = {(p.document_path, p.first_chunk): p.content for p in merge_adjacent(results)}
    for budget in [*range(1, 120, 5), *rng.sample(range(120, 8000), 25)]:
        block = build_prompt_context(results, budget)
        assert block.tokens_used == estimate_tokens(block.text) <= budget
        if not block.passages:
            assert block.text == ""
            continue
        sections = block.text.split("\n---\n")
        assert sections[0] == PREAMBLE
        for section, passage in zip(sections[1:], block.passages, strict=True):
            header, _, content = section.partition("\n")
            assert header == passage.header
            assert header.startswith(f"[{passage.rank}] {passage.passage.document_path} ")
            original = merged[(passage.passage.document_path, passage.passage.first_chunk)]
            if passage.passage.cut:
                assert content.endswith(CUT_MARKER)
                kept = content.removesuffix(CUT_MARKER)
                rest = original[len(kept) :]
                assert original.startswith(kept)
                assert SENTENCE_END.search(kept) or rest.lstrip(" \t").startswith("\n"), kept
            else:
                assert content == original.rstrip()
        assert len(block.passages) + len(block.dropped) == len(merged)


def test_an_empty_search_is_an_empty_block() -> None:
    block = build_prompt_context([], 100)
    assert (block.text, block.passages, block.dropped, block.tokens_used) == ("", (), (), 0)


def test_the_source_line_is_the_search_tool_s() -> None:
    results = [SearchResult("handbook.pdf", 3, "Restart the pod.", 0.92, metadata={"page": 12})]
    block = build_prompt_context(results, 1000)
    tool_lines = format_search_results("q", results).splitlines()
    assert (
        block.passages[0].header
        == tool_lines[2]
        == "[1] handbook.pdf p. 12 (score: 0.92, chunk: 3)"
    )
    assert block.text.endswith("\n---\n" + tool_lines[2] + "\nRestart the pod.")


def test_a_round_trip_through_the_answer_keeps_the_block() -> None:
    results = [
        SearchResult("a.md", 0, "One. Two. Three. " * 80, 0.9, metadata={"origin": "repo"}),
        SearchResult("b.md", 1, "Not small at all. " * 80, 0.5),
    ]
    block = build_prompt_context(results, 150)
    assert [p.passage.cut for p in block.passages] == [True]
    again = PromptContext.from_dict(block.to_dict())
    assert (again.text, again.tokens_used, again.max_tokens) == (block.text, block.tokens_used, 150)
    assert [p.header for p in again.passages] == [p.header for p in block.passages]
    assert [p.passage.cut for p in again.passages] == [True]
    assert [(p.document_path, p.first_chunk) for p in again.dropped] == [("b.md", 1)]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, f"must be between 1 and {MAX_CONTEXT_TOKENS}, got 0"),
        (MAX_CONTEXT_TOKENS + 1, f"must be between 1 and {MAX_CONTEXT_TOKENS}, got 200001"),
        (2.5, "must be an integer, got 2.5"),
        ("100", "must be an integer"),
        (True, "must be an integer"),
        (float("nan"), "must be an integer, got nan"),
    ],
)
def test_a_bad_budget_names_the_field(value: object, message: str) -> None:
    with pytest.raises(ValidationError) as refused:
        parse_max_tokens(value)
    assert (refused.value.field, refused.value.message) == ("max_tokens", message)


def test_budget_defaults_and_whole_floats() -> None:
    assert parse_max_tokens(None) == DEFAULT_MAX_TOKENS == 4000
    assert parse_max_tokens(500.0) == 500
