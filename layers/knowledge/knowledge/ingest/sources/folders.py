"""Documents from local folders: one folder per scope, or a folder laid out like the bucket.

``LocalDirectorySource(root)``: ``root`` holds the documents of whatever scope is
indexed from it (``kb index DIR --agent A --context C``).
``BucketFolderSource(root)``: ``root/<agent>/<context>/<path>``, as in S3.

Both list files recursively (``options.recursive``) whose scope-relative ``/`` path
matches ``options.file_patterns``, sorted by path, and skip:

- hidden files and folders (any segment starting with ``.``: ``.git``, ``.DS_Store``);
- metadata sidecars (``<path>.metadata.json``): they become the document's
  ``metadata``; an invalid sidecar is listed in ``Listing.errors`` and its document
  is still listed, without metadata;
- symbolic links that resolve outside the folder of the scope (``Listing.skipped``, reason
  ``symlink outside its scope``), at any level: a scope folder or agent folder that is a
  link (it always points away from its own ``<agent>/<context>`` folder), a linked file,
  a linked folder inside the scope. Nothing outside the scope's folder is ever read, also
  when a link changes between listing and reading. Links inside it are followed; every
  real folder is walked once;
- files whose path the API could not name (``Listing.skipped``, reason ``path not
  indexed: ...``): a control character in a name, or a path longer than a document path
  may be (``knowledge.core.documents.validate_document_path``);
- anything that is not a regular file (FIFOs, sockets, devices). Reads open with
  ``O_NONBLOCK`` and check ``fstat`` first, so a FIFO swapped in after listing is refused
  at once instead of blocking the reader forever.

Read errors never carry an absolute path (they reach API callers in reindex results).

Bytes are read only by ``SourceDocument.read()``. ``version`` is ``None``: local
files have no sequencer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from knowledge.core.documents import validate_document_path
from knowledge.core.errors import InvalidScopeError, NotFoundError, ValidationError
from knowledge.core.model import FileProblem, IndexOptions
from knowledge.core.scope import KnowledgeScope, validate_segment
from knowledge.core.source import SIDECAR_SUFFIX, SYNONYMS_FILE, SourceDocument, is_document_path
from knowledge.ingest.sources import (
    CANNOT_LIST,
    MAX_SIDECAR_BYTES,
    Listing,
    MetadataValue,
    SynonymsFile,
    parse_metadata_sidecar,
)
from knowledge.ranking.synonym_expansion import MAX_SYNONYMS_BYTES

__all__ = [
    "SYMLINK_OUTSIDE_SCOPE",
    "BucketFolderSource",
    "LocalDirectorySource",
    "read_regular_file",
    "replace_file",
]

SYMLINK_OUTSIDE_SCOPE = "symlink outside its scope"
"""The reason given for every entry left out because it resolves outside its scope folder."""

_SCOPE_FOLDER = "."
"""The path a problem of the scope's folder itself is reported under."""

_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in opens at once instead of blocking
    | getattr(os, "O_NOFOLLOW", 0)  # the path is already resolved: a new link is a swap
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def _is_inside(path: str, root: str) -> bool:
    """``path`` and ``root`` are real (resolved) paths."""
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives on Windows
        return False


def _printable(rel: str) -> str:
    return rel.encode("utf-8", "replace").decode("utf-8")


