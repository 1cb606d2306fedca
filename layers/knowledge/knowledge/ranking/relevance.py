"""Absolute relevance: a score that means the same in every query, scope, mode and store.

The ranking scores (``fusion``) are relative to the query: keyword mode divides by the
best hit and hybrid min-max normalises each side, so the best hit of any query, even one
the scope knows nothing about, scores 1.0. They order a list well and say nothing about
whether the list answers the question. This module gives every hit a second score, on an
absolute scale, from evidence that does not depend on the other hits:

- **coverage**: the share of the query's term weight that the hit's chunk holds (its text
  and its title and heading path, after the keyword analysis), each term weighted by its
  inverse document frequency over the searched scope's chunks
  (``idf = ln(1 + (n - df + 0.5) / (df + 0.5))``, ``n`` at least ``REFERENCE_CHUNKS`` so
  that a small scope's weights do not move when it grows). A term the scope never uses
  weighs the most and is matched by nothing, so a question about something else covers
  little of itself. A typed term the chunk lacks counts ``SYNONYM_WEIGHT`` of its weight
  where the chunk holds a synonym the scope's synonyms add for it ("k8s" answered by a
  chunk that says "kubernetes"); coverage is at most 1.
- **vector**: the hit's unit cosine ``(1 + cos) / 2`` to the query (vector and hybrid
  modes). A hybrid hit the vector side did not return gets the lowest unit score that
  side returned (the best bound every store knows without reading the vector).

- **script**: whether the query is written in a CJK script (``query_script``: one of its
  analysed terms holds a Hangul, Han or Kana character, ``analysis.has_cjk``, the rule
  ``ranking.vector_side`` uses too). The two families of analysis make coverage
  differently (MeCab-ko morphemes with a compound's parts, or CJK bigrams, against
  stemmed words), so the same coverage is not the same evidence in both: an English
  question in the asker's own words covers little of itself even where it is answered,
  and the fit finds a given coverage stronger evidence in an English query.

A calibration (``Calibration``: logistic, per embedder family and mode, fitted by
``python -m bench relevance-fit`` on the benchmark's answerable and unanswerable questions
and shipped as ``relevance_calibration.json``) turns the evidence into a probability-like
score in [0, 1]: ``sigmoid(a + b * coverage + c * vector + d * cjk)``, ``cjk`` 1 for a
CJK query, else 0 (each script its own floor, one slope). An embedder without a fitted
family uses the ``"default"`` entry, which weighs coverage and the script only, so its
scores stay on the same scale. A query the embedder cannot read
(``ranking.vector_side``: Korean with an English-only model) runs on the keyword side
and is scored as a keyword search. ``DEFAULT_MIN_SCORE`` is the floor a search's best
result must reach unless the caller sets ``min_score`` (``Judged.passing``);
``strength_of`` names a score in a word (both in ``core.model``, where ``SearchQuery``
and ``SearchResult`` use them).

docs/ranking.md, "Absolute relevance", has the figures and how to pick a floor.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Any, Final, Generic

from knowledge.core.model import (
    DEFAULT_MIN_SCORE,
    STRONG_SCORE,
    SearchMode,
    SearchQuery,
    strength_of,
)
from knowledge.ranking.analysis import has_cjk
from knowledge.ranking.fusion import Fused, K, model_family
from knowledge.ranking.synonym_expansion import SYNONYM_WEIGHT, QueryTerms

__all__ = [
    "CALIBRATION_VERSION",
    "DEFAULT_MIN_SCORE",
    "REFERENCE_CHUNKS",
    "STRONG_SCORE",
    "Calibration",
    "Evidence",
    "Judged",
    "QueryWeights",
    "Script",
    "calibration",
    "idf",
    "judge",
    "parse_calibrations",
    "query_script",
    "query_terms",
    "query_weights",
    "strength_of",
]

REFERENCE_CHUNKS: Final = 1000
"""The smallest chunk count term weights are computed over (module docstring)."""
_CALIBRATION_FILE: Final = "relevance_calibration.json"
CALIBRATION_VERSION: Final = 2
"""The calibration file's format: 2 adds each family's ``"cjk"`` intercept shifts; a
file without ``"version"`` (1) has none, which reads as shifts of 0."""
_DEFAULT_FAMILY: Final = "default"


class Script(StrEnum):
    """The script family of a query, one calibration input (module docstring)."""

    CJK = "cjk"
    OTHER = "other"


def query_script(terms: Iterable[str]) -> Script:
    """``Script.CJK`` when one of the query's analysed terms holds a CJK character
    (``analysis.has_cjk``), else ``Script.OTHER`` (a query without terms included)."""
    return Script.CJK if any(has_cjk(term) for term in terms) else Script.OTHER


def idf(df: int, chunks: int) -> float:
    """The weight of a term found in ``df`` of the scope's ``chunks`` chunks (module
    docstring); ``chunks`` counts as at least ``REFERENCE_CHUNKS``."""
    n = max(chunks, REFERENCE_CHUNKS)
    df = min(max(df, 0), n)
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True, slots=True)
class QueryWeights:
    """A query's typed terms with their weights over one scope, and the synonyms that can
    stand for them (``QueryTerms.matches``: the typed phrase, the phrase a synonym adds)."""

    typed: Mapping[str, float]
    synonyms: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]
    chunks: int

    @property
    def total(self) -> float:
        return math.fsum(self.typed.values())

    @property
    def script(self) -> Script:
        """The query's script (``query_script`` of its typed terms)."""
        return query_script(self.typed)

    @property
    def terms(self) -> frozenset[str]:
        """Every term ``coverage`` asks a chunk about: the typed ones and those of the
        synonyms that can stand for them. A store need not read a chunk's other terms."""
        return frozenset((*self.typed, *(term for _, adds in self.synonyms for term in adds)))

    def coverage(self, terms: Collection[str]) -> float:
        """The share of the typed terms' weight that ``terms`` (a chunk's) hold; a typed
        term the chunk lacks counts ``SYNONYM_WEIGHT`` of its weight when the chunk holds
        every term of a synonym added for it. 0 for a query without terms, at most 1."""
        total = self.total
        if total <= 0.0:
            return 0.0
        credit = {term: (w if term in terms else 0.0) for term, w in self.typed.items()}
        for source, adds in self.synonyms:
            if adds and all(term in terms for term in adds):
                for term in source:
                    if term in credit:
                        credit[term] = max(credit[term], SYNONYM_WEIGHT * self.typed[term])
        return min(1.0, math.fsum(credit.values()) / total)

    def to_dict(self) -> dict[str, object]:
        """The explain trace's ``relevance.terms``."""
        return {
            "chunks": self.chunks,
            "reference_chunks": REFERENCE_CHUNKS,
            "typed": {term: round(w, 4) for term, w in self.typed.items()},
            "synonyms": [
                {"for": list(source), "adds": list(adds), "weight": SYNONYM_WEIGHT}
                for source, adds in self.synonyms
            ],
        }


