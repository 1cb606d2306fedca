"""``kb serve --allow-writes``: the write routes store into the served folder.

A write lands at ``ROOT/<agent>/<context>/<path>`` (the sidecar next to it) and the
folder watcher indexes it as it indexes any edit, so the earlier version stays searchable
until the new one is committed. Each file is written to a hidden temporary file in the
same folder (hidden files are never listed) and renamed over the old one, so the watcher
never reads half a file. Nothing is written outside the scope's folder: the path is
checked (``knowledge.ingest.api_writes.check_write_path``), no segment may be a link, and the
resolved folder must lie inside the scope's. There is no presigned upload locally: a
``PUT`` takes the file, up to ``knowledge.ingest.api_writes.put_limit`` of the server's
``IndexOptions.max_document_bytes``.

Writes are serialised (one lock per storage; the server's request threads share it): a
write is two renames, the sidecar's then the document's, and two writers of one path
interleaved would leave the document of one beside the sidecar of the other, whose
``content_hash`` then matches neither answer.

The local server has no authentication: whoever reaches its address can call every
route. So ``--allow-writes`` on an address other than loopback is refused at start-up
(``check_write_exposure``) unless ``--allow-remote-writes`` says the caller means it
(a firewall, a private network or a proxy with its own authentication in front).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import threading
from pathlib import Path
from typing import Any

from knowledge.core.errors import ConfigurationError, ValidationError
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SIDECAR_SUFFIX
from knowledge.extraction import DEFAULT_MAX_DOCUMENT_BYTES
from knowledge.ingest.api_writes import check_write_path, put_limit
from knowledge.ingest.sources.folders import replace_file

__all__ = ["FolderStorage", "check_write_exposure", "is_loopback_host"]


def is_loopback_host(host: str) -> bool:
    """``host`` listens on this machine only: ``localhost`` or a loopback address
    (``127.0.0.0/8``, ``::1``). Any other name or address (``0.0.0.0``, ``::``, a LAN
    address, a host name that could resolve elsewhere) is not."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_write_exposure(host: str, *, allow_writes: bool, allow_remote_writes: bool) -> None:
    """Refuse to open the write routes with no authentication on an address others can
    reach (module docstring): a ``ConfigurationError`` naming the fix."""
    if allow_writes and not allow_remote_writes and not is_loopback_host(host):
        raise ConfigurationError(
            f"--allow-writes on --host {host}: the local server has no authentication, so "
            "anyone who can reach that address could write and delete documents. Serve "
            "writes on 127.0.0.1 (the default), or add --allow-remote-writes if something "
            "else (a firewall, a private network, an authenticating proxy) guards it"
        )


_SUFFIX = len(SIDECAR_SUFFIX.encode("utf-8"))


def _name_max(folder: Path) -> int:
    """The longest file name, in bytes, the folder's file system takes (255 on most)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


class FolderStorage:
    """The ``DocumentStorage`` of a folder laid out as ``<agent>/<context>/<path>``."""

    def __init__(
        self, root: str | Path, *, max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES
    ) -> None:
        self._root = Path(root).resolve()
        self._lock = threading.Lock()
        self._max_document_bytes = max_document_bytes

    @property
    def max_upload_bytes(self) -> int:
        """The served folder's indexer limit (``IndexOptions.max_document_bytes`` of
        ``kb serve``): there are no uploads here, but a PUT is bounded by it too."""
        return self._max_document_bytes

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
                if sidecar_path.is_dir() and not sidecar_path.is_symlink():
                    # A folder made beside the API: no file can replace it, so every write
                    # of the document would fail. Checked before anything is written.
                    raise ValidationError(
                        "path",
                        f"'{sidecar_path.name[:200]}' is a folder where the document's "
                        "metadata sidecar goes; move or rename that folder first",
                    )
                replace_file(sidecar_path, sidecar, prefix=".kb-write-")
                replace_file(target, data, prefix=".kb-write-")
            except IsADirectoryError:  # a folder made there while the write ran
                raise ValidationError(
                    "path", "a folder took the place of the document or its sidecar"
                ) from None
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
            f"(at most {put_limit(self.max_upload_bytes)} bytes) or copy it into the folder",
        )
