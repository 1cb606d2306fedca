"""Split a document into chunks: Markdown sections first, then lines, then characters.

``MarkdownSectionChunker``:

- a section starts at every ATX heading (``#`` .. ``######``) that is not inside a fenced
  code block (fenced by 3+ backticks or tildes) or the YAML front matter at the top; text
  before the first heading is a section with an empty heading path. A document without
  headings is one section, so it falls back to size-based splitting with the same rules;
- a section longer than the effective size is cut on line boundaries; a line that alone is
  too long is cut on characters, at whitespace where that keeps the piece at least half full;
- consecutive pieces of one section overlap: a piece after a cut starts with up to
  ``overlap`` characters from the end of the previous piece, from a whitespace boundary
  where there is one. Different sections never overlap;
- effective size = ``min(chunk_size, max_chunk_size)``; no chunk is longer, overlap
  included. When ``max_chunk_size`` lowers the size the overlap shrinks in proportion;
- chunk text is stripped of surrounding whitespace; whitespace-only pieces are dropped, so
  an empty or blank document has no chunks; ``chunk_index`` is 0-based and consecutive;
- small adjacent sections are *not* merged: every heading starts a new chunk (simple and
  predictable; a heading's chunk is never diluted by its neighbours);
- metadata: ``title`` (text of the first H1, else the file's base name without extension)
  and ``heading_path`` (heading texts from the top level down to the section's heading).

``chunk`` is lazy (a generator) and linear in the size of the document, so a very large
document streams chunk by chunk. Headings are recognised in any document, ``.txt`` too.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

from knowledge.core.errors import ValidationError
from knowledge.core.model import DocumentChunk
from knowledge.extraction.base import Block, PositionKey
from knowledge.extraction.plain import FRONT_MATTER
from knowledge.ranking.headings import heading_context

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_OVERLAP",
    "MIN_CHUNK_SIZE",
    "DocumentChunker",
    "MarkdownSectionChunker",
    "StructuredChunker",
    "embedding_text",
]

DEFAULT_CHUNK_SIZE = 500
DEFAULT_OVERLAP = 50
# The same floor as IndexOptions.max_chunk_size: smaller chunks carry too little context.
MIN_CHUNK_SIZE = 50


@runtime_checkable
class DocumentChunker(Protocol):
    """Splits one document's text into ordered chunks; handed to the pipeline
    (docs/architecture.md, "Chunking contract").

    ``chunk`` yields chunks with consecutive 0-based ``chunk_index``, none longer than
    ``min(chunk_size, max_chunk_size)``; an empty document yields nothing. Bad arguments
    raise ``ValidationError`` when ``chunk`` is called, not when the iterator is consumed.
    """

    @property
    def chunk_size(self) -> int: ...

    def chunk(
        self, document_path: str, content: str, *, max_chunk_size: int | None = None
    ) -> Iterator[DocumentChunk]: ...


@runtime_checkable
class StructuredChunker(Protocol):
    """A chunker that also splits a structured extraction (``knowledge.extraction``).

    ``chunk_blocks`` takes the blocks in reading order and never lets a chunk cross a
    section (a change of ``Block.section``); each chunk's metadata is ``title``,
    ``heading_path`` and the section's other citation keys (``slide``, ``sheet``), plus,
    from the blocks' positions, ``page`` (and ``page_end`` when it spans pages) or
    ``row_start`` and ``row_end``.
    """

    def chunk_blocks(
        self,
        document_path: str,
        blocks: Iterable[Block],
        *,
        title: str | None = None,
        position_key: PositionKey | None = None,
        max_chunk_size: int | None = None,
    ) -> Iterator[DocumentChunk]: ...


class MarkdownSectionChunker:
    """The default chunker: Markdown sections, then lines, then characters (module docstring).

    ``chunk_size`` must be at least ``MIN_CHUNK_SIZE``; ``overlap`` in ``[0, chunk_size)``.
    """

    def __init__(
        self, chunk_size: int = DEFAULT_CHUNK_SIZE, overlap: int = DEFAULT_OVERLAP
    ) -> None:
        _require_int("chunk_size", chunk_size)
        _require_int("overlap", overlap)
        if chunk_size < MIN_CHUNK_SIZE:
            raise ValidationError(
                "chunk_size", f"must be at least {MIN_CHUNK_SIZE}, got {chunk_size}"
            )
        if not 0 <= overlap < chunk_size:
            raise ValidationError(
                "overlap",
                f"must be at least 0 and less than chunk_size ({chunk_size}), got {overlap}",
            )
        self._chunk_size = chunk_size
        self._overlap = overlap

    @property
    def chunk_size(self) -> int:
        return self._chunk_size

    @property
    def overlap(self) -> int:
        return self._overlap

    def __repr__(self) -> str:
        return f"MarkdownSectionChunker(chunk_size={self._chunk_size}, overlap={self._overlap})"

    def chunk(
        self, document_path: str, content: str, *, max_chunk_size: int | None = None
    ) -> Iterator[DocumentChunk]:
        if not isinstance(content, str):
            raise ValidationError("content", f"must be a string, got {type(content).__name__}")
        size, overlap = self._effective(max_chunk_size)
        # Validation above runs eagerly; the work itself is a generator.
        return self._chunks(document_path, content, size, overlap)

    def chunk_blocks(
        self,
        document_path: str,
        blocks: Iterable[Block],
        *,
        title: str | None = None,
        position_key: PositionKey | None = None,
        max_chunk_size: int | None = None,
    ) -> Iterator[DocumentChunk]:
        """Chunks of a structured extraction (``StructuredChunker``): each section's lines
        are packed and overlapped as a Markdown section's are; sections never merge. Pages
        are not sections (``Block.section`` stays the same across them), so a chunk may
        span pages; sheets and slides are."""
        if position_key not in (None, "page", "row"):
            raise ValidationError(
                "position_key", f"must be 'page', 'row' or None, got {position_key!r}"
            )
        size, overlap = self._effective(max_chunk_size)
        return self._block_chunks(document_path, blocks, title, position_key, (size, overlap))

    def _effective(self, max_chunk_size: int | None) -> tuple[int, int]:
        size = self._chunk_size
        if max_chunk_size is not None:
            _require_int("max_chunk_size", max_chunk_size)
            if max_chunk_size < MIN_CHUNK_SIZE:
                raise ValidationError(
                    "max_chunk_size", f"must be at least {MIN_CHUNK_SIZE}, got {max_chunk_size}"
                )
            size = min(size, max_chunk_size)
        # Proportional, so a capped size keeps the configured share of new text per chunk.
        return size, self._overlap * size // self._chunk_size

    def _block_chunks(
        self,
        document_path: str,
        blocks: Iterable[Block],
        title: str | None,
        position_key: PositionKey | None,
        size_and_overlap: tuple[int, int],
    ) -> Iterator[DocumentChunk]:
        size, overlap = size_and_overlap
        title = title or _base_name(document_path)
        index = 0
        for piece, section in _block_pieces(blocks, size, overlap):
            text = piece.text.strip()
            if not text:
                continue
            metadata: dict[str, Any] = {
                "title": title,
                "heading_path": list(section.get("heading_path", ())),
            }
            metadata.update((k, v) for k, v in section.items() if k != "heading_path")
            if position_key is not None and piece.first is not None:
                metadata.update(_position(position_key, piece.first, piece.last or piece.first))
            yield DocumentChunk(
                document_path=document_path, chunk_index=index, content=text, metadata=metadata
            )
            index += 1

    def _chunks(
        self, document_path: str, content: str, size: int, overlap: int
    ) -> Iterator[DocumentChunk]:
        if "\r" in content:
            content = content.replace("\r\n", "\n").replace("\r", "\n")
        if not content or content.isspace():
            return
        title = _first_h1(content) or _base_name(document_path)
        index = 0
        for piece, heading_path in _pieces(content, size, overlap):
            text = piece.text.strip()
            if not text:
                continue
            yield DocumentChunk(
                document_path=document_path,
                chunk_index=index,
                content=text,
                metadata={"title": title, "heading_path": list(heading_path)},
            )
            index += 1


def embedding_text(chunk: DocumentChunk) -> str:
    """What is embedded for ``chunk``: its ``heading_context`` in front of its text
    (``"Title > Section > Sub\n\n<content>"``), so a chunk cut from the middle of a long
    section still says what it is about. The stored content stays as is; a chunk without
    a context is its content alone."""
    context = heading_context(chunk.metadata)
    if not context:
        return chunk.content
    return context + "\n\n" + chunk.content


def _require_int(field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, f"must be an integer, got {value!r}")


def _base_name(document_path: str) -> str:
    name = posixpath.basename(document_path.replace("\\", "/"))
    stem, _ = posixpath.splitext(name)
    return stem or name


# --- Markdown line scanning -------------------------------------------------------------

_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+|\Z)(.*)", re.DOTALL)
_CLOSING_HASHES = re.compile(r"(?:\A|[ \t])#+\Z")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)", re.DOTALL)
_WHITESPACE = re.compile(r"\s+")


def _lines(text: str) -> Iterator[str]:
    """Lines with their ``\\n``, one at a time (``splitlines`` would hold them all at once)."""
    start = 0
    end_of_text = len(text)
    while start < end_of_text:
        end = text.find("\n", start)
        if end == -1:
            yield text[start:]
            return
        yield text[start : end + 1]
        start = end + 1


def _scan(content: str) -> Iterator[tuple[str, tuple[int, str] | None]]:
    """Each line with its heading ``(level, text)``, or ``None`` if it is not a heading."""
    match = FRONT_MATTER.match(content)
    front_matter_end = match.end() if match else 0
    offset = 0
    fence: tuple[str, int] | None = None  # (marker char, marker length) of the open fence
    for line in _lines(content):
        in_front_matter = offset < front_matter_end
        offset += len(line)
        if in_front_matter:
            yield line, None
            continue
        bare = line.rstrip("\n")
        first = bare.lstrip(" ")[:1]
        heading: tuple[int, str] | None = None
        if first in ("`", "~"):
            fence_match = _FENCE.match(bare)
            if fence_match:
                marker, info = fence_match.group(1), fence_match.group(2)
                if fence is None:
                    # CommonMark: a backtick fence's info string cannot contain a backtick.
                    if not (marker[0] == "`" and "`" in info):
                        fence = (marker[0], len(marker))
                elif marker[0] == fence[0] and len(marker) >= fence[1] and not info.strip():
                    fence = None
        elif first == "#" and fence is None:
            heading_match = _HEADING.match(bare)
            if heading_match:
                text = _CLOSING_HASHES.sub("", heading_match.group(2).strip()).strip()
                heading = (len(heading_match.group(1)), text)
        yield line, heading


def _first_h1(content: str) -> str | None:
    for _, heading in _scan(content):
        if heading is not None and heading[0] == 1 and heading[1]:
            return heading[1]
    return None


# --- Splitting ----------------------------------------------------------------------------


def _pieces(content: str, size: int, overlap: int) -> Iterator[tuple[_Piece, tuple[str, ...]]]:
    """Raw pieces (not yet stripped) of every section, with the section's heading path."""
    splitter = _SectionSplitter(size, overlap)
    headings: list[tuple[int, str]] = []
    heading_path: tuple[str, ...] = ()
    for line, heading in _scan(content):
        if heading is not None:
            piece = splitter.finish()
            if piece is not None:
                yield piece, heading_path
            level = heading[0]
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append(heading)
            heading_path = tuple(text for _, text in headings if text)
        for piece in splitter.add(line):
            yield piece, heading_path
    piece = splitter.finish()
    if piece is not None:
        yield piece, heading_path