def query_terms(terms: QueryTerms) -> list[str]:
    """Every term a store must know of a chunk for ``QueryWeights.coverage``: the typed
    ones and those a synonym added (only the typed ones' document frequencies weigh)."""
    return [*terms.typed, *(t for t in terms.expanded if t not in terms.typed)]


def query_weights(terms: QueryTerms, df: Mapping[str, int], chunks: int) -> QueryWeights:
    """The query's term weights over a scope of ``chunks`` chunks, ``df[term]`` of them
    holding ``term`` (a typed term missing from ``df`` is in none)."""
    typed = {term: idf(df.get(term, 0), chunks) for term in terms.typed}
    return QueryWeights(typed, tuple(terms.matches), chunks)


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one hit's absolute score is made of (module docstring); ``vector`` ``None``
    in keyword mode. ``script`` is the query's, the same for every hit of a search."""

    coverage: float
    vector: float | None = None
    script: Script = Script.OTHER


_MODES: Final = (SearchMode.KEYWORD, SearchMode.VECTOR, SearchMode.HYBRID)
"""The order of ``Calibration.cjk``."""


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@dataclass(frozen=True, slots=True)
class Calibration:
    """The fitted coefficients of one embedder family: ``keyword`` ``(a, b)``, ``vector``
    and ``hybrid`` ``(a, b, c)``, and ``cjk``: each mode's ``d``, what a CJK query adds to
    that mode's intercept (module docstring; 0: one scale for every script)."""

    family: str
    keyword: tuple[float, float]
    vector: tuple[float, float, float]
    hybrid: tuple[float, float, float]
    cjk: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def score(self, mode: SearchMode, evidence: Evidence) -> float:
        """The absolute score of ``evidence`` found by a ``mode`` search, in [0, 1]."""
        coverage = min(1.0, max(0.0, evidence.coverage))
        if mode is SearchMode.KEYWORD or evidence.vector is None:
            a, b = self.keyword
            return _sigmoid(a + self._shift(SearchMode.KEYWORD, evidence) + b * coverage)
        a, b, c = self.vector if mode is SearchMode.VECTOR else self.hybrid
        vector = min(1.0, max(0.0, evidence.vector))
        return _sigmoid(a + self._shift(mode, evidence) + b * coverage + c * vector)

    def _shift(self, mode: SearchMode, evidence: Evidence) -> float:
        if evidence.script is not Script.CJK:
            return 0.0
        return self.cjk[_MODES.index(mode)]

    @classmethod
    def from_dict(cls, family: str, entry: Mapping[str, Any]) -> Calibration:
        """A calibration from its coefficients as the calibration file and the explain
        trace hold them (``{"keyword": [a, b], "vector": [a, b, c], "hybrid": [...],
        "cjk": {"keyword": d, "vector": d, "hybrid": d}}``; without ``"cjk"``: 0)."""
        shifts: Mapping[str, float] = entry.get("cjk") or {}
        unknown = set(shifts) - {mode.value for mode in _MODES}
        if unknown:
            raise ValueError(f"cjk: unknown modes {sorted(unknown)} in family {family!r}")
        return cls(
            family,
            _pair(entry["keyword"]),
            _triple(entry["vector"]),
            _triple(entry["hybrid"]),
            _triple(float(shifts.get(mode.value, 0.0)) for mode in _MODES),
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "family": self.family,
            "keyword": list(self.keyword),
            "vector": list(self.vector),
            "hybrid": list(self.hybrid),
            "cjk": {mode.value: d for mode, d in zip(_MODES, self.cjk, strict=True)},
        }


