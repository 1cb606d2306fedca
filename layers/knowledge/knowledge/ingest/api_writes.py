"""Document writes through the API: put a file or a note, delete one, presign an upload.

The write routes (``knowledge.service.api``) turn a request into a ``DocumentWrite`` here and hand
it to a ``DocumentStorage``: the S3 bucket on AWS (``knowledge.aws.bucket_writes``), the served
folder under ``kb serve --allow-writes`` (``knowledge.local.folder_writes``). The storage only
writes; indexing is what it always was (the bucket's event pipeline, the folder's
watcher), so the bucket (or folder) stays the single source of truth and a write is
answered **202** before it is searchable, with what to poll (``accepted_body``).

What a write may name, checked before anything is stored (``check_write_path``):

- the document path rules of every route (``validate_document_path``: no empty, ``.``
  or ``..`` segment, no control characters, at most 1,024 characters; the route's
  segment is one URL-encoded path, ``document_path_segment``);
- no metadata sidecar name (``*.metadata.json``: the sidecar is written with its
  document, never on its own) as any segment (a folder of that name would stand where
  a document's sidecar file goes), no hidden segment (``.name``: never indexed), no
  reserved prefix (``RESERVED_PREFIXES``: ``_repos/`` holds the Git repository mirrors,
  ``_kb/`` is kept for the product's own files), nor the scope's synonyms file
  (``_synonyms.txt`` at its root: configuration, read by the indexer from the bucket or
  folder, ``knowledge.ranking.synonym_expansion``); names and prefixes in any letter case,
  since a case-insensitive file system (macOS, Windows) makes them the same folder;
- an extension the indexer reads (``knowledge.extraction.DOCUMENT_PATTERNS``) and not
  one it only lists as a problem (``REFUSED_FORMATS``: ``.doc``, ``.odt``, ...), content
  that is what the extension says (``knowledge.extraction.sniff``; a PDF or Office file
  must carry its signature, a text body must hold more than white space, Unicode
  white space included), at most ``MAX_DOCUMENT_BYTES`` (the API Gateway -> Lambda
  payload bound, below) and at most the indexer's own document limit (``put_limit``;
  over either is a 413, ``TooLargeError``): a write the indexer could not read would,
  on an overwrite, take the earlier version out of the index;
- the reserved owner ``_shared`` (``SHARED_AGENT``, any case, and with trailing dots,
  which some file systems drop) is never writable: the shared library is the
  operator's, written to the bucket directly; nor is a hidden agent or context
  (``.kb``, ``.git``). Reserved names are compared as such a file system stores them:
  without trailing dots and spaces (``_repos. /`` is ``_repos/`` on Windows).

Each storage checks what only it knows: S3 keys of at most 1,024 bytes (with the
sidecar's suffix), the folder's file-name length, a path through a file or onto a folder.

A note is a Markdown file written with ``origin=manual``; any write may carry
``metadata`` (a JSON object: the sidecar's ``metadataAttributes``). Every write stores
the sidecar ``{"metadataAttributes": {..., "origin": "upload"|"manual"}}`` with its
document, replacing an earlier one, so a document's metadata is always what its last
write said. Always writing it (rather than deleting it when there is nothing to say)
keeps a versioned bucket from collecting a delete marker, and an extra event, per write.

Size: a Lambda behind API Gateway receives at most 6 MB per synchronous invoke (the
HTTP API itself takes 10 MB), and a binary body arrives base64 encoded (4/3 larger), so
``MAX_DOCUMENT_BYTES`` is 4 MiB (5.6 MB encoded, with room for the event). Larger
files go through ``POST .../uploads``: a presigned S3 POST bound to one key, a length
range and an expiry (``UploadGrant``).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from knowledge.agent_tools.shared import SHARED_AGENT
from knowledge.core.documents import query_parameters, validate_document_path
from knowledge.core.errors import AccessDeniedError, TooLargeError, ValidationError
from knowledge.core.formats import REFUSED_FORMATS
from knowledge.core.origin import MANUAL, ORIGIN, UPLOAD
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SIDECAR_SUFFIX, SYNONYMS_FILE

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_UPLOAD_BYTES",
    "RESERVED_PREFIXES",
    "SHARED_AGENT",
    "UPLOAD_EXPIRY_SECONDS",
    "WRITE_PARAMETERS",
    "DocumentStorage",
    "DocumentWrite",
    "UploadGrant",
    "accepted_body",
    "check_writable_scope",
    "check_write_path",
    "parse_upload_request",
    "parse_write",
    "put_limit",
]

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
"""Largest body of a ``PUT .../documents/{path}`` (module docstring: the Lambda payload)."""
MAX_UPLOAD_BYTES = 100 * 1024 * 1024
"""Largest file a presigned upload accepts (the indexer's own size limit decides the rest)."""
UPLOAD_EXPIRY_SECONDS = 900
"""How long a presigned upload stays valid; a request may ask for 60 to 3,600 seconds."""
RESERVED_PREFIXES = ("_repos/", "_kb/")
WRITE_PARAMETERS = ("origin", "metadata")
_WRITE_ORIGINS = (UPLOAD, MANUAL)
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_NOTE_TYPES = ("text/markdown", "text/plain", "text/x-markdown")
_UPLOAD_FIELDS = ("path", "size", "expires_in")
# Formats whose bytes carry a signature (knowledge.extraction.sniff): a body without it
# is refused rather than stored to become a corrupt file.
_SIGNED_FORMATS = {
    ".pdf": "a PDF document (no '%PDF-' header in its first 1,024 bytes)",
    ".docx": "a Word document (a zip holding word/document.xml)",
    ".pptx": "a PowerPoint presentation (a zip holding ppt/presentation.xml)",
    ".xlsx": "an Excel workbook (a zip holding xl/workbook.xml)",
}
# Content types that name a format; anything else (octet-stream, none) is sniffed only.
_TYPE_EXTENSIONS = {
    "application/pdf": (".pdf",),
    "text/markdown": (".md", ".markdown"),
    "text/x-markdown": (".md", ".markdown"),
    "text/html": (".html", ".htm"),
    "text/csv": (".csv",),
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": (".docx",),
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": (".pptx",),
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": (".xlsx",),
}


class DocumentStorage(Protocol):
    """Where written documents go (the bucket, the served folder)."""

    @property
    def max_upload_bytes(self) -> int:
        """The largest file an upload grant admits: the indexer's document limit (a larger
        one could only become a "too large" problem, and take an earlier version out)."""

    def put(self, scope: KnowledgeScope, path: str, data: bytes, sidecar: bytes) -> None:
        """Store ``data`` at ``path`` and its sidecar, replacing both. The sidecar is
        written first, so the document's own write is the last event."""

    def delete(self, scope: KnowledgeScope, path: str) -> bool | None:
        """Remove the document and its sidecar (the document first); whether it was
        there, or ``None`` when the storage does not know (S3: a delete is idempotent)."""

    def presign_upload(
        self, scope: KnowledgeScope, path: str, max_bytes: int, expires_in: int
    ) -> dict[str, Any]:
        """``{"url", "fields"}`` of a presigned POST bound to the key, or raise
        ``ValidationError`` when this storage has none (the local folder)."""


@dataclass(frozen=True, slots=True)
class DocumentWrite:
    """One checked write: the bytes, and the sidecar to store with them."""

    scope: KnowledgeScope
    path: str
    data: bytes
    origin: str
    metadata: Mapping[str, Any]

    @property
    def sidecar(self) -> bytes:
        attributes = {**self.metadata, ORIGIN: self.origin}
        return json.dumps({"metadataAttributes": attributes}, ensure_ascii=False).encode("utf-8")

    @property
    def content_hash(self) -> str:
        """What the document's record will hold once this version is indexed."""
        from knowledge.ingest.pipeline import document_fingerprint  # not on the read path
        from knowledge.ingest.sources import parse_metadata_sidecar

        return document_fingerprint(self.data, parse_metadata_sidecar(self.sidecar))


@dataclass(frozen=True, slots=True)
class UploadGrant:
    """A presigned upload of one document: where to POST, the form fields, the limits."""

    path: str
    url: str
    fields: Mapping[str, str]
    max_bytes: int
    expires_in: int


def _stored_name(segment: str) -> str:
    """The name a file system that drops trailing dots and spaces (Windows; SMB and exFAT
    shares mounted elsewhere) stores ``segment`` under, folded to one letter case (macOS
    and Windows file systems ignore it): the name that decides which folder it is."""
    return segment.rstrip(". ").casefold()


def check_writable_scope(scope: KnowledgeScope) -> KnowledgeScope:
    """``scope``, unless it is the shared library's (``AccessDeniedError``) or a hidden
    one (``ValidationError``: a ``.name`` folder or prefix is never indexed, so the write
    would never be searchable, and ``.git``/``.kb`` are other programs' own)."""
    # In any letter case: on macOS's file system _SHARED/ is the library's folder.
    if scope.agent.casefold() == SHARED_AGENT:
        raise AccessDeniedError(
            "agent", f"'{SHARED_AGENT}' is the shared library: read-only through the API"
        )
    if _stored_name(scope.agent) == SHARED_AGENT:
        raise ValidationError(
            "agent",
            f"'{scope.agent}' ends in a dot: where trailing dots are dropped it is the shared "
            f"library '{SHARED_AGENT}' (read-only through the API); choose another name",
        )
    for field_name, segment in (("agent", scope.agent), ("context", scope.context)):
        if segment.startswith("."):
            raise ValidationError(
                field_name, f"'{segment}' starts with '.': a hidden folder is never indexed"
            )
    return scope


def check_write_path(path: str, field_name: str = "path") -> str:
    """A document path a write may name (module docstring), else ``ValidationError``."""
    validate_document_path(path, field_name)
    shown = path if len(path) <= 80 else path[:77] + "..."
    # Each segment as the file system stores it: in any letter case (on macOS's and
    # Windows' file systems X.METADATA.JSON is the sidecar and _REPOS/ the mirror folder)
    # and without trailing dots and spaces ('_repos. ' is _repos/ on Windows), since
    # kb serve writes the folder as named.
    *folders, name = (_stored_name(segment) for segment in path.split("/"))
    if name.endswith(SIDECAR_SUFFIX):
        raise ValidationError(
            field_name,
            f"'{shown}' is a metadata sidecar name; send metadata with the document instead",
        )
    if any(folder.endswith(SIDECAR_SUFFIX) for folder in folders):
        # A folder named like a sidecar takes the place of a document's sidecar file, so
        # that document could never be written again.
        raise ValidationError(
            field_name, f"'{shown}' has a folder named like a metadata sidecar (*{SIDECAR_SUFFIX})"
        )
    if any(segment.startswith(".") for segment in path.split("/")):
        raise ValidationError(field_name, f"'{shown}' has a hidden segment (never indexed)")
    if "\\" in path:
        raise ValidationError(field_name, f"'{shown}' contains a backslash")
    if _PERCENT_ESCAPE.search(path):
        raise ValidationError(
            field_name, f"'{shown}' still holds a percent-escape once decoded (encoded twice?)"
        )
    first = (folders or [name])[0]
    for prefix in RESERVED_PREFIXES:
        if first == prefix.rstrip("/"):
            raise ValidationError(field_name, f"'{prefix}' is reserved; choose another folder")
    if not folders and name == SYNONYMS_FILE.casefold():
        raise ValidationError(
            field_name,
            f"'{SYNONYMS_FILE}' is the scope's synonyms file (configuration, not a document); "
            "put it in the bucket or the folder itself (docs/ranking.md)",
        )
    from knowledge.core.source import is_document_path
    from knowledge.extraction import DOCUMENT_PATTERNS

    if not is_document_path(path, DOCUMENT_PATTERNS):
        raise ValidationError(
            field_name,
            f"'{shown}' has an extension the indexer does not read "
            f"(allowed: {', '.join(DOCUMENT_PATTERNS)})",
        )
    return path


def _metadata(text: str | None, origin: str) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python parses
        raise ValidationError("metadata", "must be a JSON object (URL-encoded)") from None
    if not isinstance(value, dict):
        raise ValidationError("metadata", "must be a JSON object of attributes")
    if ORIGIN in value:
        raise ValidationError("metadata.origin", "is set by the 'origin' parameter")
    from knowledge.ingest.sources import parse_metadata_sidecar

    # The sidecar's own rules (values, url, size with the origin it is stored with), so a
    # write never stores one the indexer refuses.
    attributes = {**value, ORIGIN: origin}
    encoded = json.dumps({"metadataAttributes": attributes}, ensure_ascii=False).encode("utf-8")
    parse_metadata_sidecar(encoded)
    return value


def _check_supported(path: str) -> str:
    """The path's lower-case extension, unless it names a format the indexer lists but
    never reads (``REFUSED_FORMATS``: a write of it could never be searchable; a delete
    of one still may name it)."""
    extension = posixpath.splitext(path)[1].lower()
    if extension in REFUSED_FORMATS:
        raise ValidationError("path", f"unsupported format: {REFUSED_FORMATS[extension]}")
    return extension


def put_limit(indexed_bytes: int) -> int:
    """The largest body a ``PUT`` takes where the indexer indexes documents of at most
    ``indexed_bytes`` (``DocumentStorage.max_upload_bytes``): ``MAX_DOCUMENT_BYTES`` or
    less. A larger body would be answered 202 and then skipped as too large, so the
    caller would wait for a version that is never indexed."""
    return min(MAX_DOCUMENT_BYTES, indexed_bytes)


def _check_size(data: bytes, indexed_bytes: int) -> None:
    limit = put_limit(indexed_bytes)
    if len(data) <= limit:
        return
    if limit < indexed_bytes:  # the payload bound: the indexer takes more another way
        advice = "use POST .../uploads for a larger file (kb serve: copy it into the folder)"
    else:
        advice = "the largest document this service indexes"
    raise TooLargeError("body", f"is {len(data)} bytes, over the limit of {limit}; {advice}")


def _check_content(
    path: str, data: bytes, content_type: str | None, origin: str, indexed_bytes: int
) -> None:
    if not data:
        raise ValidationError("body", "is empty; send the document's bytes")
    _check_size(data, indexed_bytes)
    extension = _check_supported(path)
    media = (content_type or "").split(";")[0].strip().lower()
    if origin == MANUAL:
        if extension not in (".md", ".markdown"):
            raise ValidationError(
                "path", "a note (origin=manual) is a Markdown file: end it in .md"
            )
        if media and media not in _NOTE_TYPES:
            raise ValidationError("content-type", f"a note is text/markdown, got '{media}'")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValidationError("body", "a note must be UTF-8 text") from None
    expected = _TYPE_EXTENSIONS.get(media)
    if expected is not None and extension not in expected:
        raise ValidationError(
            "content-type", f"'{media}' does not match the path's extension '{extension}'"
        )
    from knowledge.extraction.sniff import content_kind, misnamed

    wrong = misnamed(extension, data)
    if wrong is not None:
        raise ValidationError("body", str(wrong))
    signed = _SIGNED_FORMATS.get(extension)
    if signed is None and _holds_no_text(data):
        # Indexed, "no text": the earlier version would leave the index with nothing new.
        raise ValidationError("body", "holds no text (white space only); DELETE it instead")
    kind = content_kind(data) if signed is not None else None
    if signed is not None and (kind is None or kind[1] != extension):
        # Indexed, it would be a corrupt file: and an overwrite would take the searchable
        # earlier version out of the index with it.
        found = f"is {kind[0]}, not" if kind is not None else "is not"
        raise ValidationError("body", f"{found} {signed}; send the file itself")


def _holds_no_text(data: bytes) -> bool:
    """Whether a text format's ``data`` is only white space once decoded as the indexer
    decodes it (``knowledge.extraction.encoding``): Unicode white space (U+3000, a no-break
    space, UTF-16 blanks) too, which the indexer strips as it strips ASCII blanks, and
    byte order marks."""
    if not data.removeprefix(b"\xef\xbb\xbf").strip():
        return True
    from knowledge.extraction.encoding import choose_encoding

    text = data.decode(choose_encoding(data).codec, errors="replace")
    return not text.replace("\ufeff", "").strip()


def parse_write(
    scope: KnowledgeScope,
    path: str,
    data: bytes,
    *,
    content_type: str | None,
    query_string: str | None,
    indexed_bytes: int = MAX_DOCUMENT_BYTES,
) -> DocumentWrite:
    """Check one ``PUT .../documents/{path}`` (``path`` decoded) and say what to store.
    ``indexed_bytes`` is the indexer's document limit (the storage's
    ``max_upload_bytes``): a body over it, or over ``MAX_DOCUMENT_BYTES``, is a
    ``TooLargeError`` (``put_limit``)."""
    check_writable_scope(scope)
    check_write_path(path)
    parameters = query_parameters(query_string, WRITE_PARAMETERS)
    origin = parameters.get("origin") or UPLOAD
    if origin not in _WRITE_ORIGINS:
        raise ValidationError(
            "origin", f"must be one of {', '.join(_WRITE_ORIGINS)} (got '{origin[:40]}')"
        )
    metadata = _metadata(parameters.get("metadata"), origin)
    _check_content(path, data, content_type, origin, indexed_bytes)
    return DocumentWrite(scope, path, data, origin, metadata)


def parse_upload_request(
    data: Mapping[str, Any], limit: int = MAX_UPLOAD_BYTES
) -> tuple[str, int, int]:
    """``(path, max_bytes, expires_in)`` of a ``POST .../uploads`` body
    ``{"path", "size"?, "expires_in"?}``; ``size`` is the most the upload may send, from 1
    to ``limit`` (the storage's ``max_upload_bytes``), which is also its default."""
    unknown = sorted(str(k) for k in data if k not in _UPLOAD_FIELDS)
    if unknown:
        raise ValidationError(
            unknown[0][:64], f"is not a known field (allowed: {', '.join(_UPLOAD_FIELDS)})"
        )
    path = check_write_path(data.get("path"), "path")  # type: ignore[arg-type]
    _check_supported(path)
    limit = min(limit, MAX_UPLOAD_BYTES)
    size = data.get("size", limit)
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= limit:
        raise ValidationError(
            "size", f"must be an integer from 1 to {limit} (the largest document indexed)"
        )
    expires = data.get("expires_in", UPLOAD_EXPIRY_SECONDS)
    if isinstance(expires, bool) or not isinstance(expires, int) or not 60 <= expires <= 3600:
        raise ValidationError("expires_in", "must be an integer from 60 to 3600 seconds")
    return path, size, expires


def document_route(scope: KnowledgeScope, path: str) -> str:
    """The route that shows a document's state (``GET .../documents/{path}``)."""
    return f"/v1/agents/{scope.agent}/contexts/{scope.context}/documents/{quote(path, safe='')}"


def accepted_body(write: DocumentWrite) -> dict[str, Any]:
    """The 202 answer to a write: the path, and when it is searchable."""
    return {
        "agent": write.scope.agent,
        "context": write.scope.context,
        "path": write.path,
        "origin": write.origin,
        "size": len(write.data),
        "content_hash": write.content_hash,
        "document": document_route(write.scope, write.path),
        "searchable_when": (
            "GET document answers indexed: true with this content_hash "
            "(the earlier version stays searchable until then)"
        ),
    }