def _block_pieces(
    blocks: Iterable[Block], size: int, overlap: int
) -> Iterator[tuple[_Piece, Mapping[str, Any]]]:
    """Raw pieces of a structured extraction, with the section each comes from."""
    splitter = _SectionSplitter(size, overlap)
    section: Mapping[str, Any] | None = None
    for block in blocks:
        if section is None:
            section = block.section
        elif block.section is not section and block.section != section:
            piece = splitter.finish()
            if piece is not None:
                yield piece, section
            section = block.section
        text = block.text if block.text.endswith("\n") else block.text + "\n"
        for line in _lines(text.replace("\r\n", "\n").replace("\r", "\n")):
            for piece in splitter.add(line, block.position):
                yield piece, section
    piece = splitter.finish()
    if piece is not None and section is not None:
        yield piece, section


def _position(key: PositionKey, first: int, last: int) -> dict[str, int]:
    if key == "page":
        return {"page": first} if last == first else {"page": first, "page_end": last}
    return {"row_start": first, "row_end": last}


def _overlap_tail(piece: str, overlap: int) -> str:
    """Up to ``overlap`` characters from the end of ``piece``, starting at a word if possible."""
    if overlap <= 0:
        return ""
    start = max(0, len(piece) - overlap)
    if start > 0 and not piece[start - 1].isspace():
        blank = _WHITESPACE.search(piece, start)
        if blank is not None and blank.end() < len(piece):
            start = blank.end()
    tail = piece[start:]
    return "" if tail.isspace() else tail


