"""Result lists as an agent reads them: adjacent chunks merged, cut to a token budget.

Pure functions on ``SearchResult`` lists, used by the ``KnowledgeSearch`` tool:

- ``merge_adjacent``: results of one document whose chunks are consecutive (``chunk_index``
  i, i+1, ...) become one passage, so the overlap the chunker repeats at every cut
  (``chunking.DEFAULT_OVERLAP``) is not shown twice and a passage cut in two reads as
  one; chunks of different sheets or slides stay apart (a citation names one). The
  passage takes the place (and the score) of its best chunk; its text is the
  chunks in document order, each joined at its overlap with the previous one (the longest
  suffix of the previous text that starts the next, at least ``MIN_OVERLAP`` characters),
  else with a blank line. Its ``metadata`` is its first chunk's, with the ends of the
  place ranges (``page_end``, ``row_end``) of its last chunk, so a citation of the
  passage covers all of it.
- ``estimate_tokens``: a tokenizer-free estimate (one token per CJK character, one per
  four other characters, rounded up), close to BPE tokenizers on English and Korean and
  never zero for non-empty text.
- ``fit_budget``: keeps passages in rank order while their estimated tokens fit
  ``max_tokens``; a passage that does not fit is dropped (a later, smaller one may still
  fit); if not even the first fits, its text is cut to the budget (``cut_text``): at the
  end of a sentence or of a line, never inside a word, followed by ``CUT_MARKER`` and
  flagged ``Passage.cut``; with no such end within the budget it is dropped too. Returns
  what was kept and how many were dropped, so the answer can say so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from knowledge.core.model import SearchResult
from knowledge.ranking.analysis import is_cjk

__all__ = [
    "CUT_MARKER",
    "MIN_OVERLAP",
    "Passage",
    "budget_record",
    "cut_text",
    "estimate_tokens",
    "fit_budget",
    "merge_adjacent",
    "passage_summary",
]

MIN_OVERLAP = 8
CUT_MARKER = " [... cut to fit the token budget]"
"""What ends a passage cut short by ``fit_budget``, so a reader knows text is missing."""
# A sentence ends at . ! ? (or their CJK forms, or an ellipsis), closing quotes or
# brackets included, before a blank or the end; "1.5" and "e.g.x" do not end one.
_SENTENCE_END = re.compile(r"[.!?\u2026\u3002\uff01\uff1f][\"'\u201d\u2019)\]]*(?=\s|$)")
# Where a chunk's place in its document ends (a range's end key and its start key).
_RANGE_ENDS = (("page_end", "page"), ("row_end", "row_start"))
# Places a citation names one of: chunks in different ones are never merged.
_ONE_PLACE = ("sheet", "slide")


@dataclass(frozen=True, slots=True)
class Passage:
    """One or more consecutive chunks of one document, as shown to the agent."""

    document_path: str
    first_chunk: int
    last_chunk: int
    content: str
    score: float
    metadata: Mapping[str, Any] = field(default_factory=dict)
    cut: bool = False
    """The text was cut short to fit a token budget (it ends with ``CUT_MARKER``)."""

    @property
    def chunks(self) -> str:
        """``"4"`` or ``"4-6"``."""
        if self.first_chunk == self.last_chunk:
            return str(self.first_chunk)
        return f"{self.first_chunk}-{self.last_chunk}"


def _join(left: str, right: str) -> str:
    limit = min(len(left), len(right))
    for size in range(limit, MIN_OVERLAP - 1, -1):
        if left.endswith(right[:size]):
            return left + right[size:]
    return left + "\n\n" + right


def _passage(run: Sequence[SearchResult], rank_of: dict[int, int]) -> tuple[int, Passage]:
    text = run[0].content
    for part in run[1:]:
        text = _join(text, part.content)
    best = min(run, key=lambda r: rank_of[id(r)])
    metadata = dict(run[0].metadata)
    if len(run) > 1:
        last = run[-1].metadata
        for end, start in _RANGE_ENDS:
            value = last.get(end, last.get(start))
            if value is not None and start in metadata:
                metadata[end] = value
    passage = Passage(
        document_path=run[0].document_path,
        first_chunk=run[0].chunk_index,
        last_chunk=run[-1].chunk_index,
        content=text,
        score=best.score,
        metadata=metadata,
    )
    return rank_of[id(best)], passage


def _same_place(left: SearchResult, right: SearchResult) -> bool:
    # A citation names one sheet or one slide: chunks of two are two passages.
    return all(left.metadata.get(key) == right.metadata.get(key) for key in _ONE_PLACE)


def merge_adjacent(results: Sequence[SearchResult]) -> list[Passage]:
    """Merge consecutive chunks of one document (module docstring); rank order kept.

    Results of different scopes' documents with the same path are told apart by their
    ``metadata["source_key"]`` when present.
    """
    groups: dict[tuple[str, str], list[SearchResult]] = {}
    for result in results:
        source = str(result.metadata.get("source_key", ""))
        scope = (
            source[: -len(result.document_path)] if source.endswith(result.document_path) else ""
        )
        groups.setdefault((scope, result.document_path), []).append(result)
    runs: list[tuple[int, Passage]] = []  # (rank of the run's best chunk, passage)
    rank_of = {id(result): rank for rank, result in enumerate(results)}
    for members in groups.values():
        ordered = sorted(members, key=lambda r: r.chunk_index)
        run: list[SearchResult] = [ordered[0]]
        for result in ordered[1:]:
            if result.chunk_index == run[-1].chunk_index + 1 and _same_place(run[-1], result):
                run.append(result)
            else:
                runs.append(_passage(run, rank_of))
                run = [result]
        runs.append(_passage(run, rank_of))
    return [passage for _, passage in sorted(runs, key=lambda item: item[0])]


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text`` (module docstring)."""
    cjk = sum(1 for char in text if is_cjk(char))
    return cjk + math.ceil((len(text) - cjk) / 4)


