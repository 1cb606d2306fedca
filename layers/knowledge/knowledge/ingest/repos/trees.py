"""The trees of the last synced commit, kept between syncs so the next fetch is incremental.

A sync after the first tells the Git server the commit it has (``have <sha>``, and
``shallow <sha>``: history is never fetched, so the server must not assume the client
holds that commit's parents). The server then sends only the objects of the new commit
that the old one does not reach: the new commit, the trees on the paths that changed,
the changed blobs. Walking the new tree needs every tree of it, and the unchanged ones
are the old commit's: ``TreeCache`` holds them (and the commit object), never a blob
(an unchanged file is in the mirror already and is never read again).

Stored as one zlib-compressed object beside the state (``RepoRegistry.trees``): a JSON
header line (``url``, ``branch``, ``commit``) then each object as its type number (one
byte), its length (four bytes, big-endian) and its raw bytes. Each object's id is
recomputed from its bytes when it is loaded, so a damaged cache cannot hand the walk a
wrong tree: a tree missing or unreadable makes the sync fetch in full
(``knowledge.ingest.repos.fetch``), as the first sync does.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TreeCache"]

_LENGTH = struct.Struct(">BI")
MAX_CACHE_BYTES = 256 * 1024 * 1024  # inflated; the trees of 20,000 files are ~1 MB


@dataclass
class TreeCache:
    url: str
    branch: str
    commit: str
    objects: list[tuple[int, bytes]] = field(default_factory=list)  # (type number, raw)

    def to_bytes(self) -> bytes:
        head = json.dumps(
            {"url": self.url, "branch": self.branch, "commit": self.commit}, sort_keys=True
        ).encode("utf-8")
        parts = [head, b"\n"]
        for type_num, raw in self.objects:
            parts.append(_LENGTH.pack(type_num, len(raw)))
            parts.append(raw)
        return zlib.compress(b"".join(parts), 6)

    @classmethod
    def from_bytes(cls, data: bytes | None) -> TreeCache | None:
        """The cache, or ``None`` when there is none or it cannot be read."""
        if not data:
            return None
        try:
            inflater = zlib.decompressobj()
            raw = inflater.decompress(data, MAX_CACHE_BYTES)
            if inflater.unconsumed_tail:
                return None
            head, _, body = raw.partition(b"\n")
            meta = json.loads(head)
            cache = cls(str(meta["url"]), str(meta["branch"]), str(meta["commit"]))
            at = 0
            while at < len(body):
                type_num, length = _LENGTH.unpack_from(body, at)
                at += _LENGTH.size
                cache.objects.append((type_num, body[at : at + length]))
                at += length
        except (zlib.error, ValueError, KeyError, TypeError, struct.error):
            return None
        return cache

    def matches(self, url: str, branch: str) -> bool:
        return self.url == url and self.branch == branch

    def load_into(self, store: Any) -> set[str]:
        """Add the objects to a dulwich object store; returns the ids of the blobs their
        trees name (the files the server will assume this client has)."""
        from dulwich.objects import ShaFile, Tree

        blobs: set[str] = set()
        for type_num, raw in self.objects:
            obj = ShaFile.from_raw_string(type_num, raw)
            store.add_object(obj)
            if isinstance(obj, Tree):
                for entry in obj.iteritems():
                    if (entry.mode & 0o170000) == 0o100000:  # a regular file's blob
                        blobs.add(entry.sha.decode("ascii"))
        return blobs

    @classmethod
    def of(cls, url: str, branch: str, commit: Any, trees: Iterable[Any]) -> TreeCache:
        """The cache of a walked commit: the commit object and its trees (dulwich)."""
        objects = [(commit.type_num, commit.as_raw_string())]
        objects.extend((tree.type_num, tree.as_raw_string()) for tree in trees)
        return cls(url, branch, commit.id.decode("ascii"), objects)
