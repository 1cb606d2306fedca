"""``knowledge.ingest.lookahead.Lookahead``: documents prepared ahead of the writer, in
listing order, within a window of documents and a bound on their bytes together."""

from __future__ import annotations

from collections.abc import Iterator

from knowledge.core.source import SourceDocument
from knowledge.ingest.lookahead import DEFAULT_WINDOW, Lookahead, Prepared

MIB = 1024 * 1024


def _documents(sizes: list[int], read: list[int]) -> Iterator[SourceDocument]:
    """The documents, noting in ``read`` how many the lookahead has taken from the listing."""
    for number, size in enumerate(sizes):
        read.append(number)
        yield SourceDocument(f"{number}.md", size, lambda: b"")


def _prepare(document: SourceDocument) -> Prepared:
    return Prepared(data=document.path.encode())


def test_the_bytes_ahead_bound_how_far_the_listing_is_read() -> None:
    read: list[int] = []
    sizes = [3 * MIB] * 10
    taken = []
    with Lookahead(
        _documents(sizes, read), _prepare, eligible=lambda n, d: True, window=16, max_bytes=8 * MIB
    ) as ahead:
        for number, (document, prepared) in enumerate(ahead):
            # at most two of 3 MiB prepared ahead (8 MiB), and one more read, held back
            assert len(read) <= number + 4, (number, len(read))
            assert prepared is not None
            assert prepared.data == document.path.encode()
            taken.append(document.path)
    assert taken == [f"{n}.md" for n in range(10)]  # every one, in listing order


def test_a_document_over_the_bound_is_still_prepared_when_nothing_else_is_ahead() -> None:
    read: list[int] = []
    with Lookahead(
        _documents([9 * MIB, 1, 9 * MIB], read), _prepare, eligible=lambda n, d: True, max_bytes=MIB
    ) as ahead:
        got = [(d.path, p is not None) for d, p in ahead]
    assert got == [("0.md", True), ("1.md", True), ("2.md", True)]


def test_small_documents_fill_the_window_and_unprepared_ones_take_no_room() -> None:
    read: list[int] = []
    with Lookahead(
        _documents([100] * 40, read), _prepare, eligible=lambda n, d: n % 2 == 0
    ) as ahead:
        documents = iter(ahead)
        first = next(documents)
        assert first[1] is not None
        assert len(read) == DEFAULT_WINDOW + 1  # the whole window: far below the bytes bound
        rest = [(d.path, p is not None) for d, p in documents]
    assert rest[:2] == [("1.md", False), ("2.md", True)]
    assert len(rest) == 39
