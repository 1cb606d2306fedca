"""Where a document came from (its *origin*) and what it is (its *format*), kept apart.

Every chunk and document record carries both as system metadata keys that the indexer
sets (``knowledge.ingest.pipeline``), so they filter like any key and come back on every hit:

- ``origin`` (``ORIGIN``): one of ``ORIGINS``, a closed set -
  ``upload`` (a file in the bucket or the local folder), ``repo`` (a file of a
  registered Git repository), ``manual`` (a note written through the product) and
  ``shared`` (the built-in shared library). A source says its documents' origin
  (``SourceDocument.origin``, ``upload`` for the bucket and the local folder); a metadata
  sidecar may set it to one of ``SIDECAR_ORIGINS`` only (a writer's: the write API and a
  repository sync write ``manual`` / ``repo`` there), never ``shared``.
- ``format`` (``FORMAT``): the extraction format (``markdown``, ``text``, ``pdf``,
  ``docx``, ...; ``knowledge.extraction``). Before origins existed this was the key
  ``source_type``; a filter that still names ``source_type`` is refused with a pointer
  to both (``RENAMED_SOURCE_TYPE``), never silently matched against nothing.
- ``url`` (``URL``): where a person can open the document, when its source has one (a
  sidecar ``url``: an absolute ``http``/``https`` URL; a plain bucket file has none).

An index written before records carried these (``RECORDS``, recorded in an embedded
file's meta table and in an OpenSearch index's ``_meta``) is refused with the reindex
advice, as an index of another keyword analysis is (``RecordsMismatchError``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from knowledge.core.errors import ValidationError

__all__ = [
    "FORMAT",
    "MANUAL",
    "MAX_URL_LENGTH",
    "ORIGIN",
    "ORIGINS",
    "RECORDS",
    "RENAMED_SOURCE_TYPE",
    "REPO",
    "SHARED",
    "SIDECAR_ORIGINS",
    "SOURCE_TYPE",
    "UPLOAD",
    "URL",
    "check_origins",
    "check_sidecar_origin",
    "check_url",
    "parse_origin",
]

ORIGIN: Final = "origin"
FORMAT: Final = "format"
URL: Final = "url"
SOURCE_TYPE: Final = "source_type"
"""The old name of ``format``; also the ``KnowledgeSearch`` tool's argument for the origin
(the design's name for it)."""

UPLOAD: Final = "upload"
REPO: Final = "repo"
MANUAL: Final = "manual"
SHARED: Final = "shared"
ORIGINS: Final = (UPLOAD, REPO, MANUAL, SHARED)
SIDECAR_ORIGINS: Final = (UPLOAD, REPO, MANUAL)
"""What a metadata sidecar may say: ``shared`` is the built-in library's alone."""

MAX_URL_LENGTH: Final = 2048

RECORDS: Final = "origin-format-v1"
"""The record fields an index holds (``origin``, ``format``); an index that records
another value (or none: written before) is refused with the reindex advice."""

RENAMED_SOURCE_TYPE: Final = (
    "is no longer a field: use 'format' for the file format (markdown, pdf, ...) or "
    "'origin' for where the document came from (" + ", ".join(ORIGINS) + ")"
)


def parse_origin(value: object, field: str = ORIGIN, allowed: Iterable[str] = ORIGINS) -> str:
    """``value`` as an origin of ``allowed``; ``ValidationError`` naming ``field`` and the
    allowed values otherwise (case and surrounding blanks are forgiven)."""
    choices = tuple(allowed)
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    raise ValidationError(field, f"{value!r} is not one of: {', '.join(choices)}")


def check_origins(values: Iterable[object], field: str) -> None:
    """Refuse a filter value that is no origin: it would match nothing, silently."""
    for value in values:
        if not isinstance(value, str) or value not in ORIGINS:
            raise ValidationError(
                field, f"{value!r} is not an origin (one of: {', '.join(ORIGINS)})"
            )


def check_sidecar_origin(value: object, field: str) -> str:
    """A sidecar's ``origin``: one a writer may set (``SIDECAR_ORIGINS``)."""
    return parse_origin(value, field, SIDECAR_ORIGINS)


def check_url(value: object, field: str) -> str:
    """A sidecar's ``url``: an absolute ``http``/``https`` URL with a host (a page links
    it, so ``javascript:`` and the like are refused), at most ``MAX_URL_LENGTH``."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(field, "must be an absolute http or https URL")
    url = value.strip()
    if len(url) > MAX_URL_LENGTH:
        raise ValidationError(field, f"must be at most {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ValidationError(field, "must be an absolute http or https URL") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValidationError(field, "must be an absolute http or https URL")
    if any(ch.isspace() or ord(ch) < 0x20 for ch in url):
        raise ValidationError(field, "must not contain blanks or control characters")
    return url
