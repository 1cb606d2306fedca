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
  ``docx``, ...; ``knowledge.extraction``).
- ``source_type`` (``SOURCE_TYPE``) is the design's name for the origin: a filter, a
  ``metadata`` filter or a tool argument may say it instead of ``origin`` and means the
  same (``origin_alias``), and every hit a front end shows carries both names. Its
  values are origins, never formats: ``source_type: pdf`` is refused with a pointer to
  ``format`` rather than silently matched against nothing.
- ``url`` (``URL``): where a person can open the document, when its source has one (a
  sidecar ``url``: an absolute ``http``/``https`` URL; a plain bucket file has none).

An index written before records carried these (``RECORDS``, recorded in an embedded
file's meta table and in an OpenSearch index's ``_meta``) is refused with the reindex
advice, as an index of another keyword analysis is (``RecordsMismatchError``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
    "REPO",
    "SHARED",
    "SIDECAR_ORIGINS",
    "SOURCE_TYPE",
    "UPLOAD",
    "URL",
    "check_origins",
    "check_sidecar_origin",
    "check_url",
    "origin_alias",
    "parse_origin",
]

ORIGIN: Final = "origin"
FORMAT: Final = "format"
URL: Final = "url"
SOURCE_TYPE: Final = "source_type"
"""The design's name for the origin: accepted wherever ``origin`` filters (``origin_alias``,
the filter language, the ``KnowledgeSearch`` tool's argument) and shown beside it on hits."""

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

_FORMAT_HINT: Final = (
    "; source_type is where a document came from, its file format (markdown, pdf, ...) "
    "is the field 'format'"
)


def parse_origin(value: object, field: str = ORIGIN, allowed: Iterable[str] = ORIGINS) -> str:
    """``value`` as an origin of ``allowed``; ``ValidationError`` naming ``field`` and the
    allowed values otherwise (case and surrounding blanks are forgiven)."""
    choices = tuple(allowed)
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    raise ValidationError(field, f"{value!r} is not one of: {', '.join(choices)}")


def check_origins(values: Iterable[object], field: str, *, named: str = ORIGIN) -> None:
    """Refuse a filter value that is no origin: it would match nothing, silently. ``named``:
    the key the caller wrote (``source_type`` adds where the file format is filtered, the
    likelier meaning of ``source_type: pdf``)."""
    for value in values:
        if not isinstance(value, str) or value not in ORIGINS:
            hint = _FORMAT_HINT if named == SOURCE_TYPE else ""
            raise ValidationError(
                field, f"{value!r} is not an origin (one of: {', '.join(ORIGINS)}){hint}"
            )


def origin_alias(metadata: Mapping[str, str], field: str = "metadata") -> Mapping[str, str]:
    """Exact-match ``metadata`` filters with ``source_type`` said as ``origin`` (one key, so
    every store filters the one field). Both keys with different values is a
    ``ValidationError`` at ``<field>.source_type`` naming both; the same value twice is
    one filter. A mapping without ``source_type`` comes back as it is."""
    if SOURCE_TYPE not in metadata:
        return metadata
    value = metadata[SOURCE_TYPE]
    if ORIGIN in metadata and metadata[ORIGIN] != value:
        raise ValidationError(
            f"{field}.{SOURCE_TYPE}",
            f"and {field}.{ORIGIN} name the same field (source_type is the design's name "
            f"for the origin) with different values ({value!r}, {metadata[ORIGIN]!r}): "
            "give one of them",
        )
    check_origins((value,), f"{field}.{SOURCE_TYPE}", named=SOURCE_TYPE)
    resolved = {k: v for k, v in metadata.items() if k != SOURCE_TYPE}
    resolved[ORIGIN] = value
    return resolved


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