@dataclass(frozen=True, slots=True)
class _Found:
    rel: str
    real: str
    size: int


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def replace_file(target: Path, data: bytes, prefix: str) -> None:
    """Write ``data`` to ``target`` at once: into a hidden temporary file beside it (named
    ``prefix...``; dot files are never documents), then renamed over it, so a reader (the
    watcher, an index run) sees the old bytes or the new, never a part; the temporary file
    is removed if anything fails."""
    fd, temporary = tempfile.mkstemp(prefix=prefix, dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def read_regular_file(path: str, real_root: str, *, limit: int | None = None) -> bytes:
    """The bytes of the regular file at ``path`` if it resolves inside ``real_root``.

    Never blocks on a FIFO or device and never follows a link out of ``real_root``:
    the path is resolved, checked, opened with ``O_NONBLOCK | O_NOFOLLOW``, and the
    open file must be regular and still be the file the path resolves to. Reads at most
    ``limit`` bytes when given. Raises ``OSError`` (``PermissionError`` for a link out
    of the scope) whose message holds no absolute path.
    """
    current = os.path.realpath(path)
    if not _is_inside(current, real_root):
        raise PermissionError(errno.EACCES, SYMLINK_OUTSIDE_SCOPE)
    try:
        fd = os.open(current, _OPEN_FLAGS)
    except OSError as exc:  # without the file name: it is an absolute path
        raise OSError(exc.errno, exc.strerror or "cannot open") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{_kind(info.st_mode)}, not a regular file; not read")
        # A link swapped in for a parent folder after realpath() would open another file.
        again = os.path.realpath(path)
        try:
            same = _is_inside(again, real_root) and os.path.samestat(info, os.stat(again))
        except OSError:
            same = False
        if not same:
            raise PermissionError(errno.EACCES, "the file changed while it was opened; not read")
        # O_NONBLOCK has no effect on a regular file: this read blocks only on the disk.
        return handle.read() if limit is None else handle.read(limit)


def _reader(real: str, real_root: str, limit: int) -> Callable[[], bytes]:
    def read() -> bytes:
        # Resolved again when read: the file may have been swapped since it was listed.
        # At most ``limit`` bytes: a file that grew past the size limit after it was
        # listed (a log being appended, a copy in progress) cannot fill the memory; the
        # extractor then refuses it as too large.
        return read_regular_file(real, real_root, limit=limit)

    return read


def _unnameable(rel: str) -> str | None:
    """Why the API could never name ``rel`` as a document path (a control character, over
    ``MAX_DOCUMENT_PATH_LENGTH``), so it is not indexed; ``None`` if it can."""
    try:
        validate_document_path(rel, "path")
    except ValidationError as exc:
        return f"path not indexed: {exc.message}"
    return None


def _scan(real_root: str, recursive: bool, listing: Listing[SourceDocument]) -> dict[str, _Found]:
    """Every regular file under ``real_root`` that is not hidden, by relative path.

    Depth first in name order, with a stack of folders rather than recursion: a tree
    nested deeper than Python's recursion limit is listed like any other (its deep
    paths are too long to be document paths and are reported so) instead of failing
    the listing of the whole scope."""
    found: dict[str, _Found] = {}
    visited: set[str] = {real_root}
    folders: list[Iterator[tuple[str, os.DirEntry[str]]]] = []

    def enter(real_dir: str, prefix: str) -> None:
        try:
            with os.scandir(real_dir) as listed:
                entries = sorted(listed, key=lambda e: e.name)
        except OSError as exc:
            listing.errors.append(FileProblem(_printable(prefix or "."), _failed(CANNOT_LIST, exc)))
            return
        folders.append(_named_entries(entries, prefix, listing))

    enter(real_root, "")
    while folders:
        item = next(folders[-1], None)
        if item is None:  # this folder is done: back to its parent
            folders.pop()
            continue
        rel, entry = item
        # The folder being listed is a real path: only a link needs resolving (which
        # costs a system call per folder above it).
        real = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
        if entry.is_symlink() and not _is_inside(real, real_root):
            listing.skipped.append(FileProblem(rel, SYMLINK_OUTSIDE_SCOPE))
            continue
        try:
            if os.path.isdir(real):
                if recursive and real not in visited:
                    visited.add(real)
                    enter(real, rel + "/")
            elif os.path.isfile(real):
                problem = _unnameable(rel)
                if problem is not None:
                    listing.skipped.append(FileProblem(rel, problem))
                    continue
                found[rel] = _Found(rel, real, os.stat(real).st_size)
        except OSError as exc:  # vanished or unreadable between scandir and stat
            listing.errors.append(FileProblem(rel, _failed("cannot read", exc)))
    return found


def _failed(what: str, exc: OSError) -> str:
    """``what: <the system's reason>``, without the file name ``str(exc)`` would add (an
    absolute path of the machine, which reaches API callers in statuses and results)."""
    return f"{what}: {exc.strerror or type(exc).__name__}"


def _named_entries(
    entries: list[os.DirEntry[str]], prefix: str, listing: Listing[SourceDocument]
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """``(relative path, entry)`` of the entries that are not hidden and whose name is
    UTF-8 (the others are reported as skipped when reached)."""
    for entry in entries:
        if entry.name.startswith("."):
            continue
        rel = prefix + entry.name
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            listing.skipped.append(FileProblem(_printable(rel), "file name is not UTF-8"))
            continue
        yield rel, entry


def _sidecar_metadata(
    found: _Found, real_root: str, listing: Listing[SourceDocument]
) -> dict[str, MetadataValue]:
    try:
        data = read_regular_file(found.real, real_root, limit=MAX_SIDECAR_BYTES + 1)
        return parse_metadata_sidecar(data)
    except ValidationError as exc:
        problem = f"invalid metadata sidecar ({exc}); the document is indexed without it"
    except OSError as exc:
        problem = f"cannot read metadata sidecar ({exc}); the document is indexed without it"
    listing.errors.append(FileProblem(found.rel, problem))
    return {}


def _synonyms_file(found: _Found | None, real_root: str) -> SynonymsFile:
    """The scope's synonyms file (``ingest.synonyms_file``), read with the same checks as a
    document (a regular file inside the folder), up to one byte past its bound."""
    if found is None:
        return SynonymsFile()
    try:
        return SynonymsFile(read_regular_file(found.real, real_root, limit=MAX_SYNONYMS_BYTES + 1))
    except OSError as exc:
        return SynonymsFile(error=_failed("cannot read it", exc))


def _list_documents(
    real_root: str,
    options: IndexOptions,
    listing: Listing[SourceDocument],
    *,
    key_prefix: str | None,
) -> Iterator[SourceDocument]:
    found = _scan(real_root, options.recursive, listing)
    listing.synonyms = _synonyms_file(found.get(SYNONYMS_FILE), real_root)
    for rel in sorted(found):
        if rel.endswith(SIDECAR_SUFFIX) or rel == SYNONYMS_FILE:
            continue
        if not is_document_path(rel, options.file_patterns):
            listing.count_unread(rel)
            continue
        item = found[rel]
        sidecar = found.get(rel + SIDECAR_SUFFIX)
        metadata = {} if sidecar is None else _sidecar_metadata(sidecar, real_root, listing)
        yield SourceDocument(
            path=rel,
            size=item.size,
            read=_reader(item.real, real_root, options.max_document_bytes + 1),
            version=None,
            metadata=metadata,
            source_key=None if key_prefix is None else key_prefix + rel,
        )


class LocalDirectorySource:
    """A folder that holds the documents of the scope being indexed (the scope is not read)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root)

    @property
    def root(self) -> Path:
        return self._root

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Listing[SourceDocument]:
        """Documents under ``root``, sorted by path.

        Raises ``NotFoundError`` (on first iteration) if ``root`` is not a folder:
        syncing a scope with a missing folder would otherwise delete all its documents.
        """

        def produce(listing: Listing[SourceDocument]) -> Iterator[SourceDocument]:
            if not self._root.is_dir():
                raise NotFoundError(f"source folder '{self._root}' does not exist")
            real_root = os.path.realpath(self._root)
            yield from _list_documents(real_root, options, listing, key_prefix=None)

        return Listing(produce)


class BucketFolderSource:
    """A folder laid out like the bucket: ``root/<agent>/<context>/<path>``.

    A scope whose folder does not exist has no documents (syncing it empties the
    scope, as deleting every object under the S3 prefix would).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root)

    @property
    def root(self) -> Path:
        return self._root

    def scope_folder(self, scope: KnowledgeScope) -> Path:
        return self._root / scope.agent / scope.context

    def real_scope_folder(self, scope: KnowledgeScope) -> str:
        """Where the scope's folder must resolve to: the real root, then the two names.
        A folder that resolves anywhere else reached it through a link."""
        return os.path.join(os.path.realpath(self._root), scope.agent, scope.context)

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Listing[SourceDocument]:
        """Documents under ``root/<agent>/<context>/``, sorted by scope-relative path.

        ``source_key`` is the bucket-style key ``<agent>/<context>/<path>``. Links are
        followed only inside the scope's own folder: no scope can read another's files.
        A scope folder (or agent folder) that is itself a link has no documents; the
        listing reports it under the path ``.`` with ``SYMLINK_OUTSIDE_SCOPE``. A scope
        folder that cannot be reached (an agent folder that cannot be read, the served
        folder gone) is reported under ``.`` as ``CANNOT_LIST``: unknown, not empty.
        """
        folder = self.scope_folder(scope)

        def produce(listing: Listing[SourceDocument]) -> Iterator[SourceDocument]:
            problem = self._missing_folder_problem(folder)
            if problem is not None:  # the folder's content is unknown, not gone
                listing.errors.append(FileProblem(_SCOPE_FOLDER, problem))
                return
            if not folder.is_dir():
                return
            real_root = self.real_scope_folder(scope)
            if os.path.realpath(folder) != real_root:
                listing.skipped.append(FileProblem(_SCOPE_FOLDER, SYMLINK_OUTSIDE_SCOPE))
                return
            yield from _list_documents(real_root, options, listing, key_prefix=scope.key + "/")

        return Listing(produce)

    def _missing_folder_problem(self, folder: Path) -> str | None:
        """Why nothing can be said of ``folder`` (a scope folder): ``None`` if it exists or
        is simply not there (no documents, as an empty S3 prefix). A folder on its way
        that cannot be read (permission denied) or a served folder that is gone itself
        (a share unmounted, the folder moved) is no deletion of every document."""
        try:
            os.stat(folder)
        except (FileNotFoundError, NotADirectoryError):
            if not self._root.is_dir():
                return f"{CANNOT_LIST}: the folder being served is not there"
            return None
        except OSError as exc:
            return _failed(CANNOT_LIST, exc)
        return None

    def iter_scopes(self) -> Listing[KnowledgeScope]:
        """The scopes whose folders exist, sorted; folders with invalid names and files
        outside any ``<agent>/<context>/`` folder are listed in ``skipped``."""

        def produce(listing: Listing[KnowledgeScope]) -> Iterator[KnowledgeScope]:
            if not self._root.is_dir():
                return
            for agent in self._folders(self._root, "", listing):
                try:
                    validate_segment("agent", agent)
                except InvalidScopeError as exc:
                    listing.skipped.append(FileProblem(_printable(agent), exc.message))
                    continue
                for context in self._folders(self._root / agent, agent + "/", listing):
                    try:
                        yield KnowledgeScope(agent, context)
                    except InvalidScopeError as exc:
                        listing.skipped.append(
                            FileProblem(_printable(f"{agent}/{context}"), exc.message)
                        )

        return Listing(produce)

    @staticmethod
    def _folders(parent: Path, prefix: str, listing: Listing[KnowledgeScope]) -> list[str]:
        names: list[str] = []
        level = "an <agent>/<context>/" if not prefix else "a <context>/"
        try:
            entries = sorted(os.scandir(parent), key=lambda e: e.name)
        except OSError as exc:
            listing.errors.append(FileProblem(prefix or ".", _failed(CANNOT_LIST, exc)))
            return names
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = _printable(prefix + entry.name)
            try:
                if entry.is_symlink() and entry.is_dir():
                    # An agent or scope folder that is a link is always someone else's folder.
                    listing.skipped.append(FileProblem(rel, SYMLINK_OUTSIDE_SCOPE))
                elif entry.is_dir(follow_symlinks=False):
                    names.append(entry.name)
                else:
                    listing.skipped.append(FileProblem(rel, f"not inside {level} folder"))
            except OSError as exc:
                # A link that never resolves (to itself, or two links to each other) is
                # no folder: skipped, as a loop inside a scope is, so one bad entry does
                # not stop the listing of every scope beside it.
                listing.skipped.append(FileProblem(rel, _failed("link not followed", exc)))
        return names
