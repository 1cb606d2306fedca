"""How far the document being indexed has got, for whoever shows it (the local status).

The pipeline reports to the ``DocumentProgress`` set for the current context
(``observing``): ``begin`` once the document is read and extracted (its path, its size in
bytes and, for text, its length in characters), ``chunk`` for every chunk it produces
(with the chunk's length, so an estimate of the total can follow the text), ``end`` when
it is written or given up. A context variable rather than an argument through every
indexing call: progress is something to look at, not part of what indexing does, and
the caller that wants it (the local scheduler's job) is the one that sets it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

__all__ = ["DocumentProgress", "current_progress", "estimate_chunks", "observing"]


class DocumentProgress(Protocol):
    def begin(self, path: str, size: int | None, text_chars: int | None) -> None: ...

    def chunk(self, chars: int) -> None: ...

    def end(self) -> None: ...


_CURRENT: ContextVar[DocumentProgress | None] = ContextVar("kb_document_progress", default=None)


def current_progress() -> DocumentProgress | None:
    """What the pipeline reports to in this context, if anything."""
    return _CURRENT.get()


@contextmanager
def observing(progress: DocumentProgress) -> Iterator[None]:
    """Report the documents indexed in this block (this thread) to ``progress``."""
    token = _CURRENT.set(progress)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def estimate_chunks(chunks_done: int, chars_done: int, text_chars: int | None) -> int | None:
    """About how many chunks a document makes: its text's length over the characters per
    chunk so far (chunks overlap a little, so this leans low); ``None`` before the first
    chunk or for a document whose length in characters is not known."""
    if text_chars is None or chars_done <= 0:
        return None
    share = min(chars_done / max(text_chars, 1), 1.0)
    return max(chunks_done, math.ceil(chunks_done / share))
