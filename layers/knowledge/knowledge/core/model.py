"""Value objects of the knowledge domain: queries, results, chunks, index options and reports.

All are immutable. Constructors validate and raise ``ValidationError`` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from knowledge.core.errors import ValidationError
from knowledge.core.filter_language import FilterNode, check_metadata_key, parse_filter
from knowledge.core.formats import DOCUMENT_PATTERNS
from knowledge.core.group_by import GROUP_BY_DOCUMENT, GROUP_BY_VALUES, parse_group_by
from knowledge.core.origin import FORMAT, ORIGIN, URL, check_origins, origin_alias
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import check_libraries

if TYPE_CHECKING:
    from knowledge.core.rank_weights import RankWeights

__all__ = [
    "DEFAULT_MAX_CHUNKS_PER_DOCUMENT",
    "DEFAULT_MAX_RESULTS",
    "DEFAULT_MIN_SCORE",
    "GROUP_BY_DOCUMENT",
    "GROUP_BY_VALUES",
    "MAX_FILE_PATTERNS",
    "MAX_MAX_RESULTS",
    "MAX_QUERY_LENGTH",
    "MAX_STATUS_PROBLEMS",
    "MAX_UNREAD_EXTENSIONS",
    "NO_EXTENSION",
    "OTHER_EXTENSIONS",
    "STRONG_SCORE",
    "DocumentChunk",
    "FileProblem",
    "IndexOptions",
    "IndexProgress",
    "IndexResult",
    "IndexState",
    "IndexStatus",
    "SearchMode",
    "SearchQuery",
    "SearchResult",
    "capped_unread",
    "evidence_of",
    "parse_group_by",
    "strength_of",
    "unread_extension",
]

DEFAULT_MAX_RESULTS = 5
MAX_MAX_RESULTS = 100
DEFAULT_MAX_CHUNKS_PER_DOCUMENT = 3
"""At most this many chunks of one document in a result list, so one document cannot take
every top slot."""
DEFAULT_MIN_SCORE = 0.5
"""The default floor on the absolute relevance score (``knowledge.ranking.relevance``): a
search without ``min_score`` answers nothing when its best result scores below it (the
scope does not hold the answer), else its ranked results. Each embedder's and mode's
calibration puts at this score the floor that keeps 97% of the benchmark's findable
answers (docs/ranking.md, "What `score` means")."""
STRONG_SCORE = 0.75
"""From this absolute score on, a hit is ``strong`` evidence (``strength_of``)."""
MAX_QUERY_LENGTH = 4096
MAX_FILE_PATTERNS = 100
"""Most ``file_patterns`` one search takes (like the filter's 100 comparisons): each is a
clause of the backend's query, and OpenSearch refuses a query of more than 1,024."""
MAX_STATUS_PROBLEMS = 100  # the status lists at most this many problems, most recent first
NO_EXTENSION = "(none)"
"""The ``unread_files`` key of files without an extension."""
MAX_UNREAD_EXTENSIONS = 100
"""The most extensions ``unread_files`` keeps (the most numerous; the rest are summed
under ``OTHER_EXTENSIONS``), so a store's record of them stays small."""
OTHER_EXTENSIONS = "(other)"


class SearchMode(StrEnum):
    """How a query is matched: BM25-class keywords, embedding vectors, or both fused."""

    KEYWORD = "keyword"
    VECTOR = "vector"
    HYBRID = "hybrid"

    @classmethod
    def parse(cls, value: object, field_name: str = "mode") -> SearchMode:
        if isinstance(value, SearchMode):
            return value
        if isinstance(value, str):
            try:
                return cls(value.strip().lower())
            except ValueError:
                pass
        allowed = ", ".join(m.value for m in cls)
        raise ValidationError(field_name, f"{value!r} is not one of: {allowed}")


def unread_extension(path: str) -> str:
    """The ``unread_files`` key of a file: its lower-case extension (``.png``), or
    ``NO_EXTENSION``. An extension is short and has no blank (``notes.final draft`` has
    none), so the keys stay a few well-formed values."""
    name = path.rsplit("/", 1)[-1]
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem or not extension or len(extension) > 16:
        return NO_EXTENSION
    if not all(ch.isalnum() or ch in "_-+" for ch in extension):
        return NO_EXTENSION
    return "." + extension.lower()


def capped_unread(counts: Mapping[str, int]) -> dict[str, int]:
    """``counts`` without zeros, at most ``MAX_UNREAD_EXTENSIONS`` keys: past them the
    least numerous are summed under ``OTHER_EXTENSIONS``."""
    ranked = sorted(((k, n) for k, n in counts.items() if n > 0), key=lambda kv: (-kv[1], kv[0]))
    kept = dict(
        ranked[: MAX_UNREAD_EXTENSIONS - 1] if len(ranked) > MAX_UNREAD_EXTENSIONS else ranked
    )
    rest = sum(n for _, n in ranked[len(kept) :])
    if rest:
        kept[OTHER_EXTENSIONS] = kept.get(OTHER_EXTENSIONS, 0) + rest
    return kept


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """One search inside a scope.

    ``text`` is required and non-blank; ``max_results`` in [1, MAX_MAX_RESULTS];
    ``min_score`` in [0, 1] on the absolute score: every result reaches it (0: every
    candidate); ``None`` (the default): the search answers nothing when its best result
    is below ``DEFAULT_MIN_SCORE``, else its ranked results (``evidence_floor``,
    ``result_floor``); ``file_patterns`` are globs on the document path;
    ``metadata`` are exact-match filters (``source_type`` is read as ``origin``,
    ``knowledge.core.origin.origin_alias``); ``filter`` is a parsed
    ``knowledge.core.filter_language`` tree (a decoded JSON filter is parsed here), AND-ed with
    ``metadata``; ``cross_context`` searches every context of the scope's agent (never
    another agent). ``mode=None`` means the store's default.
    ``offset`` skips that many results (paging: ``offset + max_results`` is at most
    ``MAX_MAX_RESULTS``; pages of one query are slices of one stable order);
    ``max_chunks_per_document`` caps the chunks of any one document in the list (the
    document's best ones are kept), so one long document cannot fill every slot.
    ``group_by="document"`` answers one result per document, its best chunk, with the
    count of its matching chunks (``knowledge.ranking.grouping``); ``offset`` and
    ``max_results`` then count documents.
    ``shared_libraries`` are ``_shared/<context>`` scopes searched in the same query as
    the scope (``knowledge.core.scope_set``): set by the server from the operator's grant,
    never from a request.
    """

    text: str
    mode: SearchMode | None = None
    max_results: int = DEFAULT_MAX_RESULTS
    min_score: float | None = None
    file_patterns: tuple[str, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)
    cross_context: bool = False
    offset: int = 0
    max_chunks_per_document: int = DEFAULT_MAX_CHUNKS_PER_DOCUMENT
    filter: FilterNode | None = None
    group_by: str | None = None
    shared_libraries: tuple[KnowledgeScope, ...] = ()
    weights: RankWeights | None = None
    """Origin and lesson weights (``knowledge.ranking.origin_weights``); ``None``: ``NEUTRAL``."""

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValidationError("query", "must be a non-blank string")
        if len(self.text) > MAX_QUERY_LENGTH:
            raise ValidationError("query", f"must be at most {MAX_QUERY_LENGTH} characters")
        mode: object = self.mode
        if mode is not None and not isinstance(mode, SearchMode):
            object.__setattr__(self, "mode", SearchMode.parse(mode))
        if isinstance(self.max_results, bool) or not isinstance(self.max_results, int):
            raise ValidationError("max_results", "must be an integer")
        if not 1 <= self.max_results <= MAX_MAX_RESULTS:
            raise ValidationError(
                "max_results", f"must be between 1 and {MAX_MAX_RESULTS}, got {self.max_results}"
            )
        if isinstance(self.offset, bool) or not isinstance(self.offset, int):
            raise ValidationError("offset", "must be an integer")
        if self.offset < 0:
            raise ValidationError("offset", f"must be at least 0, got {self.offset}")
        if self.offset + self.max_results > MAX_MAX_RESULTS:
            raise ValidationError(
                "offset",
                f"offset + max_results must be at most {MAX_MAX_RESULTS}, "
                f"got {self.offset} + {self.max_results}",
            )
        per_document: object = self.max_chunks_per_document
        if isinstance(per_document, bool) or not isinstance(per_document, int):
            raise ValidationError("max_chunks_per_document", "must be an integer")
        if not 1 <= per_document <= MAX_MAX_RESULTS:
            raise ValidationError(
                "max_chunks_per_document",
                f"must be between 1 and {MAX_MAX_RESULTS}, got {per_document}",
            )
        if self.min_score is not None:
            if isinstance(self.min_score, bool) or not isinstance(self.min_score, int | float):
                raise ValidationError("min_score", "must be a number")
            if math.isnan(self.min_score) or not 0.0 <= self.min_score <= 1.0:
                raise ValidationError("min_score", f"must be between 0 and 1, got {self.min_score}")
        raw: object = self.file_patterns
        patterns = (raw,) if isinstance(raw, str) else tuple(self.file_patterns)
        if len(patterns) > MAX_FILE_PATTERNS:
            count = len(patterns)
            raise ValidationError(
                "file_patterns", f"must be at most {MAX_FILE_PATTERNS} patterns, got {count}"
            )
        for p in patterns:
            if not isinstance(p, str) or not p.strip():
                raise ValidationError("file_patterns", "each pattern must be a non-blank string")
        object.__setattr__(self, "file_patterns", patterns)
        if not isinstance(self.metadata, Mapping):
            raise ValidationError("metadata", "must be an object of string values")
        for k, v in self.metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise ValidationError("metadata", "keys and values must be strings")
        metadata = origin_alias(self.metadata)  # source_type: the design's name for origin
        for k, v in metadata.items():
            check_metadata_key("metadata", k)
            if k == ORIGIN:
                check_origins((v,), f"metadata.{ORIGIN}")
        object.__setattr__(self, "metadata", _frozen(metadata))
        if not isinstance(self.cross_context, bool):
            raise ValidationError("cross_context", "must be true or false")
        raw_filter: object = self.filter
        if isinstance(raw_filter, Mapping):
            object.__setattr__(self, "filter", parse_filter(raw_filter))
        parse_group_by(self.group_by)
        if self.shared_libraries != ():
            object.__setattr__(self, "shared_libraries", check_libraries(self.shared_libraries))

    @property
    def evidence_floor(self) -> float:
        """The score the best result must reach for the search to answer anything:
        ``min_score``, else ``DEFAULT_MIN_SCORE``."""
        return DEFAULT_MIN_SCORE if self.min_score is None else self.min_score

    @property
    def result_floor(self) -> float:
        """The score every returned result reaches: ``min_score``, else 0 (without it, a
        weaker hit may follow a result above the floor)."""
        return 0.0 if self.min_score is None else self.min_score


@dataclass(frozen=True, slots=True)
class DocumentChunk:
    """A piece of a document, the unit that is indexed and returned by a search."""

    document_path: str
    chunk_index: int
    content: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen(self.metadata))


