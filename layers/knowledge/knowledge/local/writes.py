"""``kb serve --allow-writes``: the write routes store into the served folder.

A write lands at ``ROOT/<agent>/<context>/<path>`` (the sidecar next to it) and the
folder watcher indexes it as it indexes any edit, so the earlier version stays searchable
until the new one is committed. Each file is written to a hidden temporary file in the
same folder (hidden files are never listed) and renamed over the old one, so the watcher
never reads half a file. Nothing is written outside the scope's folder: the path is
checked (``knowledge.ingest.writes.check_write_path``), no segment may be a link, and the
resolved folder must lie inside the scope's. There is no presigned upload locally: a
``PUT`` takes the file (``MAX_DOCUMENT_BYTES``).

Writes are serialised (one lock per storage; the server's request threads share it): a
write is two renames, the sidecar's then the document's, and two writers of one path
interleaved would leave the document of one beside the sidecar of the other, whose
``content_hash`` then matches neither answer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from pathlib import Path
from typing import Any

from knowledge.core.errors import ValidationError
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SIDECAR_SUFFIX
from knowledge.ingest.sources.local import replace_file
from knowledge.ingest.writes import MAX_DOCUMENT_BYTES, check_write_path

__all__ = ["FolderStorage"]


_SUFFIX = len(SIDECAR_SUFFIX.encode("utf-8"))


def _name_max(folder: Path) -> int:
    """The longest file name, in bytes, the folder's file system takes (255 on most)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


class FolderStorage:
    """The ``DocumentStorage`` of a folder laid out as ``<agent>/<context>/<path>``."""

    def __init__(self, root: str | Path) -> None:
        self._root = Path(root).resolve()
        self._lock = threading.Lock()

    @property
    def max_upload_bytes(self) -> int:
        return MAX_DOCUMENT_BYTES  # no uploads here: a PUT takes the file

    def _target(self, scope: KnowledgeScope, path: str, *, create: bool) -> Path:
        check_write_path(path)
        scope_dir = self._root / scope.agent / scope.context
        longest = _name_max(self._root)
        *folders, name = path.split("/")
        for segment, limit in (*((f, longest) for f in folders), (name, longest - _SUFFIX)):
            size = len(segment.encode("utf-8"))
            if size > limit:
                raise ValidationError(
                    "path",
                    f"'{segment[:40]}...' is {size} bytes of UTF-8, over the {limit} a name "
                    f"may have here (the file system's {longest}, less '{SIDECAR_SUFFIX}' "
                    "for a document's sidecar)",
                )
        parts = (scope.agent, scope.context, *path.split("/"))
        current = self._root
        for depth, part in enumerate(parts, start=1):
            current = current / part
            if current.is_symlink():
                raise ValidationError("path", "passes through a link; write a real folder")
            if depth < len(parts) and current.exists() and not current.is_dir():
                shown = "/".join(parts[2:depth]) or "the scope"
                raise ValidationError("path", f"'{shown[:200]}' is a file, not a folder")
        target = scope_dir.joinpath(*path.split("/"))
        if target.is_dir():
            raise ValidationError("path", "is a folder, not a document")
        if create:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):  # a file appeared on the way
                raise ValidationError("path", "a part of it is a file, not a folder") from None
        real_scope = scope_dir.resolve()
        real_parent = target.parent.resolve()
        if real_parent != real_scope and real_scope not in real_parent.parents:
            raise ValidationError("path", "is outside the scope's folder")
        return target

    def put(self, scope: KnowledgeScope, path: str, data: bytes, sidecar: bytes) -> None:
        with self._lock:
            try:
                target = self._target(scope, path, create=True)
                sidecar_path = target.with_name(target.name + SIDECAR_SUFFIX)
                replace_file(sidecar_path, sidecar, prefix=".kb-write-")
                replace_file(target, data, prefix=".kb-write-")
            except OSError as exc:
                if exc.errno != errno.ENAMETOOLONG:
                    raise
                raise ValidationError("path", "is too long for this file system") from None

    def delete(self, scope: KnowledgeScope, path: str) -> bool:
        with self._lock:
            return self._delete(scope, path)

    def _delete(self, scope: KnowledgeScope, path: str) -> bool:
        try:
            target = self._target(scope, path, create=False)
        except ValidationError:
            return False  # through a file, or a folder: no document of that name (404)
        existed = target.is_file()
        # The document first: its removal is what counts; then its sidecar, also an orphan.
        for name in (target.name, target.name + SIDECAR_SUFFIX):
            if target.with_name(name).is_file():
                with contextlib.suppress(FileNotFoundError):
                    target.with_name(name).unlink()
        return existed

    def presign_upload(
        self, scope: KnowledgeScope, path: str, max_bytes: int, expires_in: int
    ) -> dict[str, Any]:
        raise ValidationError(
            "uploads",
            f"kb serve has no presigned uploads; PUT the file to .../documents/{{path}} "
            f"(at most {MAX_DOCUMENT_BYTES} bytes) or copy it into the folder",
        )
