"""Document sources and what they share: listings that report problems, metadata sidecars.

A source's ``documents()`` may return a ``Listing``: an iterator of documents that
also collects, while it is iterated, the files it deliberately left out
(``skipped``: a symbolic link out of the folder, a file name that is not UTF-8) and
the files that are wrong (``errors``: a sidecar that is not valid JSON). The lists
are complete once the iterator is exhausted; ``knowledge.ingest.pipeline`` copies them into
the ``IndexResult``. A listing problem never stops the listing.

Sidecars: ``<path>.metadata.json`` next to a document, in Amazon Bedrock's form
(``{"metadataAttributes": {...}}``), parsed by ``parse_metadata_sidecar``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from knowledge.core.errors import ValidationError
from knowledge.core.model import FileProblem, unread_extension
from knowledge.core.origin import ORIGIN, URL, check_sidecar_origin, check_url
from knowledge.core.scope_set import SHARED_CONTEXT_KEY

__all__ = [
    "CANNOT_LIST",
    "MAX_SIDECAR_BYTES",
    "Listing",
    "MetadataValue",
    "SynonymsFile",
    "parse_metadata_sidecar",
    "under_unlisted_folder",
]

T = TypeVar("T")

MetadataValue = str | list[str]

MAX_SIDECAR_BYTES = 1024 * 1024

CANNOT_LIST = "cannot list"
"""How the reason of an ``errors`` entry for a folder the source could not list (permission
denied, an I/O error on a share) begins; its path is the scope-relative folder with a
trailing ``/``, or ``.`` for the scope's own folder."""


def under_unlisted_folder(problems: list[FileProblem]) -> Callable[[str], bool]:
    """Whether a document path lies in a folder that ``problems`` (a listing's ``errors``)
    say could not be listed: what such a folder holds is unknown, not gone, so a sync
    must not delete it."""
    folders = [p.path for p in problems if p.reason.startswith(CANNOT_LIST)]
    if "." in folders:
        return lambda path: True
    prefixes = tuple(folder.rstrip("/") + "/" for folder in folders)
    return lambda path: path.startswith(prefixes) if prefixes else False


@dataclass(frozen=True, slots=True)
class SynonymsFile:
    """What a listing found of the scope's synonyms file (``core.source.SYNONYMS_FILE``):
    its bytes (``None``: the scope has none), or why it could not be read."""

    data: bytes | None = None
    error: str | None = None


class Listing(Generic[T]):
    """An iterator of listed items plus the problems met while listing them.

    ``produce`` receives the listing itself and returns the item iterator; it appends
    to ``skipped`` and ``errors`` and counts the files no pattern selects in ``unread``
    (by extension: ``IndexStatus.unread_files``) as it goes (lazily: nothing runs before the first
    ``next()``), and sets ``synonyms`` to what it found of the scope's synonyms file.
    """

    def __init__(self, produce: Callable[[Listing[T]], Iterator[T]]) -> None:
        self.skipped: list[FileProblem] = []
        self.errors: list[FileProblem] = []
        self.unread: Counter[str] = Counter()
        # None: this listing does not look for a synonyms file (else what it found).
        self.synonyms: SynonymsFile | None = None
        self._items = produce(self)

    def count_unread(self, path: str) -> None:
        """Count a file no pattern selects under its extension (``unread_extension``)."""
        self.unread[unread_extension(path)] += 1

    def __iter__(self) -> Listing[T]:
        return self

    def __next__(self) -> T:
        return next(self._items)


def _scalar_text(field: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        # 3.0 -> "3": a NUMBER attribute written as 3 or 3.0 filters the same.
        return str(int(value)) if value.is_integer() else repr(value)
    raise ValidationError(
        field, f"must be a string, number, boolean or list of those, got {value!r}"
    )


def _typed_value(field: str, value: Mapping[str, Any]) -> MetadataValue:
    """Bedrock's typed form: ``{"type": "STRING", "stringValue": "..."}`` and friends."""
    kind = value.get("type")
    keys = {
        "STRING": "stringValue",
        "NUMBER": "numberValue",
        "BOOLEAN": "booleanValue",
        "STRING_LIST": "stringListValue",
    }
    if kind not in keys or keys[kind] not in value:
        raise ValidationError(
            field, "a typed value needs 'type' (STRING, NUMBER, BOOLEAN, STRING_LIST) and its value"
        )
    raw = value[keys[kind]]
    if kind == "STRING_LIST":
        if not isinstance(raw, list):
            raise ValidationError(field, "stringListValue must be a list")
        return [_scalar_text(field, item) for item in raw]
    return _scalar_text(field, raw)


def parse_metadata_sidecar(data: bytes) -> dict[str, MetadataValue]:
    """Parse a ``<path>.metadata.json`` sidecar into user metadata.

    Accepts ``{"metadataAttributes": {"key": value}}`` where a value is a string,
    number, boolean, list of those, or Bedrock's typed form
    ``{"value": {"type": ..., "stringValue": ...}, "includeForEmbedding": ...}``.
    Scalars become strings (booleans ``"true"``/``"false"``), lists lists of strings.
    ``origin`` must be one a writer may set (``knowledge.core.origin.SIDECAR_ORIGINS``:
    ``upload``, ``repo``, ``manual``; never ``shared``) and ``url`` an absolute http(s)
    URL; ``shared_library`` is never a sidecar's (it names the library of a shared hit,
    set by the search alone: ``knowledge.core.scope_set``). Raises ``ValidationError``
    naming the attribute when the sidecar is not of that form.
    """
    if len(data) > MAX_SIDECAR_BYTES:
        raise ValidationError("sidecar", f"is larger than {MAX_SIDECAR_BYTES} bytes")
    try:
        document = json.loads(data.decode("utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON, or an integer over Python's 4,300 digits
        raise ValidationError("sidecar", f"is not valid UTF-8 JSON ({str(exc)[:200]})") from exc
    except RecursionError:
        raise ValidationError("sidecar", "is not valid JSON here: nested too deeply") from None
    if not isinstance(document, dict) or not isinstance(document.get("metadataAttributes"), dict):
        raise ValidationError("metadataAttributes", "the sidecar must be an object with this key")
    metadata: dict[str, MetadataValue] = {}
    for key, value in document["metadataAttributes"].items():
        field = f"metadataAttributes.{key}"
        if not key.strip():
            raise ValidationError("metadataAttributes", "attribute names must not be blank")
        if key == SHARED_CONTEXT_KEY:
            raise ValidationError(
                field, "is set by the search for a shared library's hits, never by a sidecar"
            )
        if isinstance(value, dict) and isinstance(value.get("value"), dict):
            metadata[key] = _typed_value(field, value["value"])
        elif isinstance(value, list):
            metadata[key] = [_scalar_text(field, item) for item in value]
        else:
            metadata[key] = _scalar_text(field, value)
    # The keys a sidecar may set about the document itself (knowledge.core.origin): checked
    # here, so a wrong one is the sidecar's listed problem, never a silent origin.
    if ORIGIN in metadata:
        metadata[ORIGIN] = check_sidecar_origin(metadata[ORIGIN], f"metadataAttributes.{ORIGIN}")
    if URL in metadata:
        metadata[URL] = check_url(metadata[URL], f"metadataAttributes.{URL}")
    return metadata
