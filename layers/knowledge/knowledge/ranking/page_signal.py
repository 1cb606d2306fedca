"""The page-level keyword signal: a chunk's keyword score lifted by its page's own score.

Every store ranks 500-character chunks, and a page (a document) by its best chunk. On
title-like queries over help pages that loses to plain BM25 over whole pages: a page
whose words are spread over several chunks, each matching only part of the query, ranks
under a page with one lucky chunk (docs/korean.md, "A page-level keyword signal"). So
every keyword index also holds one row per document, the terms of the document's text
(every chunk's ``keyword_terms`` in chunk order, as the chunks hold them), scored for the
query with the store's own keyword scoring (FTS5 BM25, OpenSearch BM25, the memory
store's TF-IDF) over those rows; and each keyword candidate's raw score becomes

    raw = chunk / chunk_max + page_weight * page / page_max

``chunk`` the chunk's own score, ``chunk_max`` the best over the candidates, ``page`` the
score of the candidate's document (0 when its row does not match), ``page_max`` the
best over the candidates' documents. Only documents with a keyword candidate are
scored (a bounded second query, the same scope condition and the candidate documents
named), so the filters that chose the candidates choose the pages too. The combined
score is what keyword mode divides by its maximum and hybrid min-max normalises
(``fusion``), so every score stays in [0, 1]; the trace (``explain``) keeps both parts.

``PAGE_WEIGHT`` was tuned on every benchmark set (Korean help pages, Korean and English
questions, man pages): bench/REPORT.md section 1.3.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from knowledge.core.errors import ValidationError

__all__ = [
    "MAX_PAGE_TERMS",
    "PAGE_WEIGHT",
    "PageRow",
    "PageScores",
    "check_page_weight",
    "recombine",
    "with_pages",
]

PAGE_WEIGHT: Final = 0.5
"""The weight of a page's normalised score next to its chunk's (module docstring)."""
MAX_PAGE_TERMS: Final = 50_000
"""A page row holds its document's first this many terms: a huge document's row stays
bounded in memory while it is written and on the node (a record of its own)."""

K = TypeVar("K", bound=Hashable)
D = TypeVar("D", bound=Hashable)


def check_page_weight(value: object, field: str = "page_weight") -> float:
    """``value`` as a weight: a finite number >= 0, else ``ValidationError`` naming ``field``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValidationError(field, f"must be a number >= 0, got {value!r}")
    return float(value)


class PageRow:
    """A document's page row while its chunks are written: their text terms, in chunk
    order, the first ``MAX_PAGE_TERMS``."""

    __slots__ = ("terms",)

    def __init__(self) -> None:
        self.terms: list[str] = []

    def add(self, terms: Sequence[str]) -> None:
        room = MAX_PAGE_TERMS - len(self.terms)
        if room > 0:
            self.terms.extend(terms[:room])


def _clean(score: float) -> float:
    return score if math.isfinite(score) and score > 0.0 else 0.0


@dataclass(frozen=True, slots=True)
class PageScores(Generic[K, D]):
    """One search's two keyword parts (module docstring): the chunks' own raw scores, the
    raw scores of their documents' page rows, which document a chunk is of, the weight."""

    chunks: Mapping[K, float]
    pages: Mapping[D, float]
    document_of: Callable[[K], D]
    weight: float

    @property
    def chunk_max(self) -> float:
        return max((_clean(s) for s in self.chunks.values()), default=0.0)

    @property
    def page_max(self) -> float:
        return max(
            (_clean(self.pages.get(self.document_of(k), 0.0)) for k in self.chunks), default=0.0
        )

    def combined(self) -> dict[K, float]:
        """Each chunk's raw keyword score with its page's part (module docstring)."""
        chunk_max, page_max = self.chunk_max, self.page_max
        if chunk_max <= 0.0:
            return dict.fromkeys(self.chunks, 0.0)
        scale = self.weight / page_max if page_max > 0.0 else 0.0
        pages, document_of = self.pages, self.document_of
        return {
            key: _clean(score) / chunk_max + scale * _clean(pages.get(document_of(key), 0.0))
            for key, score in self.chunks.items()
        }

    def record(self) -> dict[str, Any]:
        """The search's part of the trace: the two maxima and the weight."""
        return {"chunk_max": self.chunk_max, "page_max": self.page_max, "page_weight": self.weight}

    def entry(self, key: K) -> dict[str, Any]:
        """One candidate's part of the trace: its chunk score and its page's."""
        return {
            "chunk": _clean(self.chunks[key]),
            "page": _clean(self.pages.get(self.document_of(key), 0.0)),
        }


def with_pages(
    chunks: Mapping[K, float],
    pages: Mapping[D, float],
    document_of: Callable[[K], D],
    weight: float,
) -> PageScores[K, D]:
    """The ``PageScores`` of one search (``combined()`` gives the keyword side's scores)."""
    return PageScores(chunks, pages, document_of, weight)


def recombine(record: Mapping[str, Any], entry: Mapping[str, Any]) -> float:
    """A candidate's raw keyword score computed again from the trace (``record`` the
    search's keyword record, ``entry`` the result's keyword entry)."""
    chunk_max, page_max = record["chunk_max"], record["page_max"]
    if chunk_max <= 0.0:
        return 0.0
    page = record["page_weight"] * entry["page"] / page_max if page_max > 0.0 else 0.0
    return float(entry["chunk"] / chunk_max + page)