def _text_of(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class SearchResult:
    """A ranked chunk. ``score`` is in [0, 1], higher is better, on an absolute scale:
    the same score means equally strong evidence in every query, scope, mode and store
    (``knowledge.ranking.relevance``); ``min_score`` applies to it, and ``strength``
    names it in a word.

    Lists are in rank order: ``rank_score`` is the score the store ranked by, relative to
    the query (its best candidate 1.0 in keyword and hybrid mode). ``keyword_score`` and
    ``vector_score`` are the normalised per-side scores that produced it (``None`` when
    that side was not searched), so a ranking can be explained.

    After a reranking stage (``knowledge.reranking``), ``search_score`` is the store's
    own score and ``rerank_score`` the reranker's (``None`` for a candidate past the
    reranked ones); ``score`` is then the rerank score. Both are ``None`` without
    reranking, and ``to_dict`` leaves them out.

    ``origin``, ``format`` and ``url`` are read from the metadata (``knowledge.core.origin``)
    and shown beside it in ``to_dict`` (``url`` ``None`` when the source has none).

    ``matching_chunks`` is set by a grouped search (``SearchQuery.group_by``): how many
    of the document's chunks matched (``knowledge.ranking.grouping``); ``to_dict`` shows it only
    then.
    """

    document_path: str
    chunk_index: int
    content: str
    score: float
    keyword_score: float | None = None
    vector_score: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    rerank_score: float | None = None
    search_score: float | None = None
    matching_chunks: int | None = None
    rank_score: float | None = None
    """The relative score the list is ordered by (class docstring); ``None`` where a
    result was not made by a store search."""
    extra: bool = False
    """A lesson card appended past ``max_results`` (``knowledge.ranking.origin_weights``)."""
    explanation: Mapping[str, Any] | None = field(default=None, compare=False)
    """How its score was made, with ``explain`` (``knowledge.ranking.explain``); not shown
    by ``to_dict``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen(self.metadata))

    @property
    def strength(self) -> str:
        """``strong``, ``partial`` or ``weak``: how strong evidence ``score`` is
        (``strength_of``)."""
        return strength_of(self.score)

    @property
    def origin(self) -> str | None:
        """Where the document came from (``knowledge.core.origin.ORIGINS``), from the metadata."""
        return _text_of(self.metadata.get(ORIGIN))

    @property
    def format(self) -> str | None:
        """The document's format (``markdown``, ``pdf``, ...), from the metadata."""
        return _text_of(self.metadata.get(FORMAT))

    @property
    def url(self) -> str | None:
        """Where a person can open the document (its sidecar's ``url``), if it has one."""
        return _text_of(self.metadata.get(URL))

    def to_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "document_path": self.document_path,
            "chunk_index": self.chunk_index,
            "content": self.content,
            "score": round(self.score, 6),
            "strength": self.strength,
            "rank_score": None if self.rank_score is None else round(self.rank_score, 6),
            "keyword_score": None if self.keyword_score is None else round(self.keyword_score, 6),
            "vector_score": None if self.vector_score is None else round(self.vector_score, 6),
            "origin": self.origin,
            "format": self.format,
            "url": self.url,
            "metadata": dict(self.metadata),
        }
        if self.extra:
            shown["extra"] = True
        if self.search_score is not None:
            shown["search_score"] = round(self.search_score, 6)
            shown["rerank_score"] = (
                None if self.rerank_score is None else round(self.rerank_score, 6)
            )
        if self.matching_chunks is not None:
            shown["matching_chunks"] = self.matching_chunks
        return shown


