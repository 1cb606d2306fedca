"""Where a sync writes: the local bucket folder or the S3 bucket, behind one small protocol.

Keys are bucket keys (``<agent>/<context>/_repos/<name>/<path>``, ``.kb@repos/...``).
``FolderStorage`` writes a file through a hidden temporary file in the same folder and
renames it into place, so the folder watcher never reads half a file; it removes folders
a delete left empty, up to (not including) the scope folder. ``S3Storage`` puts and
deletes objects; the bucket's event notifications then index them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

__all__ = ["FolderStorage", "ObjectStorage", "S3Storage"]


class ObjectStorage(Protocol):
    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, data: bytes) -> None: ...

    def delete(self, key: str) -> None: ...

    def keys(self, prefix: str) -> Iterator[str]: ...


class FolderStorage:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root)

    @property
    def root(self) -> Path:
        return self._root

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ValueError("invalid storage key")
        return self._root.joinpath(*parts)

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def _inside(self, folder: Path) -> None:
        """Refuse a folder that resolves outside the root (a link someone put in a
        mirror): a sync never writes through it."""
        real, root = os.path.realpath(folder), os.path.realpath(self._root)
        if os.path.commonpath([real, root]) != root:
            raise PermissionError("a folder on the way resolves outside the served folder")

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        self._inside(path.parent)  # before mkdir creates anything through a link
        path.parent.mkdir(parents=True, exist_ok=True)
        self._inside(path.parent)
        from knowledge.ingest.sources.folders import replace_file  # local only: not on AWS's path

        replace_file(path, data, prefix=".kb-sync-")

    def delete(self, key: str) -> None:
        path = self._path(key)
        self._inside(path.parent)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        # Empty folders left behind go too, but never the scope folder or above.
        parent = path.parent
        keep = len(self._root.parts) + 2
        while len(parent.parts) > keep:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent

    def keys(self, prefix: str) -> Iterator[str]:
        base = self._path(prefix.rstrip("/"))
        if not base.is_dir():
            return
        for folder, _dirs, files in os.walk(base):
            rel = Path(folder).relative_to(self._root).as_posix()
            for name in files:
                if not name.startswith(".kb-sync-"):
                    yield f"{rel}/{name}"


class S3Storage:
    def __init__(self, client: Any, bucket: str) -> None:
        self._s3 = client
        self._bucket = bucket

    def get(self, key: str) -> bytes | None:
        try:
            response = self._s3.get_object(Bucket=self._bucket, Key=key)
        except self._s3.exceptions.NoSuchKey:
            return None
        return bytes(response["Body"].read())

    def put(self, key: str, data: bytes) -> None:
        self._s3.put_object(Bucket=self._bucket, Key=key, Body=data)

    def delete(self, key: str) -> None:
        self._s3.delete_object(Bucket=self._bucket, Key=key)

    def keys(self, prefix: str) -> Iterator[str]:
        paginator = self._s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self._bucket, Prefix=prefix):
            for item in page.get("Contents", ()):
                yield item["Key"]
