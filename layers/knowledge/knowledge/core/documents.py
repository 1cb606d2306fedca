"""The documents of a scope, as the index records them: one listing contract for every store.

``KnowledgeStore.list_documents(scope, limit=..., cursor=...)`` pages through a scope's
documents in path order (Python ``str`` order, which is UTF-8 byte order: what SQLite's
``BINARY`` collation and an OpenSearch ``keyword`` sort give too); ``get_document`` reads
one. A document is listed when it has an indexed version, a problem (its latest attempt
failed), or both. Everything comes from the stores' per-document records, never from
the source.

**Cursors.** A cursor is opaque to callers: URL-safe base64 of a small JSON object
holding the scope and the last path of the page. ``decode_cursor`` refuses a cursor
of another scope (400, field ``cursor``). Isolation does not depend on that check: a
store always filters on the scope it is given, and the cursor only says where in that
scope to resume. The binding turns a cursor used on the wrong scope into a clear error
instead of a silently wrong page, so no secret (signing key) is needed.

Paths read from a caller (``validate_document_path``) follow the object-key rule of
``knowledge.core.scope``: no empty, ``.`` or ``..`` segment; and hold no control
character or line separator, so a path is always one printable line.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl

from knowledge.core.errors import ValidationError
from knowledge.core.scope import KnowledgeScope

__all__ = [
    "DEFAULT_DOCUMENTS_LIMIT",
    "MAX_DOCUMENTS_LIMIT",
    "MAX_DOCUMENT_PATH_LENGTH",
    "DocumentPage",
    "IndexedDocument",
    "decode_cursor",
    "document_page",
    "encode_cursor",
    "format_documents",
    "has_control_character",
    "pack_cursor",
    "query_parameters",
    "unpack_cursor",
    "validate_document_path",
    "validate_documents_limit",
]

DEFAULT_DOCUMENTS_LIMIT = 100
MAX_DOCUMENTS_LIMIT = 1000
MAX_DOCUMENT_PATH_LENGTH = 1024  # S3's limit on a whole key, so no document path is longer
_CURSOR_VERSION = 1
_MAX_CURSOR_LENGTH = 4 * MAX_DOCUMENT_PATH_LENGTH


@dataclass(frozen=True, slots=True)
class IndexedDocument:
    """One document of a scope as its record says.

    ``indexed_at``, ``content_hash`` are ``None`` (and ``chunk_count`` 0) for a document
    that only has a problem; ``problem`` is the reason the latest attempt failed (the
    indexed version, if any, is still the one searched: ``stale``). ``format`` and
    ``origin`` (``knowledge.core.origin``) are ``None`` for a document that is not indexed.
    """

    path: str
    format: str | None
    size: int | None
    chunk_count: int
    version: str | None
    content_hash: str | None
    indexed_at: datetime | None
    problem: str | None = None
    origin: str | None = None

    @property
    def indexed(self) -> bool:
        return self.indexed_at is not None

    @property
    def stale(self) -> bool:
        """An older version is what is searched: the latest attempt failed (``problem``)
        and a previous version is indexed. A failed write never removes what was
        searchable before; a good version or a delete of the file ends it."""
        return self.indexed and self.problem is not None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IndexedDocument:
        """The inverse of ``to_dict`` (an API answer); ``KeyError``/``TypeError``/
        ``ValueError`` for one that is not such a document."""
        indexed_at, size, problem = data.get("indexed_at"), data.get("size"), data.get("problem")
        return cls(
            path=str(data["path"]),
            format=_optional_text(data.get("format")),
            size=None if size is None else int(size),
            chunk_count=int(data["chunk_count"]),
            version=_optional_text(data.get("version")),
            content_hash=_optional_text(data.get("content_hash")),
            indexed_at=None if indexed_at is None else datetime.fromisoformat(str(indexed_at)),
            problem=None if problem is None else str(problem),
            origin=_optional_text(data.get("origin")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "indexed": self.indexed,
            "stale": self.stale,
            "origin": self.origin,
            "format": self.format,
            "size": self.size,
            "chunk_count": self.chunk_count,
            "version": self.version,
            "content_hash": self.content_hash,
            "indexed_at": None if self.indexed_at is None else self.indexed_at.isoformat(),
            "problem": self.problem,
        }


def _optional_text(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True, slots=True)
class DocumentPage:
    """One page of a listing; ``next_cursor`` is ``None`` on the last page."""

    documents: tuple[IndexedDocument, ...]
    next_cursor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "documents": [d.to_dict() for d in self.documents],
            "next_cursor": self.next_cursor,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DocumentPage:
        """The inverse of ``to_dict`` (an API answer)."""
        cursor = data.get("next_cursor")
        return cls(
            tuple(IndexedDocument.from_dict(d) for d in data["documents"]),
            None if cursor is None else str(cursor),
        )


def query_parameters(query_string: str | None, allowed: Sequence[str]) -> dict[str, str]:
    """A document route's query string as ``{name: value}``: every name one of
    ``allowed``, none twice; otherwise (or not URL-encoded UTF-8) a ``ValidationError``
    naming the parameter (``query`` for the encoding)."""
    values: dict[str, str] = {}
    try:
        pairs = parse_qsl(query_string or "", keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise ValidationError("query", "is not URL-encoded UTF-8") from None
    for name, value in pairs:
        if name not in allowed:
            shown = name if len(name) <= 64 else name[:61] + "..."
            raise ValidationError(
                shown, f"is not a known parameter (allowed: {', '.join(allowed)})"
            )
        if name in values:
            raise ValidationError(name, "is given more than once")
        values[name] = value
    return values


def validate_documents_limit(value: object, field_name: str = "limit") -> int:
    """``value`` if it is an integer in [1, MAX_DOCUMENTS_LIMIT], else ``ValidationError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            field_name, f"must be an integer from 1 to {MAX_DOCUMENTS_LIMIT}, got {value!r}"
        )
    if not 1 <= value <= MAX_DOCUMENTS_LIMIT:
        raise ValidationError(field_name, f"must be from 1 to {MAX_DOCUMENTS_LIMIT}, got {value}")
    return value