def strength_of(score: float) -> str:
    """How strong evidence an absolute ``score`` is: ``strong`` from ``STRONG_SCORE`` on,
    ``partial`` from ``DEFAULT_MIN_SCORE`` on, else ``weak`` (shown only to a caller
    who lowered ``min_score``)."""
    if score >= STRONG_SCORE:
        return "strong"
    if score >= DEFAULT_MIN_SCORE:
        return "partial"
    return "weak"


def evidence_of(results: Sequence[SearchResult]) -> str:
    """How strong the best evidence of a result list is, in a word: ``strength_of`` its
    best score, ``none`` for no results."""
    if not results:
        return "none"
    return strength_of(max(r.score for r in results))


@dataclass(frozen=True, slots=True)
class IndexOptions:
    """What to take from a source. A serialisable value; the chunker is injected elsewhere.

    ``max_documents`` is off (``None``) by default: every listed document is indexed. Set,
    it is a loud limit: documents past it are reported as errors, and a run that hits
    it deletes nothing (its listing is incomplete).
    """

    file_patterns: tuple[str, ...] = DOCUMENT_PATTERNS
    recursive: bool = True
    max_documents: int | None = None
    max_chunk_size: int = 2000
    max_document_bytes: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        raw: object = self.file_patterns
        object.__setattr__(
            self, "file_patterns", (raw,) if isinstance(raw, str) else tuple(self.file_patterns)
        )
        if not self.file_patterns:
            raise ValidationError("file_patterns", "must name at least one pattern")
        if self.max_documents is not None and self.max_documents < 1:
            raise ValidationError("max_documents", f"must be at least 1, got {self.max_documents}")
        if self.max_chunk_size < 50:
            raise ValidationError(
                "max_chunk_size", f"must be at least 50, got {self.max_chunk_size}"
            )