class _Piece(NamedTuple):
    """A piece of a section and the first and last tags (page or row numbers) of the
    lines it holds text from (``None`` when its lines carry no tags)."""

    text: str
    first: int | None
    last: int | None


class _SectionSplitter:
    """Packs the lines of one section into pieces of at most ``size`` characters.

    A line that does not fit closes the current piece and starts the next one (after the
    overlap); a line too long for any piece is cut on characters to fill the room left,
    after a blank where that keeps the cut in the second half of the room. ``add`` yields
    the pieces it closes; ``finish`` returns the last piece of the section. A piece holding
    only the previous overlap and whitespace is dropped: it would repeat a chunk.

    Each line may carry a tag (its page or row number); a piece reports the first and last
    tag of the lines it holds text from, the overlap included.
    """

    def __init__(self, size: int, overlap: int) -> None:
        self._size = size
        self._overlap = overlap
        # Any line this long fits whole in a piece that starts with an overlap.
        self._fresh_room = size - overlap
        self._parts: list[str] = []
        self._tags: list[int | None] = []
        self._length = 0
        self._has_new_text = False

    def add(self, line: str, tag: int | None = None) -> Iterator[_Piece]:
        start = 0
        while True:
            rest = len(line) - start
            room = self._size - self._length
            if rest <= room:
                self._append(line[start:] if start else line, tag)
                return
            if rest <= self._fresh_room or room < max(1, self._fresh_room // 2):
                yield from self._close()
                continue
            end = start + room
            blank = max(line.rfind(" ", start, end), line.rfind("\t", start, end))
            if blank >= start + room // 2:
                end = blank + 1
            self._append(line[start:end], tag)
            start = end
            yield from self._close()

    def finish(self) -> _Piece | None:
        piece = self._piece() if self._has_new_text else None
        self._parts = []
        self._tags = []
        self._length = 0
        self._has_new_text = False
        return piece

    def _append(self, text: str, tag: int | None) -> None:
        self._parts.append(text)
        self._tags.append(tag)
        self._length += len(text)
        if not self._has_new_text and text and not text.isspace():
            self._has_new_text = True

    def _piece(self) -> _Piece:
        first = last = None
        for text, tag in zip(self._parts, self._tags, strict=True):
            if tag is not None and text and not text.isspace():
                if first is None:
                    first = tag
                last = tag
        return _Piece("".join(self._parts), first, last)

    def _close(self) -> Iterator[_Piece]:
        if self._has_new_text:
            piece = self._piece()
            yield piece
            tail = _overlap_tail(piece.text, self._overlap)
            self._keep_tail(len(tail))
        else:
            self._parts = []
            self._tags = []
            self._length = 0
        self._has_new_text = False

    def _keep_tail(self, length: int) -> None:
        """Keep the last ``length`` characters of the parts, each with its own tag."""
        parts: list[str] = []
        tags: list[int | None] = []
        remaining = length
        for text, tag in zip(reversed(self._parts), reversed(self._tags), strict=True):
            if remaining <= 0:
                break
            taken = text[-remaining:] if len(text) > remaining else text
            parts.append(taken)
            tags.append(tag)
            remaining -= len(taken)
        parts.reverse()
        tags.reverse()
        self._parts = parts
        self._tags = tags
        self._length = length
