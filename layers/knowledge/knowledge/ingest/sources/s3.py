"""Documents in an S3 bucket laid out as ``<agent>/<context>/<path>``: the deployed source.

``S3DocumentSource(bucket)`` serves both ways documents are indexed in AWS, so they
share one path:

- ``documents(scope, options)`` lists the scope's prefix (paginated), like
  ``knowledge.ingest.sources.folders.BucketFolderSource`` lists a folder: sorted by path,
  ``options.file_patterns`` and ``options.recursive`` applied, hidden files (a segment
  starting with ``.``) and folder placeholders left out, and each document's sidecar
  ``<path>.metadata.json`` read into its ``metadata`` (an invalid sidecar is listed in
  ``Listing.errors`` and its document is indexed without metadata);
- ``get_document(scope, path)`` looks one document up for an event: ``None`` when the
  object does not exist (any more), which the indexer turns into a delete. Its
  ``revision`` is the object's ETag (looked up before ``read()``, which can only read
  that or a newer object) and its sidecar's; ``revision(scope, path)`` is the same pair
  as it is now, which the indexer compares after its write. An object stored by a
  presigned upload (``knowledge.core.source.UPLOAD_MARKER`` in its user metadata) is
  indexed without a sidecar that is no newer than it: that one was left by an earlier
  note of the path, not written for the upload;
- ``object_keys(scope)`` lists every document key of the scope; ``object_page`` lists one
  page of it from a continuation token, and ``objects_after`` the scope's objects whose
  path sorts after a given one (both for a scope reindex, ``knowledge.aws.reindex_queue``).

An object (or its sidecar) in an archive storage class (Glacier Flexible Retrieval, Deep
Archive, an Intelligent-Tiering archive tier) is listed and looked up like any other;
``read()`` raises ``ArchivedObjectError`` for it, which the indexer reports as a problem,
not a failure to retry.

Bytes are read only by ``SourceDocument.read()``. ``boto3`` is imported when the first
client is created, not at import. A missing object is ``None`` (or ``NotFoundError``
from ``read()``); access problems (403, missing bucket) are ``ConfigurationError`` naming
the permission; other S3 errors propagate, so the caller retries them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from knowledge.core.errors import (
    ArchivedObjectError,
    ConfigurationError,
    KnowledgeError,
    NotFoundError,
    ValidationError,
)
from knowledge.core.model import FileProblem, IndexOptions
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import (
    SIDECAR_SUFFIX,
    SYNONYMS_FILE,
    UPLOAD_MARKER,
    SourceDocument,
    is_document_path,
)
from knowledge.ingest.sources import Listing, MetadataValue, SynonymsFile, parse_metadata_sidecar
from knowledge.ranking.synonym_expansion import MAX_SYNONYMS_BYTES

__all__ = ["S3DocumentSource", "S3Object"]

logger = logging.getLogger(__name__)

_NOT_FOUND_CODES = frozenset({"404", "NoSuchKey", "NotFound"})
_CHANGED_CODES = frozenset({"412", "PreconditionFailed"})
_ARCHIVED_CODE = "InvalidObjectState"
_ACCESS_CODES = frozenset(
    {"403", "AccessDenied", "AllAccessDisabled", "NoSuchBucket", "InvalidAccessKeyId"}
)


@dataclass(frozen=True, slots=True)
class S3Object:
    """One listed object: its full key, its scope-relative path, size and ETag."""

    key: str
    path: str
    size: int
    etag: str = ""


def _error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return str(code) if code is not None else None


def _etag(response: dict[str, Any]) -> str:
    return str(response.get("ETag") or "")


def _revision(etag: str, sidecar_etag: str | None) -> str:
    return f"{etag} {sidecar_etag or '-'}"


def _archived_reason(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    error = response.get("Error", {}) if isinstance(response, dict) else {}
    storage = error.get("StorageClass") or error.get("AccessTier") or "an archive"
    return (
        f"archived (S3 storage class {storage}): not readable until it is restored; it is "
        "indexed when a restore completes (ObjectRestore:Completed) or by a reindex after it"
    )


def _unreadable(error: KnowledgeError) -> Callable[[], bytes]:
    def read() -> bytes:
        raise error

    return read


def _left_before_upload(head: dict[str, Any], sidecar_modified: Any) -> bool:
    """True if the object ``head`` describes came by a presigned upload and the sidecar
    (modified at ``sidecar_modified``) is no newer: a note's, left from before (module
    docstring). S3's own clock stamps both; one unknown keeps the sidecar."""
    name, value = UPLOAD_MARKER
    metadata = head.get("Metadata") or {}
    modified = head.get("LastModified")
    if metadata.get(name) != value or modified is None or sidecar_modified is None:
        return False
    return bool(sidecar_modified <= modified)