@dataclass(frozen=True, slots=True)
class FileProblem:
    """Why one file was skipped or failed: its path and a human-readable reason."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class IndexResult:
    """What an indexing run did. ``errors`` empty means every file that was tried succeeded.

    ``skipped`` lists files deliberately not indexed (unchanged, binary, too large)
    with the reason; ``errors`` lists files that failed (or were over a set
    ``max_documents``);
    ``warnings`` lists files that were indexed but not quite as written (invalid
    UTF-8 bytes replaced, say).

    ``embedded_chunks`` counts the chunk texts sent to the embedder (paid for, also when
    the document's write then failed); ``reused_chunks`` the chunks whose vector was
    taken from the indexed version of their document instead (same text, same embedder).
    ``unread_files`` counts the files the patterns left out, by extension (a complete
    listing's; ``IndexStatus.unread_files``).
    """

    indexed_documents: int = 0
    indexed_chunks: int = 0
    deleted_documents: int = 0
    duration_ms: float = 0.0
    skipped: tuple[FileProblem, ...] = ()
    errors: tuple[FileProblem, ...] = ()
    embedding_tokens: int = 0
    warnings: tuple[FileProblem, ...] = ()
    embedded_chunks: int = 0
    reused_chunks: int = 0
    unread_files: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "unread_files", _frozen(self.unread_files))

    @property
    def skipped_documents(self) -> int:
        return len(self.skipped)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "indexed_documents": self.indexed_documents,
            "indexed_chunks": self.indexed_chunks,
            "deleted_documents": self.deleted_documents,
            "skipped_documents": self.skipped_documents,
            "duration_ms": round(self.duration_ms, 1),
            "embedding_tokens": self.embedding_tokens,
            "embedded_chunks": self.embedded_chunks,
            "reused_chunks": self.reused_chunks,
            "skipped": [p.to_dict() for p in self.skipped],
            "errors": [p.to_dict() for p in self.errors],
            "warnings": [p.to_dict() for p in self.warnings],
            "unread_files": dict(sorted(self.unread_files.items())),
        }


class IndexState(StrEnum):
    READY = "READY"
    INDEXING = "INDEXING"
    EMPTY = "EMPTY"
    ERROR = "ERROR"


@dataclass(frozen=True, slots=True)
class IndexProgress:
    """How far the indexing under way in a scope has got: ``documents_done`` of the
    ``documents_total`` files of the run (the start-up index) or of the change being
    applied; while one document is written, which (``document``), its size in bytes
    (``document_bytes``, read at once) and its chunks done of about how many
    (``chunks_estimated``, following the share of its text chunked so far);
    ``queued_files``: changed files of the scope waiting behind this work."""

    documents_done: int
    documents_total: int
    document: str | None = None
    document_bytes: int | None = None
    chunks_done: int | None = None
    chunks_estimated: int | None = None
    queued_files: int = 0

    def to_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "documents_done": self.documents_done,
            "documents_total": self.documents_total,
        }
        if self.document is not None:
            answer.update(
                document=self.document,
                document_bytes=self.document_bytes,
                chunks_done=self.chunks_done,
                chunks_estimated=self.chunks_estimated,
            )
        if self.queued_files:
            answer["queued_files"] = self.queued_files
        return answer


@dataclass(frozen=True, slots=True)
class IndexStatus:
    """Index status of one scope. ``last_indexed_at`` is ``None`` if never indexed.

    ``problems`` are the documents whose latest indexing attempt was skipped or failed,
    with the reason, most recent first, at most ``MAX_STATUS_PROBLEMS``.

    Of the ``chunk_count`` chunks with a vector, ``embedded_chunks`` were sent to the
    embedder when their document was last written and ``reused_chunks`` kept the vector
    of the version before (same text, same embedder); a keyword-only store has neither.

    ``unread_files`` counts, by lower-case extension (``NO_EXTENSION`` for none), the files
    of the scope that the file patterns leave out (images, binaries, unlisted types), as
    the last complete listing of the source found them: a count per extension, never one
    problem per file, so nothing a source holds vanishes without a word.
    """

    document_count: int
    chunk_count: int
    last_indexed_at: datetime | None
    state: IndexState
    message: str | None = None
    problems: tuple[FileProblem, ...] = ()
    progress: IndexProgress | None = None
    embedded_chunks: int = 0
    reused_chunks: int = 0
    unread_files: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "unread_files", _frozen(self.unread_files))

    def unread_summary(self) -> str | None:
        """``"32 files not read (no pattern selects them): .png 30, .exe 1, (none) 1"``,
        most numerous first; ``None`` when every file of the source was read."""
        ranked = sorted(self.unread_files.items(), key=lambda kv: (-kv[1], kv[0]))
        total = sum(n for _, n in ranked)
        if not total:
            return None
        noun = "file" if total == 1 else "files"
        counts = ", ".join(f"{extension} {n}" for extension, n in ranked)
        return f"{total} {noun} not read (no pattern selects them): {counts}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "document_count": self.document_count,
            "chunk_count": self.chunk_count,
            "embedded_chunks": self.embedded_chunks,
            "reused_chunks": self.reused_chunks,
            "last_indexed_at": None
            if self.last_indexed_at is None
            else self.last_indexed_at.isoformat(),
            "state": self.state.value,
            "message": self.message,
            "problems": [
                {"document_path": p.path, "reason": p.reason}
                for p in self.problems[:MAX_STATUS_PROBLEMS]
            ],
            "progress": None if self.progress is None else self.progress.to_dict(),
            "unread_files": dict(sorted(self.unread_files.items())),
        }
