"""Reading, extracting, chunking and embedding the next documents while one is written.

``Indexer.index`` and ``reindex`` (``knowledge.ingest.pipeline``) write one document at a time,
in listing order, through one ``WriteSession``. With a remote embedder the embedding of a
small document is one round trip of a few calls: done one document after another, the
provider's quota is mostly idle (``bench/REPORT.md``, "Concurrent embedding"). So, with
an embedder whose calls run concurrently (``concurrency`` > 1), ``Lookahead`` prepares
the next ``window`` documents (of ``MAX_AHEAD_BYTES`` in all) on its own threads while
the current one is written:
``prepare(document)`` reads it, extracts and chunks it and embeds its chunks on the
provider's pool (whose adaptive limit bounds the calls in flight over all documents),
and the writer takes each document's ``Prepared`` in listing order. A document's write
waits for its own embeddings only, never for those of the documents after it.

What is prepared ahead is kept small and never touches the store: a text document
(Markdown, plain text) within ``MAX_PREPARED_BYTES`` and ``max_chunks``, that has no
indexed version (whose vectors the writer would reuse). Anything else is written as
before, streamed by the writer. A step that fails ahead keeps its error, which the writer
raises at that step, as if it had done it itself (same problem, same record). Documents
past ``options.max_documents`` are never read ahead. Each task runs in a copy of the
caller's ``contextvars`` context, so the embedding deadline (``knowledge.core.deadline``,
``embedding_time_budget``) binds them as it binds the caller.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from knowledge.core.errors import KnowledgeError

if TYPE_CHECKING:
    from knowledge.core.source import SourceDocument
    from knowledge.extraction import ExtractedDocument
    from knowledge.stores.protocol import EmbeddedChunk

__all__ = ["DEFAULT_WINDOW", "MAX_AHEAD_BYTES", "MAX_PREPARED_BYTES", "Lookahead", "Prepared"]

DEFAULT_WINDOW = 32
"""Documents prepared ahead of the one being written (within ``MAX_AHEAD_BYTES``). A
document whose throttled call waits out its backoff holds the writer, which takes
documents in order; the documents ahead keep the provider's quota busy meanwhile
(bench/REPORT.md 7.1: 8 ahead left it idler, about 155 texts/s against 170 with 16; for
``kb index`` of 2,000 texts, start to exit, 32 gave 5-10% more than 16 in the same runs,
its calls in flight dropping below the limit less often while the writer waited)."""

MAX_PREPARED_BYTES = 4 * 1024 * 1024
"""A larger document is read by the writer, streamed (memory stays bounded)."""

MAX_AHEAD_BYTES = 8 * MAX_PREPARED_BYTES
"""The sizes of the documents prepared ahead and not yet taken, together: many small
documents go ahead, few big ones (the bound of the window of 8 documents of up to
``MAX_PREPARED_BYTES`` before it grew to 16)."""


@dataclass
class Prepared:
    """What was done ahead for one document; each step's result or its error."""

    data: bytes | None = None
    read_error: Exception | None = None
    extracted: ExtractedDocument | None = None
    extract_error: KnowledgeError | None = None
    embedded: list[EmbeddedChunk] | None = None
    embed_error: KnowledgeError | None = None
    tokens: int = 0
    embedded_chunks: int = 0

    def read(self, document: SourceDocument) -> bytes:
        if self.read_error is not None:
            raise self.read_error
        return document.read() if self.data is None else self.data


class Lookahead:
    """Iterate ``(document, Prepared | None)`` over ``documents``, preparing up to
    ``window`` documents ahead with ``prepare``, of ``max_bytes`` in all (module
    docstring; one document is always prepared whatever its size). ``eligible(number,
    document)`` (0-based listing position) says whether a document may be prepared;
    ``None`` is yielded for the others. Use as a context manager: leaving it cancels what
    has not started and waits for what has."""

    def __init__(
        self,
        documents: Iterable[SourceDocument],
        prepare: Callable[[SourceDocument], Prepared],
        *,
        eligible: Callable[[int, SourceDocument], bool],
        window: int = DEFAULT_WINDOW,
        max_bytes: int = MAX_AHEAD_BYTES,
    ) -> None:
        self._documents = iter(documents)
        self._prepare = prepare
        self._eligible = eligible
        self._window = max(1, window)
        self._max_bytes = max_bytes
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._window, thread_name_prefix="index-ahead"
        )

    def __enter__(self) -> Lookahead:
        return self

    def __exit__(self, *exc: object) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __iter__(self) -> Iterator[tuple[SourceDocument, Prepared | None]]:
        ahead: deque[tuple[SourceDocument, concurrent.futures.Future[Prepared] | None, int]]
        ahead = deque()
        held: tuple[SourceDocument, bool] | None = None  # waits for room in max_bytes
        number = 0
        ahead_bytes = 0
        exhausted = False
        while True:
            while not exhausted and len(ahead) <= self._window:
                if held is None:
                    document = next(self._documents, None)
                    if document is None:
                        exhausted = True
                        break
                    held = (document, self._eligible(number, document))
                document, eligible = held
                size = max(0, document.size) if eligible else 0
                if size and ahead_bytes and ahead_bytes + size > self._max_bytes:
                    break  # listing order is kept: the next document waits for room
                held = None
                future = None
                if eligible:
                    context = contextvars.copy_context()
                    future = self._executor.submit(context.run, self._prepare, document)
                    ahead_bytes += size
                ahead.append((document, future, size))
                number += 1
            if not ahead:
                return
            document, future, size = ahead.popleft()
            prepared = None if future is None else future.result()
            ahead_bytes -= size
            yield document, prepared
