"""A hit as the design's consumers read it, beside this API's own fields.

The design's search tool answers ``{score, source, title, snippet, url?}`` per hit and
names the origin ``source_type``; this package says ``document_path``, ``content`` and
``origin``, and keeps the title in ``metadata``. Both are served:

- ``hit_title(metadata, path)``: the chunk's ``title`` (the chunker's: the first H1, else
  the file's base name), else its last heading, else the file's base name;
- ``hit_fields(result, scope, cross_context)``: what the HTTP API adds to each result
  (and to each passage of the prompt context):
  ``source_type`` (the origin), ``title``, and ``agent``/``context``, the scope the hit
  came from (``core.scope_set.hit_scope``: a library hit names its library; ``null`` only
  for a chunk of a search across contexts indexed before every chunk carried its key);
- ``KnowledgeHit`` / ``KnowledgeAnswer``: the ``KnowledgeSearch`` tool's structured
  result (``ToolResult.structured``; ``kb mcp``'s structured content), made from the
  passages its text shows, in the same order and within the same token budget, so the
  text and the data never disagree. ``snippet`` is the passage's text (adjacent chunks
  merged, cut at a sentence end when the budget cuts it, ``results.CUT_MARKER``);
- ``ANSWER_SCHEMA``: the JSON Schema of ``KnowledgeAnswer.to_dict`` (the MCP tool's
  ``outputSchema``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from knowledge.agent_tools.citation import citation
from knowledge.agent_tools.results import Passage
from knowledge.core.model import SearchResult, strength_of
from knowledge.core.origin import FORMAT, ORIGIN, SOURCE_TYPE, URL
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import hit_scope

__all__ = [
    "ANSWER_SCHEMA",
    "HIT_SCHEMA",
    "KnowledgeAnswer",
    "KnowledgeHit",
    "hit_fields",
    "hit_title",
]

_EVIDENCE = ("strong", "partial", "weak", "none")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def hit_title(metadata: Mapping[str, Any], document_path: str) -> str:
    """The title a hit is shown under (module docstring); never empty."""
    title = _text(metadata.get("title"))
    if title is not None:
        return title
    headings = metadata.get("heading_path")
    if isinstance(headings, list | tuple):
        named = [str(h) for h in headings if str(h).strip()]
        if named:
            return named[-1]
    base = posixpath.basename(document_path)
    return posixpath.splitext(base)[0] or base or document_path


def hit_fields(
    result: SearchResult | Passage, scope: KnowledgeScope, cross_context: bool
) -> dict[str, Any]:
    """``source_type``, ``title``, ``agent`` and ``context`` of a result (or a passage of
    results) of a search of ``scope`` (module docstring)."""
    metadata = result.metadata
    found = hit_scope(scope, cross_context, result.document_path, metadata)
    return {
        SOURCE_TYPE: _text(metadata.get(ORIGIN)),
        "title": hit_title(metadata, result.document_path),
        "agent": None if found is None else found.agent,
        "context": None if found is None else found.context,
    }


@dataclass(frozen=True, slots=True)
class KnowledgeHit:
    """One passage of the tool's answer, in the design's shape plus where it came from.

    ``source`` is the document's path in its context (``context``, of ``agent``), the path
    the text's source line starts with; ``source_type`` its origin; ``format`` its file
    format; ``citation`` the place in it (``p. 12``, ``slide 4``; ``None`` when the path
    is all there is); ``first_chunk``/``last_chunk`` the chunks the passage spans."""

    score: float
    source: str
    title: str
    snippet: str
    url: str | None
    agent: str | None
    context: str | None
    source_type: str | None
    format: str | None
    citation: str | None
    first_chunk: int
    last_chunk: int
    strength: str

    @classmethod
    def of(cls, passage: Passage, scope: KnowledgeScope, cross_context: bool) -> KnowledgeHit:
        metadata = passage.metadata
        found = hit_scope(scope, cross_context, passage.document_path, metadata)
        return cls(
            score=round(passage.score, 6),
            source=passage.document_path,
            title=hit_title(metadata, passage.document_path),
            snippet=passage.content.strip(),
            url=_text(metadata.get(URL)),
            agent=None if found is None else found.agent,
            context=None if found is None else found.context,
            source_type=_text(metadata.get(ORIGIN)),
            format=_text(metadata.get(FORMAT)),
            citation=citation(metadata) or None,
            first_chunk=passage.first_chunk,
            last_chunk=passage.last_chunk,
            strength=strength_of(passage.score),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "source": self.source,
            "title": self.title,
            "snippet": self.snippet,
            "url": self.url,
            "agent": self.agent,
            "context": self.context,
            "source_type": self.source_type,
            "format": self.format,
            "citation": self.citation,
            "first_chunk": self.first_chunk,
            "last_chunk": self.last_chunk,
            "strength": self.strength,
        }


@dataclass(frozen=True, slots=True)
class KnowledgeAnswer:
    """The tool's structured answer: the query, how strong its best evidence is
    (``core.model.evidence_of``: ``strong``, ``partial``, ``weak``, or ``none`` for no
    hits), the hits shown, best first, how many the token budget dropped, and
    ``vector_side`` when a vector or hybrid search ran on the keyword side alone
    (``knowledge.ranking.vector_side``; left out when it did not)."""

    query: str
    evidence: str
    results: tuple[KnowledgeHit, ...]
    dropped: int = 0
    vector_side: str | None = None

    @classmethod
    def of(
        cls,
        query: str,
        evidence: str,
        passages: Sequence[Passage],
        dropped: int,
        *,
        scope: KnowledgeScope,
        cross_context: bool,
        vector_side: str | None = None,
    ) -> KnowledgeAnswer:
        hits = tuple(KnowledgeHit.of(p, scope, cross_context) for p in passages)
        return cls(query, evidence, hits, dropped, vector_side)

    def to_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "query": self.query,
            "evidence": self.evidence,
            "results": [hit.to_dict() for hit in self.results],
            "dropped": self.dropped,
        }
        if self.vector_side is not None:
            answer["vector_side"] = self.vector_side
        return answer


def _nullable(kind: str, description: str) -> dict[str, Any]:
    return {"type": [kind, "null"], "description": description}


HIT_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "score": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "Absolute relevance in [0, 1]; the same score means equally "
            "strong evidence in every query",
        },
        "source": {"type": "string", "description": "The document's path in its context"},
        "title": {"type": "string", "description": "The document's title or section heading"},
        "snippet": {"type": "string", "description": "The passage's text"},
        "url": _nullable("string", "Where a person can open the document, if it has a URL"),
        "agent": _nullable("string", "The agent whose knowledge holds the document"),
        "context": _nullable("string", "The context (knowledge area) the document is in"),
        "source_type": _nullable("string", "Origin: upload, repo, manual or shared"),
        "format": _nullable("string", "File format: markdown, text, pdf, docx, ..."),
        "citation": _nullable("string", "The place in the document: p. 12, slide 4, ..."),
        "first_chunk": {"type": "integer", "minimum": 0},
        "last_chunk": {"type": "integer", "minimum": 0},
        "strength": {"type": "string", "enum": list(_EVIDENCE[:3])},
    },
    "required": [
        "score",
        "source",
        "title",
        "snippet",
        "url",
        "agent",
        "context",
        "source_type",
        "format",
        "citation",
        "first_chunk",
        "last_chunk",
        "strength",
    ],
}

ANSWER_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "evidence": {
            "type": "string",
            "enum": list(_EVIDENCE),
            "description": "How strong the best hit is; none: the knowledge is not there",
        },
        "results": {"type": "array", "items": HIT_SCHEMA},
        "dropped": {
            "type": "integer",
            "minimum": 0,
            "description": "Hits left out to stay within max_tokens",
        },
        "explain": {"type": "object", "description": "The ranking trace, when asked for"},
        "vector_side": {
            "type": "string",
            "description": "Present when the embedder cannot read the query: why the "
            "search used keywords only",
        },
    },
    "required": ["query", "evidence", "results", "dropped"],
}
