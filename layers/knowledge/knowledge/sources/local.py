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
- symbolic links that resolve outside the folder of the scope (``Listing.skipped``):
  nothing outside it is ever read, also when a link changes between listing and
  reading. Links inside it are followed; every real folder is walked once.

Bytes are read only by ``SourceDocument.read()``. ``version`` is ``None``: local
files have no sequencer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from knowledge.errors import InvalidScopeError, NotFoundError, ValidationError
from knowledge.filters import matches_file_patterns
from knowledge.model import FileProblem, IndexOptions
from knowledge.scope import KnowledgeScope, validate_segment
from knowledge.source import SIDECAR_SUFFIX, SourceDocument
from knowledge.sources import Listing, MetadataValue, parse_metadata_sidecar

__all__ = ["BucketFolderSource", "LocalDirectorySource"]

_LINK_OUTSIDE = "symbolic link points outside the source folder; not followed"


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


def _reader(real: str, real_root: str) -> Callable[[], bytes]:
    def read() -> bytes:
        # Resolve again: the file may have been swapped for a link since it was listed.
        current = os.path.realpath(real)
        if not _is_inside(current, real_root):
            raise PermissionError(f"'{current}' is outside the source folder")
        with open(current, "rb") as handle:
            return handle.read()

    return read


def _scan(real_root: str, recursive: bool, listing: Listing[SourceDocument]) -> dict[str, _Found]:
    """Every regular file under ``real_root`` that is not hidden, by relative path."""
    found: dict[str, _Found] = {}
    visited: set[str] = set()

    def walk(real_dir: str, prefix: str) -> None:
        visited.add(real_dir)
        try:
            entries = sorted(os.scandir(real_dir), key=lambda e: e.name)
        except OSError as exc:
            listing.errors.append(FileProblem(_printable(prefix or "."), f"cannot list: {exc}"))
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = prefix + entry.name
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                listing.skipped.append(FileProblem(_printable(rel), "file name is not UTF-8"))
                continue
            real = os.path.realpath(entry.path)
            if entry.is_symlink() and not _is_inside(real, real_root):
                listing.skipped.append(FileProblem(rel, _LINK_OUTSIDE))
                continue
            try:
                if os.path.isdir(real):
                    if recursive and real not in visited:
                        walk(real, rel + "/")
                elif os.path.isfile(real):
                    found[rel] = _Found(rel, real, os.stat(real).st_size)
            except OSError as exc:  # vanished or unreadable between scandir and stat
                listing.errors.append(FileProblem(rel, f"cannot read: {exc}"))

    walk(real_root, "")
    return found


def _sidecar_metadata(found: _Found, listing: Listing[SourceDocument]) -> dict[str, MetadataValue]:
    try:
        with open(found.real, "rb") as handle:
            return parse_metadata_sidecar(handle.read())
    except ValidationError as exc:
        problem = f"invalid metadata sidecar ({exc}); the document is indexed without it"
    except OSError as exc:
        problem = f"cannot read metadata sidecar ({exc}); the document is indexed without it"
    listing.errors.append(FileProblem(found.rel, problem))
    return {}


def _list_documents(
    folder: Path,
    options: IndexOptions,
    listing: Listing[SourceDocument],
    *,
    key_prefix: str | None,
) -> Iterator[SourceDocument]:
    real_root = os.path.realpath(folder)
    found = _scan(real_root, options.recursive, listing)
    for rel in sorted(found):
        if rel.endswith(SIDECAR_SUFFIX) or not matches_file_patterns(rel, options.file_patterns):
            continue
        item = found[rel]
        sidecar = found.get(rel + SIDECAR_SUFFIX)
        metadata = {} if sidecar is None else _sidecar_metadata(sidecar, listing)
        yield SourceDocument(
            path=rel,
            size=item.size,
            read=_reader(item.real, real_root),
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
            yield from _list_documents(self._root, options, listing, key_prefix=None)

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

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Listing[SourceDocument]:
        """Documents under ``root/<agent>/<context>/``, sorted by scope-relative path.

        ``source_key`` is the bucket-style key ``<agent>/<context>/<path>``. Links are
        followed only inside the scope's own folder: no scope can read another's files.
        """
        folder = self.scope_folder(scope)

        def produce(listing: Listing[SourceDocument]) -> Iterator[SourceDocument]:
            if not folder.is_dir():
                return
            real_root = os.path.realpath(self._root)
            if not _is_inside(os.path.realpath(folder), real_root):
                listing.skipped.append(FileProblem(scope.key, _LINK_OUTSIDE))
                return
            yield from _list_documents(folder, options, listing, key_prefix=scope.key + "/")

        return Listing(produce)

    def iter_scopes(self) -> Listing[KnowledgeScope]:
        """The scopes whose folders exist, sorted; folders with invalid names and files
        outside any ``<agent>/<context>/`` folder are listed in ``skipped``."""

        def produce(listing: Listing[KnowledgeScope]) -> Iterator[KnowledgeScope]:
            if not self._root.is_dir():
                return
            real_root = os.path.realpath(self._root)
            for agent in self._folders(self._root, "", real_root, listing):
                try:
                    validate_segment("agent", agent)
                except InvalidScopeError as exc:
                    listing.skipped.append(FileProblem(_printable(agent), exc.message))
                    continue
                for context in self._folders(self._root / agent, agent + "/", real_root, listing):
                    try:
                        yield KnowledgeScope(agent, context)
                    except InvalidScopeError as exc:
                        listing.skipped.append(
                            FileProblem(_printable(f"{agent}/{context}"), exc.message)
                        )

        return Listing(produce)

    @staticmethod
    def _folders(
        parent: Path, prefix: str, real_root: str, listing: Listing[KnowledgeScope]
    ) -> list[str]:
        names: list[str] = []
        level = "an <agent>/<context>/" if not prefix else "a <context>/"
        try:
            entries = sorted(os.scandir(parent), key=lambda e: e.name)
        except OSError as exc:
            listing.errors.append(FileProblem(prefix or ".", f"cannot list: {exc}"))
            return names
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = _printable(prefix + entry.name)
            if entry.is_symlink() and not _is_inside(os.path.realpath(entry.path), real_root):
                listing.skipped.append(FileProblem(rel, _LINK_OUTSIDE))
            elif entry.is_dir():
                names.append(entry.name)
            else:
                listing.skipped.append(FileProblem(rel, f"not inside {level} folder"))
        return names