def has_control_character(value: str) -> bool:
    """Whether ``value`` holds a C0 control, DEL or a C1 control (U+0080-U+009F). None of
    them prints, and several are line breaks to ``str.splitlines()`` (U+0085, U+001C to
    U+001E) or a terminal's escapes (U+009B): a name holding one could forge a line of a
    log or a listing, or be shown as something else than it is."""
    return any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in value)


def validate_document_path(value: object, field_name: str = "path") -> str:
    """A document path inside a scope: non-empty text of at most
    ``MAX_DOCUMENT_PATH_LENGTH`` characters, without empty, ``.`` or ``..`` segments,
    control characters (``has_control_character``) or the line and paragraph separators
    U+2028 and U+2029 (line breaks too, to ``str.splitlines()`` and JavaScript). Raises
    ``ValidationError`` naming ``field_name``."""
    if not isinstance(value, str) or not value:
        raise ValidationError(field_name, "must be a non-empty document path")
    if len(value) > MAX_DOCUMENT_PATH_LENGTH:
        raise ValidationError(
            field_name, f"must be at most {MAX_DOCUMENT_PATH_LENGTH} characters, got {len(value)}"
        )
    if has_control_character(value):
        raise ValidationError(field_name, "must not contain control characters")
    if "\u2028" in value or "\u2029" in value:
        raise ValidationError(
            field_name, "must not contain a line or paragraph separator (U+2028, U+2029)"
        )
    if not _is_text(value):
        raise ValidationError(field_name, "must be text (it holds an unpaired surrogate)")
    if any(segment in ("", ".", "..") for segment in value.split("/")):
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise ValidationError(field_name, f"'{shown}' has an empty, '.' or '..' path segment")
    return value


def _is_text(value: str) -> bool:
    """False for a string no UTF-8 holds (an unpaired surrogate, which JSON's ``\\ud800``
    can carry): stores cannot bind, send or order it alike."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def pack_cursor(payload: Mapping[str, Any]) -> str:
    """A cursor of ``payload`` (a small JSON object): URL-safe base64, no padding."""
    raw = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def unpack_cursor(cursor: object, refusal: str) -> dict[str, Any]:
    """The JSON object of a ``pack_cursor`` cursor; ``ValidationError`` (field ``cursor``,
    ``refusal`` its message) for anything else."""
    if not isinstance(cursor, str) or not cursor or len(cursor) > _MAX_CURSOR_LENGTH:
        raise ValidationError("cursor", refusal)
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        payload = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        raise ValidationError("cursor", refusal) from None
    if not isinstance(payload, dict):
        raise ValidationError("cursor", refusal)
    return payload


def encode_cursor(scope: KnowledgeScope, last_path: str) -> str:
    """The cursor that resumes a listing of ``scope`` after ``last_path``."""
    return pack_cursor({"v": _CURSOR_VERSION, "a": scope.agent, "c": scope.context, "p": last_path})


def decode_cursor(scope: KnowledgeScope, cursor: str | None) -> str | None:
    """The path a listing of ``scope`` resumes after (``None``: from the start).

    Raises ``ValidationError`` (field ``cursor``) for a cursor this module did not make,
    or one made for another scope."""
    if cursor is None:
        return None
    refusal = "is not a cursor returned by a documents listing"
    payload = unpack_cursor(cursor, refusal)
    if (
        "k" in payload  # another listing's cursor (knowledge.core.chunk_listing)
        or payload.get("v") != _CURSOR_VERSION
        or not isinstance(payload.get("p"), str)
        or not _is_text(payload["p"])
    ):
        raise ValidationError("cursor", refusal)
    if payload.get("a") != scope.agent or payload.get("c") != scope.context:
        raise ValidationError("cursor", f"belongs to another scope than {scope}")
    path: str = payload["p"]
    return path


def document_page(
    scope: KnowledgeScope, documents: Sequence[IndexedDocument], limit: int
) -> DocumentPage:
    """A page from up to ``limit + 1`` documents in path order: the first ``limit``, and
    a cursor when there was one more (a store reads one extra to know)."""
    page = tuple(documents[:limit])
    more = len(documents) > limit and bool(page)
    return DocumentPage(page, encode_cursor(scope, page[-1].path) if more else None)


def format_documents(page: DocumentPage, more: str = "more: --cursor {cursor}") -> str:
    """One line per document (path, type, size, chunks, when indexed, ``stale``, problem), then the
    cursor of the next page, if any, as ``more`` says it (``{cursor}``: the cursor; the
    default is the ``kb documents`` option)."""
    lines: list[str] = []
    for doc in page.documents:
        when = (
            "not indexed"
            if doc.indexed_at is None
            else doc.indexed_at.isoformat(timespec="seconds")
        )
        size = "-" if doc.size is None else f"{doc.size} B"
        kinds = f"{doc.origin or '-'}, {doc.format or '-'}"
        stale = ", stale" if doc.stale else ""
        line = f"{doc.path}  [{kinds}, {size}, {doc.chunk_count} chunks, {when}{stale}]"
        if doc.problem:
            line += f"  problem: {doc.problem}"
        lines.append(line)
    if not lines:
        lines.append("no documents")
    if page.next_cursor:
        lines.append(more.format(cursor=page.next_cursor))
    return "\n".join(lines)