def _is_hidden_or_invalid(path: str) -> str | None:
    segments = path.split("/")
    if any(segment.startswith(".") for segment in segments if segment):
        return "hidden"
    if any(segment == "" for segment in segments):
        return "empty path segment"
    return None


class S3DocumentSource:
    """The documents of a bucket whose keys are ``<agent>/<context>/<path>``.

    ``client`` is an S3 client (default: a boto3 client created on first use). The
    source never writes to the bucket.
    """

    def __init__(self, bucket: str, client: Any | None = None) -> None:
        if not isinstance(bucket, str) or not bucket.strip():
            raise ConfigurationError("documents bucket: must be a bucket name (DOCUMENTS_BUCKET)")
        self._bucket = bucket.strip()
        self._client = client

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def client(self) -> Any:
        if self._client is None:
            from knowledge.core.aws_clients import bounded_client  # boto3 when first used

            self._client = bounded_client("s3")
        return self._client

    @staticmethod
    def prefix(scope: KnowledgeScope) -> str:
        """The key prefix of the scope: ``<agent>/<context>/``."""
        return scope.key + "/"

    def _access_error(self, exc: BaseException, what: str) -> ConfigurationError:
        code = _error_code(exc)
        return ConfigurationError(
            f"s3://{self._bucket}: cannot {what} ({code}); the function needs s3:ListBucket on "
            "the bucket and s3:GetObject on its objects"
        )

    # --- listing ----------------------------------------------------------------------------

    def _list(
        self, scope: KnowledgeScope, *, recursive: bool = True, **extra: Any
    ) -> Iterator[S3Object]:
        prefix = self.prefix(scope)
        arguments: dict[str, Any] = {"Bucket": self._bucket, "Prefix": prefix, **extra}
        if not recursive:
            arguments["Delimiter"] = "/"
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(**arguments):
                for item in page.get("Contents", ()):
                    key = item["Key"]
                    yield S3Object(
                        key=key,
                        path=key[len(prefix) :],
                        size=int(item.get("Size", 0)),
                        etag=_etag(item),
                    )
        except Exception as exc:
            if _error_code(exc) in _ACCESS_CODES:
                raise self._access_error(exc, f"list {prefix}") from exc
            raise

    @staticmethod
    def is_document(item: S3Object) -> bool:
        """True for a document object: not a folder placeholder, hidden file or sidecar."""
        if not item.path or item.path.endswith(SIDECAR_SUFFIX):
            return False
        return _is_hidden_or_invalid(item.path) is None

    def object_keys(self, scope: KnowledgeScope) -> Iterator[S3Object]:
        """Every document object of the scope (no folder placeholders, hidden files or
        sidecars), in the bucket's order. Patterns are not applied."""
        return (item for item in self._list(scope) if self.is_document(item))

    def object_page(
        self, scope: KnowledgeScope, continuation: str | None = None, *, max_keys: int = 1000
    ) -> tuple[list[S3Object], str | None]:
        """One page (at most ``max_keys``) of the scope's objects, every kind, in the
        bucket's order, from ``continuation`` (``None``: the start); and the token of the
        next page (``None``: this was the last)."""
        prefix = self.prefix(scope)
        arguments: dict[str, Any] = {"Bucket": self._bucket, "Prefix": prefix, "MaxKeys": max_keys}
        if continuation is not None:
            arguments["ContinuationToken"] = continuation
        try:
            page = self.client.list_objects_v2(**arguments)
        except Exception as exc:
            if _error_code(exc) in _ACCESS_CODES:
                raise self._access_error(exc, f"list {prefix}") from exc
            raise
        items = [
            S3Object(
                key=item["Key"],
                path=item["Key"][len(prefix) :],
                size=int(item["Size"]),
                etag=_etag(item),
            )
            for item in page.get("Contents", ())
        ]
        token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
        return items, token

    def objects_after(self, scope: KnowledgeScope, path: str | None) -> Iterator[S3Object]:
        """The scope's objects (every kind) whose path sorts after ``path`` (``None``: all),
        in the bucket's order: UTF-8 byte order, which is Python's order of ``str``."""
        arguments: dict[str, Any] = {}
        if path is not None:
            arguments["StartAfter"] = self.prefix(scope) + path
        return self._list(scope, **arguments)

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Listing[SourceDocument]:
        """The scope's documents that match ``options``, sorted by path (module docstring)."""

        def produce(listing: Listing[SourceDocument]) -> Iterator[SourceDocument]:
            found: dict[str, S3Object] = {}
            for item in self._list(scope, recursive=options.recursive):
                if not item.path or item.path.endswith("/"):
                    continue
                problem = _is_hidden_or_invalid(item.path)
                if problem == "hidden":
                    continue
                if problem is not None:
                    listing.skipped.append(
                        FileProblem(item.key, f"not a valid document key ({problem})")
                    )
                    continue
                found[item.path] = item
            synonyms = found.get(SYNONYMS_FILE)
            listing.synonyms = self._synonyms(synonyms.key if synonyms else None, synonyms)
            for path in sorted(found):
                if path.endswith(SIDECAR_SUFFIX) or path == SYNONYMS_FILE:
                    continue
                if not is_document_path(path, options.file_patterns):
                    listing.count_unread(path)
                    continue
                item = found[path]
                metadata: dict[str, MetadataValue] = {}
                if path + SIDECAR_SUFFIX in found:
                    try:
                        metadata = self._sidecar(found[path + SIDECAR_SUFFIX].key) or {}
                    except ArchivedObjectError as exc:
                        archived = ArchivedObjectError(f"its metadata sidecar is {exc}")
                        yield replace(
                            self._document(item.key, path, item.size, {}, None, etag=item.etag),
                            read=_unreadable(archived),
                        )
                        continue
                    except ValidationError as exc:
                        listing.errors.append(
                            FileProblem(
                                path,
                                f"invalid metadata sidecar ({exc}); "
                                "the document is indexed without it",
                            )
                        )
                yield self._document(
                    item.key, path, item.size, metadata, version=None, etag=item.etag
                )

        return Listing(produce)

    # --- the synonyms file -------------------------------------------------------------------

    def synonyms_file(self, scope: KnowledgeScope) -> SynonymsFile:
        """The scope's synonyms file as it is now (``ingest.synonyms_file``; its S3 event)."""
        key = self.prefix(scope) + SYNONYMS_FILE
        head = self._head(key)
        if head is None:
            return SynonymsFile()
        size = int(head.get("ContentLength", 0))
        return self._synonyms(key, S3Object(key=key, path=SYNONYMS_FILE, size=size, etag=""))

    def _synonyms(self, key: str | None, item: S3Object | None) -> SynonymsFile:
        if key is None or item is None:
            return SynonymsFile()
        if item.size > MAX_SYNONYMS_BYTES:  # not read
            return SynonymsFile(error=f"is {item.size} bytes, at most {MAX_SYNONYMS_BYTES}")
        try:
            got = self._get_object(key)
        except KnowledgeError as exc:
            return SynonymsFile(error=f"cannot read it ({exc})")
        return SynonymsFile() if got is None else SynonymsFile(got[0])

    # --- one document -----------------------------------------------------------------------

    def get_document(
        self, scope: KnowledgeScope, path: str, *, version: str | None = None
    ) -> SourceDocument | None:
        """The document at ``path`` as it is now, or ``None`` if the object does not exist
        (deleted, or a delete marker is its latest version).

        ``version`` becomes ``SourceDocument.version`` (the event's sequencer). An invalid
        sidecar is logged and the document is returned without metadata: the document
        itself is fine, and retrying would not fix the sidecar.
        """
        key = self.prefix(scope) + path
        head = self._head(key)
        if head is None:
            return None
        etag = _etag(head)
        metadata: dict[str, MetadataValue] = {}
        try:
            sidecar = self._get_object(key + SIDECAR_SUFFIX)
        except ArchivedObjectError as exc:
            # Its metadata cannot be read until restored: the document is a problem like an
            # archived object (``read()`` says why), not one indexed without its metadata.
            size = int(head.get("ContentLength", 0))
            return replace(
                self._document(key, path, size, {}, version, etag=etag),
                read=_unreadable(ArchivedObjectError(f"its metadata sidecar is {exc}")),
            )
        if sidecar is not None and _left_before_upload(head, sidecar[2]):
            logger.info(
                "a sidecar older than its uploaded document is ignored",
                extra={"key": key + SIDECAR_SUFFIX},
            )
        elif sidecar is not None:
            try:
                metadata = parse_metadata_sidecar(sidecar[0])
            except ValidationError as exc:
                logger.warning(
                    "invalid metadata sidecar; indexing the document without it",
                    extra={"key": key + SIDECAR_SUFFIX, "reason": str(exc)},
                )
        size = int(head.get("ContentLength", 0))
        document = self._document(key, path, size, metadata, version, etag=etag)
        revision = _revision(etag, None if sidecar is None else sidecar[1])
        return replace(document, revision=revision)

    def revision(self, scope: KnowledgeScope, path: str) -> str | None:
        """The ``SourceDocument.revision`` the document at ``path`` has now (its ETag and
        its sidecar's), or ``None`` if the object does not exist."""
        key = self.prefix(scope) + path
        head = self._head(key)
        if head is None:
            return None
        sidecar = self._head(key + SIDECAR_SUFFIX)
        return _revision(_etag(head), None if sidecar is None else _etag(sidecar))

    def exists(self, scope: KnowledgeScope, path: str) -> bool:
        """True if the object at ``path`` exists now (its latest version is not a delete)."""
        return self._head(self.prefix(scope) + path) is not None

    def _head(self, key: str) -> dict[str, Any] | None:
        try:
            response: dict[str, Any] = self.client.head_object(Bucket=self._bucket, Key=key)
        except Exception as exc:
            self._raise_unless_missing(exc, key)
            return None
        return response

    def _raise_unless_missing(self, exc: Exception, key: str) -> None:
        """Return if ``exc`` says the object does not exist; otherwise raise (access
        errors as a clear ``KnowledgeError``, anything else as it is)."""
        code = _error_code(exc)
        if code in _NOT_FOUND_CODES:
            return
        if code in _ACCESS_CODES:
            raise self._access_error(exc, f"read {key}") from exc
        raise exc

    def _get(self, key: str) -> bytes | None:
        found = self._get_object(key)
        return None if found is None else found[0]

    def _get_object(self, key: str, *, etag: str = "") -> tuple[bytes, str, Any] | None:
        """The object's bytes, ETag and ``LastModified`` (``None``: it does not exist).
        With ``etag``, only that version: a ``KnowledgeError`` if the object has changed
        since."""
        arguments = {"Bucket": self._bucket, "Key": key}
        if etag:
            arguments["IfMatch"] = etag
        try:
            response = self.client.get_object(**arguments)
        except Exception as exc:
            if etag and _error_code(exc) in _CHANGED_CODES:
                raise KnowledgeError(
                    "the object changed after it was listed; its new version is read again"
                ) from None
            if _error_code(exc) == _ARCHIVED_CODE:
                raise ArchivedObjectError(_archived_reason(exc)) from None
            self._raise_unless_missing(exc, key)
            return None
        body = response["Body"]
        try:
            data: bytes = body.read()
        finally:
            body.close()
        return data, _etag(response), response.get("LastModified")

    def _sidecar(self, key: str) -> dict[str, MetadataValue] | None:
        data = self._get(key)
        return None if data is None else parse_metadata_sidecar(data)

    def _reader(self, key: str, etag: str) -> Callable[[], bytes]:
        # Only the version whose size was checked (``IfMatch``): an object replaced by a
        # bigger one meanwhile is never read whole (the memory bound of the size limit).
        def read() -> bytes:
            found = self._get_object(key, etag=etag)
            data = None if found is None else found[0]
            if data is None:
                raise NotFoundError(f"s3://{self._bucket}/{key} no longer exists")
            return data

        return read

    def _document(
        self,
        key: str,
        path: str,
        size: int,
        metadata: dict[str, MetadataValue],
        version: str | None,
        *,
        etag: str = "",
    ) -> SourceDocument:
        return SourceDocument(
            path=path,
            size=size,
            read=self._reader(key, etag),
            version=version,
            metadata=metadata,
            source_key=key,
        )
