"""The write routes on AWS: a write is an S3 put or delete in the documents bucket.

The bucket stays the single source of truth: the object's event goes through the
pipeline that indexes any upload (S3 -> SQS -> indexer), so a write is searchable once
the indexer has committed it, and until then the earlier version is the one searched
(the stores switch generations on commit). The sidecar is written before the document
and deleted after it, so the document's own event is the last one on a put and the first
on a delete: the indexer never indexes a new document under an old sidecar's origin for
long, and a delete never re-reads a document through its sidecar's event.

Large files: ``presign_upload`` answers a presigned **POST** (``generate_presigned_post``),
not a presigned PUT: a presigned PUT signs the request but cannot bound its body's size
(``Content-Length`` may only be fixed to one exact value), while a POST policy carries
conditions S3 enforces: the exact ``key`` (one document inside the scope), a
``content-length-range`` (1 to the requested size), the policy's expiry, and the user
metadata ``x-amz-meta-kb-upload: 1`` (``knowledge.core.source.UPLOAD_MARKER``). An upload
writes no sidecar (that would take ``s3:PutObject`` on the sidecar at grant time, before
anything is uploaded, and change an existing note's metadata for an upload that may never
come); the marker lets the indexer ignore the sidecar an earlier note of the path left,
so the upload is indexed as an ``upload``, not with the note's ``manual`` origin.
"""

from __future__ import annotations

from typing import Any

from knowledge.core.errors import StoreUnavailableError, ValidationError
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SIDECAR_SUFFIX, UPLOAD_MARKER
from knowledge.ingest.api_writes import MAX_UPLOAD_BYTES, check_write_path

__all__ = ["MAX_KEY_BYTES", "S3Storage"]

MAX_KEY_BYTES = 1024
"""S3's longest object key, in bytes of UTF-8 (a longer one is a ``KeyTooLongError``)."""


class S3Storage:
    """The ``DocumentStorage`` of the documents bucket (keys ``<agent>/<context>/<path>``)."""

    def __init__(
        self, bucket: str, client: Any | None = None, *, max_upload_bytes: int = MAX_UPLOAD_BYTES
    ) -> None:
        self._bucket = bucket
        self._client = client
        self._max_upload_bytes = max_upload_bytes

    @property
    def max_upload_bytes(self) -> int:
        """The indexer's document limit (``MAX_DOCUMENT_MIB``, as the function is given it)."""
        return self._max_upload_bytes

    @property
    def client(self) -> Any:
        if self._client is None:
            from knowledge.core.aws_clients import bounded_client  # boto3 when first used

            # SigV4 for the presigned POST (botocore signs S3 forms with SigV2 otherwise,
            # which S3 refuses in regions opened since 2014 and is deprecated everywhere).
            self._client = bounded_client("s3", signature_version="s3v4")
        return self._client

    @staticmethod
    def key(scope: KnowledgeScope, path: str, *, suffix: str = SIDECAR_SUFFIX) -> str:
        """The object key of a checked path: always under ``<agent>/<context>/``, and short
        enough for S3 (``MAX_KEY_BYTES`` of UTF-8) with ``suffix`` (the sidecar's) added."""
        key = f"{scope.key}/{check_write_path(path)}"
        size = len((key + suffix).encode("utf-8"))
        if size > MAX_KEY_BYTES:
            whose = "its sidecar's key" if suffix else "its key"
            raise ValidationError(
                "path",
                f"is too long for the bucket: {whose} would be {size} bytes of UTF-8, "
                f"over S3's {MAX_KEY_BYTES}",
            )
        return key

    def _call(self, what: str, call: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return call(**kwargs)
        except (BotoCoreError, ClientError) as exc:
            raise StoreUnavailableError(f"documents bucket: {what} failed: {exc}") from exc

    def put(self, scope: KnowledgeScope, path: str, data: bytes, sidecar: bytes) -> None:
        key = self.key(scope, path)
        self._call(
            "put",
            self.client.put_object,
            Bucket=self._bucket,
            Key=key + SIDECAR_SUFFIX,
            Body=sidecar,
            ContentType="application/json",
        )
        self._call("put", self.client.put_object, Bucket=self._bucket, Key=key, Body=data)

    def delete(self, scope: KnowledgeScope, path: str) -> bool | None:
        # No HeadObject first: it would need s3:GetObject, and a delete is idempotent. A key
        # with no room for a sidecar's (put straight into the bucket) can have none.
        key = self.key(scope, path, suffix="")
        self._call("delete", self.client.delete_object, Bucket=self._bucket, Key=key)
        sidecar = key + SIDECAR_SUFFIX
        if len(sidecar.encode("utf-8")) <= MAX_KEY_BYTES:
            self._call("delete", self.client.delete_object, Bucket=self._bucket, Key=sidecar)
        return None

    def presign_upload(
        self, scope: KnowledgeScope, path: str, max_bytes: int, expires_in: int
    ) -> dict[str, Any]:
        key = self.key(scope, path)
        name, value = UPLOAD_MARKER
        marker = {f"x-amz-meta-{name}": value}
        post = self._call(
            "presign",
            self.client.generate_presigned_post,
            Bucket=self._bucket,
            Key=key,
            Fields=marker,
            Conditions=[{"key": key}, marker, ["content-length-range", 1, max_bytes]],
            ExpiresIn=expires_in,
        )
        return {"url": post["url"], "fields": post["fields"]}
