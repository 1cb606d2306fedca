"""knowledge.agent_tools.results: adjacent chunks merged into passages, cut to a token budget."""

from __future__ import annotations

import pytest

from knowledge.agent_tools.results import (
    CUT_MARKER,
    Passage,
    cut_text,
    estimate_tokens,
    fit_budget,
    merge_adjacent,
)
from knowledge.core.model import SearchResult
from knowledge.ingest.chunking import MarkdownSectionChunker

TEXT = " ".join(f"Sentence number {i} explains one more step of the rollback." for i in range(40))


def _hit(path: str, index: int, content: str, score: float = 0.5) -> SearchResult:
    return SearchResult(document_path=path, chunk_index=index, content=content, score=score)


def test_consecutive_chunks_of_the_chunker_read_as_the_original_text() -> None:
    chunks = list(MarkdownSectionChunker(chunk_size=200, overlap=50).chunk("a.md", TEXT))
    assert len(chunks) > 4
    hits = [_hit("a.md", c.chunk_index, c.content, 1.0 - c.chunk_index / 100) for c in chunks[1:4]]
    [passage] = merge_adjacent(hits)
    assert (passage.first_chunk, passage.last_chunk, passage.chunks) == (1, 3, "1-3")
    assert passage.content in TEXT  # the overlap is not repeated
    assert passage.content.startswith(chunks[1].content)
    assert passage.content.endswith(chunks[3].content)
    assert passage.score == hits[0].score


def test_gaps_other_documents_and_rank_order() -> None:
    hits = [
        _hit("b.md", 7, "beta seven", 0.9),
        _hit("a.md", 2, "alpha two", 0.8),
        _hit("a.md", 1, "alpha one", 0.7),
        _hit("b.md", 3, "beta three", 0.6),
    ]
    passages = merge_adjacent(hits)
    assert [(p.document_path, p.chunks, p.score) for p in passages] == [
        ("b.md", "7", 0.9),
        ("a.md", "1-2", 0.8),
        ("b.md", "3", 0.6),
    ]
    assert passages[1].content == "alpha one\n\nalpha two"  # no overlap: a blank line


def test_estimate_tokens_counts_cjk_characters_and_latin_by_four() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("배포 실패") == 4 + 1


def _passage(path: str, chars: int, score: float) -> Passage:
    return Passage(path, 0, 0, "x" * chars, score)


def test_fit_budget_keeps_what_fits_in_rank_order() -> None:
    passages = [_passage("a", 400, 0.9), _passage("b", 800, 0.8), _passage("c", 40, 0.7)]
    kept, dropped = fit_budget(passages, 120)
    assert [p.document_path for p in kept] == ["a", "c"]  # b (200 tokens) does not fit
    assert dropped == 1
    assert fit_budget(passages, 10_000) == (passages, 0)


def test_fit_budget_cuts_the_first_passage_at_a_sentence_end_when_nothing_fits() -> None:
    sentences = "The pod restarts. It reads its config again! Then it serves? " * 100
    text = Passage("a", 0, 0, sentences, 0.9)
    kept, dropped = fit_budget([text, _passage("b", 4000, 0.8)], 50)
    assert dropped == 1
    assert len(kept) == 1
    assert kept[0].cut
    assert kept[0].content.endswith(CUT_MARKER)
    body = kept[0].content.removesuffix(CUT_MARKER)
    assert body.endswith(("restarts.", "again!", "serves?"))
    assert estimate_tokens(kept[0].content) <= 50


def test_a_cut_ends_at_a_line_end_never_inside_a_word() -> None:
    lines = "\n".join(f"line {n} without a stop" for n in range(200))
    # Three lines and the marker: (3 * 22 + 2 + 34) / 4 = 26 tokens; a fourth makes 32.
    three = "line 0 without a stop\nline 1 without a stop\nline 2 without a stop"
    assert cut_text(lines, 30) == three + CUT_MARKER
    assert cut_text("1.5 and e.g.x are not ends " * 40, 40) is None  # no end: never mid-word
    # 6 CJK characters + (2 + 34) / 4: 15 tokens; the second sentence makes 21.
    assert cut_text("배포가 끝났다. 로그를 본다. " * 40, 16) == "배포가 끝났다." + CUT_MARKER


def test_fit_budget_drops_a_first_passage_without_an_end_in_the_budget() -> None:
    kept, dropped = fit_budget([_passage("a", 4000, 0.9), _passage("b", 4000, 0.8)], 50)
    assert (kept, dropped) == ([], 2)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_fit_budget_refuses_a_bad_budget(bad: object) -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        fit_budget([], bad)  # type: ignore[arg-type]
