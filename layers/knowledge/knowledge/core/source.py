"""Where documents come from. The source owns documents; stores own only the index
(docs/architecture.md, "Sources own documents").

A ``DocumentSource`` lists the documents of one scope. Paths are relative to the
scope (``runbooks/deploy.md``), ``/``-separated. A document's optional sidecar
``<path>.metadata.json`` (Bedrock's ``{"metadataAttributes": {...}}`` form) is not a
document itself: its attributes become metadata of every chunk. Nor is the scope's
synonyms file ``_synonyms.txt`` (``SYNONYMS_FILE``, at the scope's root: configuration,
``knowledge.ranking.synonym_expansion``), which the indexing run stores with the scope instead.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from knowledge.core.model import IndexOptions
from knowledge.core.origin import UPLOAD
from knowledge.core.path_filters import matches_file_patterns
from knowledge.core.scope import KnowledgeScope

__all__ = [
    "SIDECAR_SUFFIX",
    "SYNONYMS_FILE",
    "UPLOAD_MARKER",
    "DocumentSource",
    "SourceDocument",
    "is_document_path",
]

SIDECAR_SUFFIX = ".metadata.json"
SYNONYMS_FILE = "_synonyms.txt"
"""The scope's synonyms (Solr format, ``knowledge.ranking.synonym_expansion``): at the scope's root
only, never a document; its problems are recorded under this path."""
UPLOAD_MARKER = ("kb-upload", "1")
"""The S3 user metadata (``x-amz-meta-kb-upload: 1``) a presigned upload's object carries:
its POST policy fixes the field, so every object stored through a grant has it. The
indexer then ignores a sidecar no newer than the object (one left by an earlier note of
the same path), so the upload is indexed as an ``upload`` without the note's metadata."""


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One document as its source knows it; ``read()`` fetches the bytes only when needed.

    ``version`` orders writes of the same path (an S3 ``sequencer``; ``None`` when
    the source has no ordering); ``metadata`` is user metadata from a sidecar (string
    values, or lists of strings for Bedrock ``STRING_LIST`` attributes). ``revision``
    names exactly what ``read()`` and ``metadata`` hold (S3: the object's and its
    sidecar's ETags), so a caller can tell whether the source changed meanwhile
    (``None``: the source cannot tell). ``origin`` is where the source's documents come
    from (``knowledge.core.origin``): ``upload`` for the bucket and the local folder, where a
    sidecar ``origin`` (a writer's: ``repo``, ``manual``) says otherwise.
    """

    path: str
    size: int
    read: Callable[[], bytes]
    version: str | None = None
    metadata: Mapping[str, str | list[str]] = field(default_factory=dict)
    source_key: str | None = None
    revision: str | None = None
    origin: str = UPLOAD


@runtime_checkable
class DocumentSource(Protocol):
    """Lists the documents of a scope that match the options (patterns, recursion)."""

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Iterator[SourceDocument]:
        """Yield matching documents in a stable order (sorted by path)."""
        ...


def is_document_path(path: str, patterns: Sequence[str]) -> bool:
    """True if the file at ``path`` is one of the documents ``patterns`` select: a pattern
    matches it (``matches_file_patterns``), or matches it with its extension in lower
    case, as the extractors read extensions: ``Scan.PDF`` and ``Notes.Docx`` are indexed
    by the default ``*.pdf`` and ``*.docx`` instead of being ignored without a word.
    The rest of the path matches case-sensitively, as S3 keys do. A metadata sidecar is
    never a document, whatever the patterns (``*.json`` selects data files, not sidecars),
    nor is the scope's synonyms file (``SYNONYMS_FILE``)."""
    if path.endswith(SIDECAR_SUFFIX) or path == SYNONYMS_FILE:
        return False
    if matches_file_patterns(path, patterns):
        return True
    stem, extension = posixpath.splitext(path)
    lowered = stem + extension.lower()
    return lowered != path and matches_file_patterns(lowered, patterns)