def _boundaries(text: str) -> list[int]:
    """Where ``text`` may be cut, ascending: after each sentence end, before each line
    break (the line's end)."""
    ends = {m.end() for m in _SENTENCE_END.finditer(text)}
    ends.update(i for i, char in enumerate(text) if char == "\n")
    return sorted(end for end in ends if text[:end].strip())


def cut_text(text: str, max_tokens: int) -> str | None:
    """The longest prefix of ``text`` that ends a sentence or a line, followed by
    ``CUT_MARKER``, within ``max_tokens`` estimated tokens; ``None`` when no such prefix
    fits (the text is never cut inside a word)."""
    ends = _boundaries(text)
    low, high = 0, len(ends)  # ends[:low] fit
    while low < high:
        middle = (low + high) // 2
        if estimate_tokens(text[: ends[middle]].rstrip() + CUT_MARKER) <= max_tokens:
            low = middle + 1
        else:
            high = middle
    if low == 0:
        return None
    return text[: ends[low - 1]].rstrip() + CUT_MARKER


def passage_summary(passage: Passage) -> dict[str, Any]:
    """A passage without its text, as a budget's trace lists one it dropped."""
    return {
        "document_path": passage.document_path,
        "chunks": passage.chunks,
        "first_chunk": passage.first_chunk,
        "last_chunk": passage.last_chunk,
        "score": round(passage.score, 6),
        "tokens": estimate_tokens(passage.content),
    }


def budget_record(
    max_tokens: int, used_tokens: int, kept: Sequence[Passage], dropped: Sequence[Passage]
) -> dict[str, Any]:
    """What a token budget did, for an ``explain`` trace (``explain.record_budget``): the
    budget, the tokens used (as ``estimate_tokens`` counts them), the passages kept and
    whether the first was cut, and each passage dropped (``passage_summary``), best first."""
    return {
        "max_tokens": max_tokens,
        "used_tokens": used_tokens,
        "counter": "estimate",
        "kept": len(kept),
        "cut": any(p.cut for p in kept),
        "dropped": [passage_summary(p) for p in dropped],
    }


def fit_budget(
    passages: Sequence[Passage],
    max_tokens: int,
    *,
    overhead_tokens: int | Callable[[Passage], int] = 0,
) -> tuple[list[Passage], int]:
    """``(kept, dropped)``: passages within ``max_tokens`` (module docstring).

    ``overhead_tokens`` is charged per passage for what the caller prints around it (its
    header line): a number, or a function of the passage (a header names its path).
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
    overhead = overhead_tokens if callable(overhead_tokens) else lambda _p: overhead_tokens
    kept: list[Passage] = []
    used = 0
    for passage in passages:
        cost = estimate_tokens(passage.content) + overhead(passage)
        if used + cost <= max_tokens:
            kept.append(passage)
            used += cost
    if not kept and passages:
        first = passages[0]
        shortened = cut_text(first.content, max_tokens - overhead(first))
        if shortened is not None:
            kept.append(
                Passage(
                    first.document_path,
                    first.first_chunk,
                    first.last_chunk,
                    shortened,
                    first.score,
                    first.metadata,
                    cut=True,
                )
            )
    return kept, len(passages) - len(kept)
