"""knowledge.ingest.chunking at its edges, each case with its literal chunks: argument errors,
structured blocks (numbering, metadata, sections, line ends, page tags), headings and
fences, and the overlap and cutting rules on long lines."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.model import DocumentChunk
from knowledge.extraction.base import Block
from knowledge.ingest.chunking import MarkdownSectionChunker, embedding_text
from knowledge.ranking.headings import heading_context

ALPHA = "alpha bravo charlie delta echo foxtrot golf hotel"  # 49 characters


def contents(chunks: Iterable[DocumentChunk]) -> list[str]:
    return [chunk.content for chunk in chunks]


def rows(chunks: Iterable[DocumentChunk]) -> list[tuple[str, int, str, dict[str, Any]]]:
    return [(c.document_path, c.chunk_index, c.content, dict(c.metadata)) for c in chunks]


# --- argument errors, raised when called ---------------------------------------------------


@pytest.mark.parametrize(("content", "shown"), [(b"text", "bytes"), (None, "NoneType"), (5, "int")])
def test_content_that_is_not_a_string_is_refused_by_name(content: object, shown: str) -> None:
    with pytest.raises(ValidationError) as info:
        MarkdownSectionChunker().chunk("d.md", content)  # type: ignore[arg-type]
    assert (info.value.field, info.value.message) == ("content", f"must be a string, got {shown}")


@pytest.mark.parametrize(("key", "shown"), [("slide", "'slide'"), ("PAGE", "'PAGE'"), (1, "1")])
def test_chunk_blocks_refuses_an_unknown_position_key_by_name(key: object, shown: str) -> None:
    with pytest.raises(ValidationError) as info:
        MarkdownSectionChunker().chunk_blocks("d.pdf", [], position_key=key)  # type: ignore[arg-type]
    assert (info.value.field, info.value.message) == (
        "position_key",
        f"must be 'page', 'row' or None, got {shown}",
    )


def test_chunk_blocks_validates_and_applies_max_chunk_size() -> None:
    chunker = MarkdownSectionChunker(chunk_size=100, overlap=0)
    with pytest.raises(ValidationError) as info:
        chunker.chunk_blocks("d.pdf", [], max_chunk_size=49)
    assert (info.value.field, info.value.message) == (
        "max_chunk_size",
        "must be at least 50, got 49",
    )
    blocks = [Block(ALPHA), Block(ALPHA)]
    assert contents(chunker.chunk_blocks("d.pdf", blocks)) == [ALPHA + "\n" + ALPHA]
    assert contents(chunker.chunk_blocks("d.pdf", blocks, max_chunk_size=50)) == [ALPHA, ALPHA]


# --- structured blocks ------------------------------------------------------------------------


def test_block_chunks_are_numbered_from_zero_with_the_section_metadata() -> None:
    chunker = MarkdownSectionChunker(chunk_size=50, overlap=0)
    section = {"heading_path": ("Deck", "Intro"), "slide": 3}
    blocks = [Block(ALPHA, section), Block(ALPHA, section), Block(ALPHA, section)]
    metadata = {"title": "Deck", "heading_path": ["Deck", "Intro"], "slide": 3}
    assert rows(chunker.chunk_blocks("a/deck.pptx", blocks, title="Deck")) == [
        ("a/deck.pptx", 0, ALPHA, metadata),
        ("a/deck.pptx", 1, ALPHA, metadata),
        ("a/deck.pptx", 2, ALPHA, metadata),
    ]


def test_block_positions_are_not_reported_without_a_position_key() -> None:
    chunker = MarkdownSectionChunker(chunk_size=50, overlap=0)
    blocks = [Block("first", position=4), Block("second", position=5)]
    assert rows(chunker.chunk_blocks("docs/r.pdf", blocks)) == [
        ("docs/r.pdf", 0, "first\nsecond", {"title": "r", "heading_path": []}),
    ]
    assert rows(chunker.chunk_blocks("docs/r.pdf", blocks, position_key="page")) == [
        (
            "docs/r.pdf",
            0,
            "first\nsecond",
            {"title": "r", "heading_path": [], "page": 4, "page_end": 5},
        ),
    ]
    assert rows(chunker.chunk_blocks("docs/r.csv", blocks, position_key="row")) == [
        (
            "docs/r.csv",
            0,
            "first\nsecond",
            {"title": "r", "heading_path": [], "row_start": 4, "row_end": 5},
        ),
    ]


def test_equal_sections_are_one_section_even_as_distinct_objects() -> None:
    blocks = [Block("one", {"slide": 1}), Block("two", {"slide": 1}), Block("three", {"slide": 2})]
    assert rows(MarkdownSectionChunker().chunk_blocks("d.pptx", blocks)) == [
        ("d.pptx", 0, "one\ntwo", {"title": "d", "heading_path": [], "slide": 1}),
        ("d.pptx", 1, "three", {"title": "d", "heading_path": [], "slide": 2}),
    ]


def test_line_ends_inside_blocks_are_normalised_and_never_doubled() -> None:
    blocks = [Block("one\r\ntwo\n"), Block("three\rfour"), Block("five\n")]
    assert contents(MarkdownSectionChunker().chunk_blocks("d.pdf", blocks)) == [
        "one\ntwo\nthree\nfour\nfive"
    ]


def test_a_whitespace_only_last_block_in_its_own_section_adds_nothing() -> None:
    blocks = [Block("one", {"slide": 1}), Block("  \n ", {"slide": 2})]
    assert rows(MarkdownSectionChunker().chunk_blocks("d.pptx", blocks)) == [
        ("d.pptx", 0, "one", {"title": "d", "heading_path": [], "slide": 1}),
    ]
    assert list(MarkdownSectionChunker().chunk_blocks("d.pptx", [])) == []


def test_page_tags_travel_with_the_overlap() -> None:
    # The second chunk starts with "golf" from page 1: it spans pages 1-2.
    blocks = [
        Block("alpha bravo charlie delta echo foxtrot golf", position=1),
        Block("hotel india juliet kilo lima mike", position=2),
    ]
    chunker = MarkdownSectionChunker(chunk_size=50, overlap=10)
    assert rows(chunker.chunk_blocks("d.pdf", blocks, position_key="page")) == [
        (
            "d.pdf",
            0,
            "alpha bravo charlie delta echo foxtrot golf",
            {"title": "d", "heading_path": [], "page": 1},
        ),
        (
            "d.pdf",
            1,
            "golf\nhotel india juliet kilo lima mike",
            {"title": "d", "heading_path": [], "page": 1, "page_end": 2},
        ),
    ]


# --- plain text: line ends, titles, headings, fences ---------------------------------------


def test_a_lone_carriage_return_ends_a_line() -> None:
    chunks = MarkdownSectionChunker().chunk("d.md", "a\rb\r# H\rc")
    assert rows(chunks) == [
        ("d.md", 0, "a\nb", {"title": "H", "heading_path": []}),
        ("d.md", 1, "# H\nc", {"title": "H", "heading_path": ["H"]}),
    ]


def test_a_windows_path_gives_its_base_name_as_the_title() -> None:
    chunks = list(MarkdownSectionChunker().chunk("docs\\guide\\setup.md", "text"))
    assert chunks[0].metadata["title"] == "setup"


def test_a_bare_hash_is_an_empty_heading_that_starts_a_section() -> None:
    chunks = MarkdownSectionChunker().chunk("d.md", "# Top\ntext a\n#\ntext b\n")
    assert rows(chunks) == [
        ("d.md", 0, "# Top\ntext a", {"title": "Top", "heading_path": ["Top"]}),
        ("d.md", 1, "#\ntext b", {"title": "Top", "heading_path": []}),
    ]


def test_a_hash_followed_by_a_form_feed_is_not_a_heading() -> None:
    chunks = MarkdownSectionChunker().chunk("d.md", "intro\n#\x0c\nmore\n")
    assert rows(chunks) == [("d.md", 0, "intro\n#\x0c\nmore", {"title": "d", "heading_path": []})]


def test_a_heading_ending_in_x_keeps_its_last_letter() -> None:
    chunks = MarkdownSectionChunker().chunk("d.md", "# TAX\ntext\n")
    assert rows(chunks) == [("d.md", 0, "# TAX\ntext", {"title": "TAX", "heading_path": ["TAX"]})]


def test_a_tilde_fence_may_have_a_backtick_in_its_info_string() -> None:
    text = "~~~ x`y\n# not a heading\n~~~\n# Real\nbody\n"
    assert rows(MarkdownSectionChunker().chunk("d.md", text)) == [
        ("d.md", 0, "~~~ x`y\n# not a heading\n~~~", {"title": "Real", "heading_path": []}),
        ("d.md", 1, "# Real\nbody", {"title": "Real", "heading_path": ["Real"]}),
    ]


def test_a_backtick_line_with_a_backtick_in_its_info_string_opens_no_fence() -> None:
    text = "``` x`y\n# Heading\nbody\n"
    assert rows(MarkdownSectionChunker().chunk("d.md", text)) == [
        ("d.md", 0, "``` x`y", {"title": "Heading", "heading_path": []}),
        ("d.md", 1, "# Heading\nbody", {"title": "Heading", "heading_path": ["Heading"]}),
    ]


# --- overlap and cutting ------------------------------------------------------------------


def test_an_overlap_of_one_character_repeats_one_character() -> None:
    chunks = MarkdownSectionChunker(chunk_size=50, overlap=1).chunk("d.md", "x" * 122)
    # 50 new, then 1 repeated + 49 new, then 1 repeated + the last 23
    assert contents(chunks) == ["x" * 50, "x" * 50, "x" * 24]
    chunks = MarkdownSectionChunker(chunk_size=50, overlap=0).chunk("d.md", "x" * 122)
    assert contents(chunks) == ["x" * 50, "x" * 50, "x" * 22]


def test_a_high_overlap_starts_at_the_second_word_not_inside_the_first() -> None:
    # The first piece is 50 characters, the overlap 49: its tail would start inside
    # "alpha", so it starts at "bravo".
    chunks = MarkdownSectionChunker(chunk_size=50, overlap=49).chunk("d.md", ALPHA + " india")
    assert contents(chunks) == [ALPHA, "bravo charlie delta echo foxtrot golf hotel india"]


def test_an_overlap_without_a_word_start_is_taken_as_it_is() -> None:
    # The only blank after the overlap's start ends the piece: the overlap keeps "xxxx ".
    chunks = MarkdownSectionChunker(chunk_size=50, overlap=5).chunk(
        "d.md", "x" * 45 + " " + "y" * 20
    )
    assert contents(chunks) == ["x" * 45, "xxxx " + "y" * 20]


def test_an_overlap_of_only_blanks_is_dropped_and_leaves_the_room_free() -> None:
    # The first piece ends in 10 blanks: no overlap, so the 48 b's fit one chunk.
    text = "a" * 40 + " " * 10 + "b" * 48
    chunks = MarkdownSectionChunker(chunk_size=50, overlap=5).chunk("d.md", text)
    assert contents(chunks) == ["a" * 40, "b" * 48]


def test_a_piece_of_overlap_and_blanks_is_dropped_and_leaves_the_room_free() -> None:
    # After the a's, the overlap and a blank line hold no new text: dropped whole, so the
    # 50-character line after them fits one chunk uncut.
    text = "a" * 45 + "\n" + " " * 30 + "\n" + "b" * 44 + " cccc\n"
    chunks = MarkdownSectionChunker(chunk_size=50, overlap=10).chunk("d.md", text)
    assert contents(chunks) == ["a" * 45, "b" * 44 + " cccc"]


# --- what is embedded -----------------------------------------------------------------------


def _chunk(metadata: dict[str, Any]) -> DocumentChunk:
    return DocumentChunk(document_path="d.md", chunk_index=0, content="body", metadata=metadata)


@pytest.mark.parametrize(
    ("metadata", "text"),
    [
        ({"title": "Guide", "heading_path": ["Guide", "Install"]}, "Guide > Install\n\nbody"),
        ({"title": "Guide", "heading_path": ["Setup", " "]}, "Guide > Setup\n\nbody"),
        ({"title": "Guide", "heading_path": [" ", "Guide", ""]}, "Guide\n\nbody"),
        ({"title": "  Doc  ", "heading_path": []}, "Doc\n\nbody"),
        ({"heading_path": ["A", "B"]}, "A > B\n\nbody"),
        ({"title": None, "heading_path": ["A"]}, "A\n\nbody"),
        ({"title": "", "heading_path": []}, "body"),
        ({}, "body"),
        # Without a letter a title or heading says nothing to a model: left out.
        ({"title": "3.1.4", "heading_path": []}, "body"),
        ({"title": "3.1.4", "heading_path": ["1.2", "Install"]}, "Install\n\nbody"),
        ({"title": "설치 안내", "heading_path": ["2024-05"]}, "설치 안내\n\nbody"),
    ],
)
def test_embedding_text_puts_title_and_headings_in_front(
    metadata: dict[str, Any], text: str
) -> None:
    assert embedding_text(_chunk(metadata)) == text


@pytest.mark.parametrize(
    ("metadata", "context"),
    [
        ({"title": "Guide", "heading_path": ["Guide", "Install"]}, "Guide > Install"),
        ({"title": "Guide", "heading_path": ["Setup", " "]}, "Guide > Setup"),
        ({"title": "  Doc  ", "heading_path": []}, "Doc"),
        ({"heading_path": ["A", "B"]}, "A > B"),
        ({"title": "", "heading_path": []}, ""),
        ({}, ""),
        ({"title": "3.1.4", "heading_path": ["1.2", "Install"]}, "Install"),
        ({"title": "설치 안내", "heading_path": ["2024-05"]}, "설치 안내"),
    ],
)
def test_heading_context_is_the_line_embedding_text_puts_in_front(
    metadata: dict[str, Any], context: str
) -> None:
    # What the keyword indexes hold next to a chunk's text (knowledge.ranking.headings).
    assert heading_context(metadata) == context
