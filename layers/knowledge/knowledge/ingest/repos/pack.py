"""How large a fetched pack is once inflated, measured before anything is inflated into
memory.

A Git pack holds zlib-compressed objects; a server without protocol v2's ``filter`` (or
one that ignores it) can send a small pack of highly compressible blobs that inflates far
past ``SyncBounds.max_repo_bytes``, and dulwich's in-memory store inflates every object of
it at once. ``inflated_size`` walks the pack once with constant memory: each object's
header declares its size (a delta's own header declares the size of the object it
makes), the compressed data is inflated in small steps and thrown away (only to find
where the next object starts, and to check that no object inflates past what its header
declares), and the walk stops as soon as the declared sizes pass the bound.

The format (Git's ``Documentation/gitformat-pack.txt``): ``PACK``, version 2 or 3, an
object count; per object a size-and-type header (7-bit groups), for ``OFS_DELTA`` a base
offset, for ``REF_DELTA`` a base object id, then one zlib stream; a trailing checksum
(which dulwich verifies when it stores the pack).
"""

from __future__ import annotations

import struct
import zlib
from typing import BinaryIO

__all__ = ["PackLimitExceeded", "inflated_size"]

OFS_DELTA = 6
REF_DELTA = 7
_SLICE = 4 * 1024
_READ = 256 * 1024


class PackLimitExceeded(Exception):  # noqa: N818 - reads as the condition it reports
    """The pack's objects inflate to more than the limit."""


class PackFormatError(ValueError):
    """Not a pack this walker can read (so not one dulwich would store either)."""


class _Reader:
    """Sequential reads from ``stream`` through one buffer and a position in it."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._buffer = b""
        self._at = 0

    def _fill(self) -> None:
        more = self._stream.read(_READ)
        if not more:
            raise PackFormatError("the pack ends inside an object")
        self._buffer = self._buffer[self._at :] + more
        self._at = 0

    def read(self, n: int) -> bytes:
        while len(self._buffer) - self._at < n:
            self._fill()
        data = self._buffer[self._at : self._at + n]
        self._at += n
        return data

    def byte(self) -> int:
        if self._at >= len(self._buffer):
            self._fill()
        self._at += 1
        return self._buffer[self._at - 1]

    def inflate(self, declared: int, keep: int) -> bytes:
        """Inflate one zlib stream, keeping its first ``keep`` bytes; the stream may not
        inflate to more than ``declared`` bytes. The input goes in 4 KiB slices, so one
        step inflates to at most ~4 MiB (zlib's ratio is at most ~1,032:1)."""
        inflater = zlib.decompressobj()
        kept = b""
        produced = 0
        while not inflater.eof:
            if self._at >= len(self._buffer):
                self._fill()
            piece = self._buffer[self._at : self._at + _SLICE]
            self._at += len(piece)
            out = inflater.decompress(piece)
            produced += len(out)
            if produced > declared:
                raise PackFormatError("an object inflates past its declared size")
            if len(kept) < keep:
                kept += out[: keep - len(kept)]
        self._at -= len(inflater.unused_data)  # the next object's first bytes
        return kept


def _varint(data: bytes) -> tuple[int, int]:
    """A delta header's size (7-bit groups, least significant first) and its length."""
    value = shift = 0
    for i, byte in enumerate(data):
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i + 1
    raise PackFormatError("a delta header is cut short")


def inflated_size(stream: BinaryIO, limit: int, *, oid_length: int = 20) -> int:
    """The total inflated size of the objects of the pack read from ``stream`` (deltas
    counted at the size of the objects they make); ``PackLimitExceeded`` as soon as the
    declared sizes pass ``limit``, before that object is inflated."""
    reader = _Reader(stream)
    magic, version, count = struct.unpack(">4sLL", reader.read(12))
    if magic != b"PACK" or version not in (2, 3):
        raise PackFormatError("not a Git pack")
    total = 0
    for _ in range(count):
        byte = reader.byte()
        kind = (byte >> 4) & 0x07
        size = byte & 0x0F
        shift = 4
        while byte & 0x80:
            byte = reader.byte()
            size |= (byte & 0x7F) << shift
            shift += 7
        if kind == OFS_DELTA:
            while reader.byte() & 0x80:
                pass
        elif kind == REF_DELTA:
            reader.read(oid_length)
        if kind in (OFS_DELTA, REF_DELTA):
            if size > limit:  # the delta itself
                raise PackLimitExceeded
            head = reader.inflate(size, keep=20)
            _, used = _varint(head)
            made, _ = _varint(head[used:])
        else:
            if total + size > limit:
                raise PackLimitExceeded
            reader.inflate(size, keep=0)
            made = size
        total += made
        if total > limit:
            raise PackLimitExceeded
    return total