def _pair(values: Iterable[float]) -> tuple[float, float]:
    a, b = (float(v) for v in values)
    return a, b


def _triple(values: Iterable[float]) -> tuple[float, float, float]:
    a, b, c = (float(v) for v in values)
    return a, b, c


def parse_calibrations(text: str) -> dict[str, Calibration]:
    """Every family's calibration in the text of a calibration file (version 1 or
    ``CALIBRATION_VERSION``)."""
    loaded = json.loads(text)
    version = loaded.get("version", 1)
    if version not in (1, CALIBRATION_VERSION):
        raise ValueError(f"{_CALIBRATION_FILE}: unknown version {version!r}")
    return {
        family: Calibration.from_dict(family, entry) for family, entry in loaded["families"].items()
    }


@cache
def _calibrations() -> dict[str, Calibration]:
    text = resources.files("knowledge.ranking").joinpath(_CALIBRATION_FILE).read_text("utf-8")
    return parse_calibrations(text)


def calibration(embedder_name: str | None) -> Calibration:
    """The calibration of ``embedder_name``'s family (``fusion.model_family``), else the
    ``"default"`` one (coverage and script only). A query the embedder cannot read has no vector
    evidence (``ranking.vector_side``: the search runs on the keyword side), so it is
    scored with the keyword coefficients, the same in every family."""
    calibrations = _calibrations()
    return calibrations.get(model_family(embedder_name), calibrations[_DEFAULT_FAMILY])


_TOLERANCE: Final = 1e-12
"""So that ``min_score=0.3`` keeps a score computed as 0.29999999999999993."""


@dataclass(frozen=True, slots=True)
class Judged(Generic[K]):
    """The absolute scores of one search's candidates (``judge``), with what made them."""

    mode: SearchMode
    weights: QueryWeights
    calibration: Calibration
    evidence: Mapping[K, Evidence]
    scores: Mapping[K, float]

    def score(self, key: K) -> float:
        return self.scores.get(key, 0.0)

    def best(self) -> float:
        """The best absolute score of the candidates: the search's evidence."""
        return max(self.scores.values(), default=0.0)

    def passing(self, ranked: Sequence[Fused[K]], query: SearchQuery) -> list[Fused[K]]:
        """The candidates of ``ranked`` the search answers, in their order: none when the
        best scores below ``query.evidence_floor``, else those at or above
        ``query.result_floor``."""
        if self.best() + _TOLERANCE < query.evidence_floor:
            return []
        floor = query.result_floor
        return [item for item in ranked if self.score(item.key) + _TOLERANCE >= floor]

    def record(self, query: SearchQuery) -> dict[str, Any]:
        """The explain trace's search-level ``relevance``."""
        return {
            "min_score": query.min_score,
            "evidence_floor": query.evidence_floor,
            "result_floor": query.result_floor,
            "best": self.best(),
            "abstained": self.best() + _TOLERANCE < query.evidence_floor,
            "script": self.weights.script.value,
            "terms": self.weights.to_dict(),
            "calibration": self.calibration.to_dict(),
        }

    def entry(self, key: K) -> dict[str, Any]:
        """The explain trace's ``relevance`` of one result."""
        evidence = self.evidence.get(key, Evidence(0.0))
        return {
            "coverage": evidence.coverage,
            "vector": evidence.vector,
            "score": self.score(key),
            "strength": strength_of(self.score(key)),
        }


def judge(
    mode: SearchMode,
    weights: QueryWeights,
    calibration: Calibration,
    candidates: Sequence[Fused[K]],
    *,
    terms_of: Mapping[K, Collection[str]],
    vector: Mapping[K, float] | None = None,
) -> Judged[K]:
    """The absolute scores of ``candidates``: each one's coverage of ``weights`` by its
    terms (``terms_of``, a candidate missing there holds none) and, outside keyword
    mode, its unit vector score (``vector``: what the vector side returned, before its
    floor; a candidate it did not return gets the lowest of them; ``None`` or empty:
    no vector evidence)."""
    units = vector if vector and mode is not SearchMode.KEYWORD else None
    lowest = min(units.values()) if units else 0.0
    script = weights.script
    evidence: dict[K, Evidence] = {}
    scores: dict[K, float] = {}
    empty: frozenset[str] = frozenset()
    for item in candidates:
        key = item.key
        unit = None if units is None else units.get(key, lowest)
        found = Evidence(weights.coverage(terms_of.get(key, empty)), unit, script)
        evidence[key] = found
        scores[key] = calibration.score(mode, found)
    return Judged(mode, weights, calibration, evidence, scores)
