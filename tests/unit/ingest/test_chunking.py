from __future__ import annotations

import itertools
import random
import string
import types
from collections.abc import Sequence

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.model import DocumentChunk
from knowledge.ingest.chunking import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_OVERLAP,
    DocumentChunker,
    MarkdownSectionChunker,
)


def chunks_of(
    content: str,
    *,
    size: int = 500,
    overlap: int = 50,
    path: str = "docs/guide.md",
    max_chunk_size: int | None = None,
) -> list[DocumentChunk]:
    chunker = MarkdownSectionChunker(chunk_size=size, overlap=overlap)
    return list(chunker.chunk(path, content, max_chunk_size=max_chunk_size))


def squeeze(text: str) -> str:
    return "".join(text.split())


def assert_reassembles(document: str, chunks: Sequence[DocumentChunk], max_overlap: int) -> None:
    """Chunks are in document order, each continues where the previous one stopped (possibly
    repeating up to ``max_overlap`` characters of it), and together they hold every
    non-whitespace character of the document, in order.

    Repetitive text can align in several ways, so every consistent end position is tracked.
    """
    full = squeeze(document)
    ends = {0}
    for chunk in chunks:
        piece = squeeze(chunk.content)
        ends = {
            end - repeated + len(piece)
            for end in ends
            for repeated in range(min(max_overlap, len(piece), end) + 1)
            if full[end - repeated : end] == piece[:repeated]
            and full.startswith(piece[repeated:], end)
        }
        assert ends, f"chunk {chunk.chunk_index} does not continue the text: {chunk.content!r}"
    assert len(full) in ends, "text after the last chunk is missing"


def assert_indexes_consecutive(chunks: Sequence[DocumentChunk]) -> None:
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))


# --- construction --------------------------------------------------------------------------


def test_defaults_and_protocol() -> None:
    chunker = MarkdownSectionChunker()
    assert chunker.chunk_size == DEFAULT_CHUNK_SIZE == 500
    assert chunker.overlap == DEFAULT_OVERLAP == 50
    assert isinstance(chunker, DocumentChunker)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"chunk_size": 49}, "chunk_size"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"chunk_size": 100.0}, "chunk_size"),
        ({"chunk_size": True}, "chunk_size"),
        ({"overlap": -1}, "overlap"),
        ({"chunk_size": 100, "overlap": 100}, "overlap"),
        ({"chunk_size": 100, "overlap": 150}, "overlap"),
        ({"overlap": "5"}, "overlap"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        MarkdownSectionChunker(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_smallest_valid_arguments_are_accepted() -> None:
    chunker = MarkdownSectionChunker(chunk_size=50, overlap=49)
    assert chunker.chunk_size == 50
    assert chunker.overlap == 49


@pytest.mark.parametrize("bad", [0, 49, -5, 2.5, True])
def test_bad_max_chunk_size_is_rejected_eagerly(bad: object) -> None:
    chunker = MarkdownSectionChunker()
    # Raised by the call itself, before the iterator is consumed.
    with pytest.raises(ValidationError) as info:
        chunker.chunk("a.md", "text", max_chunk_size=bad)  # type: ignore[arg-type]
    assert info.value.field == "max_chunk_size"


def test_chunk_returns_a_lazy_iterator() -> None:
    result = MarkdownSectionChunker().chunk("a.md", "# A\ntext\n")
    assert isinstance(result, types.GeneratorType)
    assert next(result).content == "# A\ntext"


# --- sections and headings -----------------------------------------------------------------


def test_each_heading_starts_a_section_with_its_heading_path() -> None:
    doc = (
        "# Guide\n"
        "Intro to the guide.\n"
        "\n"
        "## Install\n"
        "Run the installer.\n"
        "\n"
        "### On Linux\n"
        "Use apt.\n"
        "\n"
        "## Configure\n"
        "Edit the file.\n"
        "\n"
        "# Appendix\n"
        "More.\n"
    )
    chunks = chunks_of(doc)
    assert [c.content for c in chunks] == [
        "# Guide\nIntro to the guide.",
        "## Install\nRun the installer.",
        "### On Linux\nUse apt.",
        "## Configure\nEdit the file.",
        "# Appendix\nMore.",
    ]
    assert [c.metadata["heading_path"] for c in chunks] == [
        ["Guide"],
        ["Guide", "Install"],
        ["Guide", "Install", "On Linux"],
        ["Guide", "Configure"],
        ["Appendix"],
    ]
    assert {c.metadata["title"] for c in chunks} == {"Guide"}
    assert all(c.document_path == "docs/guide.md" for c in chunks)
    assert_indexes_consecutive(chunks)


def test_skipped_levels_and_closing_hashes() -> None:
    doc = "# Top #\nA\n### Deep ###\nB\n## Mid\nC\n###### Six\nD\n####### seven is text\n"
    chunks = chunks_of(doc)
    assert [c.metadata["heading_path"] for c in chunks] == [
        ["Top"],
        ["Top", "Deep"],
        ["Top", "Mid"],
        ["Top", "Mid", "Six"],
    ]
    assert chunks[-1].content == "###### Six\nD\n####### seven is text"


def test_text_before_the_first_heading_has_an_empty_heading_path() -> None:
    chunks = chunks_of("Preamble line.\n\n## Section\nBody.\n")
    assert [(c.content, c.metadata["heading_path"]) for c in chunks] == [
        ("Preamble line.", []),
        ("## Section\nBody.", ["Section"]),
    ]


def test_hash_without_space_and_indented_code_are_not_headings() -> None:
    doc = "# Title\n#hashtag line\n    # indented code\n   ## three spaces is a heading\nx\n"
    chunks = chunks_of(doc)
    assert [c.metadata["heading_path"] for c in chunks] == [
        ["Title"],
        ["Title", "three spaces is a heading"],
    ]
    assert "#hashtag line\n    # indented code" in chunks[0].content


@pytest.mark.parametrize("fence", ["```", "~~~", "````"])
def test_hash_lines_inside_fenced_code_are_not_headings(fence: str) -> None:
    doc = (
        "# Script\n"
        f"{fence}bash\n"
        "# install the package\n"
        "pip install thing\n"
        "## not a heading either\n"
        f"{fence}\n"
        "## After\n"
        "done\n"
    )
    chunks = chunks_of(doc)
    assert [c.metadata["heading_path"] for c in chunks] == [["Script"], ["Script", "After"]]
    assert "# install the package" in chunks[0].content
    assert "## not a heading either" in chunks[0].content


def test_fence_closes_only_with_the_same_marker() -> None:
    doc = "# A\n````\n```\n# inside\n~~~\n````\n# B\nx\n"
    chunks = chunks_of(doc)
    assert [c.metadata["heading_path"] for c in chunks] == [["A"], ["B"]]


def test_front_matter_is_kept_as_text_and_its_comments_are_not_headings() -> None:
    doc = "---\ntags: [a]\n# a yaml comment\n---\n# Real\nBody\n"
    chunks = chunks_of(doc)
    assert [c.content for c in chunks] == ["---\ntags: [a]\n# a yaml comment\n---", "# Real\nBody"]
    assert chunks[0].metadata["title"] == "Real"
    assert chunks[0].metadata["heading_path"] == []


def test_title_falls_back_to_the_base_name_without_extension() -> None:
    chunks = chunks_of("## Only a subsection\ntext\n", path="runbooks/deploy-prod.md")
    assert chunks[0].metadata["title"] == "deploy-prod"
    chunks = chunks_of("plain text", path="notes.txt")
    assert chunks[0].metadata["title"] == "notes"


def test_title_is_the_first_h1_even_if_it_comes_later() -> None:
    chunks = chunks_of("## Sub\na\n# Main\nb\n# Second\nc\n")
    assert {c.metadata["title"] for c in chunks} == {"Main"}


def test_whitespace_only_sections_are_dropped() -> None:
    chunks = chunks_of("\n\n   \n# A\n\n\n## B\n   \n\t\n# C\ntext\n")
    # A and B have nothing but their heading: the heading alone is still content.
    assert [c.content for c in chunks] == ["# A", "## B", "# C\ntext"]
    assert_indexes_consecutive(chunks)


@pytest.mark.parametrize("content", ["", " ", "\n\n\n", " \t\r\n \r "])
def test_empty_document_has_no_chunks(content: str) -> None:
    assert chunks_of(content) == []


def test_crlf_is_treated_like_lf() -> None:
    chunks = chunks_of("# A\r\none\r\n## B\r\ntwo\r\n")
    assert [c.content for c in chunks] == ["# A\none", "## B\ntwo"]


def test_small_adjacent_sections_are_not_merged() -> None:
    chunks = chunks_of("# A\na\n# B\nb\n# C\nc\n")
    assert len(chunks) == 3


# --- splitting long sections -----------------------------------------------------------------


def numbered_lines(count: int, width: int = 30) -> list[str]:
    return [f"line {i:04d} ".ljust(width, "x") for i in range(count)]


def test_long_section_is_split_on_line_boundaries_with_overlap() -> None:
    lines = numbered_lines(40)  # 40 lines of 30 chars (31 with the newline)
    doc = "# Long\n" + "\n".join(lines) + "\n"
    chunks = chunks_of(doc, size=200, overlap=40)
    assert len(chunks) > 5
    assert all(len(c.content) <= 200 for c in chunks)
    assert all(c.metadata["heading_path"] == ["Long"] for c in chunks)
    assert chunks[0].content.startswith("# Long\nline 0000")
    for chunk in chunks:
        # Cut on line boundaries: every line of a chunk is a whole line of the document,
        # except the first one, which may be the overlap's tail end of a line.
        for line in chunk.content.split("\n")[1:]:
            assert line in lines
    for previous, current in itertools.pairwise(chunks):
        # The overlap is the end of the previous piece (up to 40 chars, from a word start).
        first_line = current.content.split("\n")[0]
        assert previous.content.endswith(first_line)
        assert 0 < len(first_line) <= 40
    assert_reassembles(doc, chunks, max_overlap=40)
    assert_indexes_consecutive(chunks)


def test_heading_line_stays_in_the_first_piece_only() -> None:
    doc = "## Section Heading\n" + "\n".join(numbered_lines(30)) + "\n"
    chunks = chunks_of(doc, size=120, overlap=20)
    assert chunks[0].content.startswith("## Section Heading\n")
    assert all("Section Heading" not in c.content for c in chunks[1:])


def test_sections_do_not_overlap_each_other() -> None:
    doc = "# A\n" + "alpha " * 100 + "\n# B\n" + "beta " * 100 + "\n"
    chunks = chunks_of(doc, size=100, overlap=30)
    first_b = next(c for c in chunks if c.metadata["heading_path"] == ["B"])
    assert first_b.content.startswith("# B\nbeta")
    assert all("alpha" not in c.content for c in chunks if c.metadata["heading_path"] == ["B"])
    assert all("beta" not in c.content for c in chunks if c.metadata["heading_path"] == ["A"])


def test_text_without_headings_falls_back_to_size_based_splitting() -> None:
    # Fixed-width words, so a word cut short is never another word.
    words = [f"word{i:04d}" for i in range(600)]
    doc = " ".join(words)  # one paragraph, no newline, no heading
    chunks = chunks_of(doc, size=100, overlap=20, path="notes.txt")
    assert len(chunks) > 20
    assert all(len(c.content) <= 100 for c in chunks)
    assert all(c.metadata["heading_path"] == [] for c in chunks)
    # Cuts fall on spaces: every chunk is made of whole words.
    for chunk in chunks:
        assert all(token in words for token in chunk.content.split())
    # Consecutive pieces share the words at the boundary.
    # Consecutive pieces share the words at the boundary; the overlap starts at a word.
    for previous, current in itertools.pairwise(chunks):
        assert current.content.split()[0] in previous.content.split()[-3:]
    assert_reassembles(doc, chunks, max_overlap=20)


def test_a_single_very_long_line_without_spaces_is_cut_on_characters() -> None:
    doc = "".join(chr(ord("a") + i % 26) for i in range(10_000))
    chunks = chunks_of(doc, size=100, overlap=10)
    assert all(len(c.content) <= 100 for c in chunks)
    # No blank to cut at: each piece is exactly full, overlap included.
    assert all(len(c.content) == 100 for c in chunks[:-1])
    for previous, current in itertools.pairwise(chunks):
        assert current.content[:10] == previous.content[-10:]
    assert_reassembles(doc, chunks, max_overlap=10)


def test_korean_text_is_split_within_the_size_and_keeps_every_character() -> None:
    sentence = "배포 파이프라인에서 실패가 발생하면 롤백 절차를 따른다. "
    doc = "# 운영 가이드\n## 배포 실패 대응\n" + sentence * 40 + "\n" + "가나다라마바사" * 50 + "\n"
    chunks = chunks_of(doc, size=80, overlap=15)
    assert chunks[0].metadata["title"] == "운영 가이드"
    assert chunks[-1].metadata["heading_path"] == ["운영 가이드", "배포 실패 대응"]
    assert all(len(c.content) <= 80 for c in chunks)
    assert_reassembles(doc, chunks, max_overlap=15)
    assert_indexes_consecutive(chunks)


def test_zero_overlap_pieces_are_disjoint() -> None:
    doc = "\n".join(numbered_lines(50)) + "\n"
    chunks = chunks_of(doc, size=100, overlap=0)
    assert "".join(c.content.replace("\n", "") for c in chunks) == doc.replace("\n", "")


def test_long_whitespace_run_does_not_produce_a_repeat_only_chunk() -> None:
    words = " ".join(f"w{i}" for i in range(30))
    doc = "# A\n" + words + "\n" + "\n" * 300 + " " * 500 + "\nend\n"
    chunks = chunks_of(doc, size=60, overlap=20)
    assert chunks[-1].content == "end"
    for previous, current in itertools.pairwise(chunks):
        assert current.content not in previous.content
    assert_reassembles(doc, chunks, max_overlap=20)


def test_overlap_followed_only_by_blanks_is_not_a_chunk() -> None:
    # The line is cut inside its trailing blanks: the next piece would be the overlap words
    # plus blanks, a repeat of the previous chunk's end, and must be dropped.
    words = " ".join(f"word{i:02d}" for i in range(12))
    doc = "# A\n" + words + " " * 300 + "\nend\n"
    chunks = chunks_of(doc, size=60, overlap=20)
    assert [c.content for c in chunks][-1] == "end"
    for previous, current in itertools.pairwise(chunks):
        assert current.content not in previous.content
    assert_reassembles(doc, chunks, max_overlap=20)


# --- max_chunk_size ----------------------------------------------------------------------------


def test_max_chunk_size_caps_the_chunk_size() -> None:
    doc = "# T\n" + "\n".join(numbered_lines(100)) + "\n"
    capped = chunks_of(doc, size=500, overlap=50, max_chunk_size=120)
    assert all(len(c.content) <= 120 for c in capped)
    assert any(len(c.content) > 90 for c in capped)
    # The overlap shrinks with the size (50 * 120 // 500 = 12), so pieces still advance.
    assert_reassembles(doc, capped, max_overlap=12)
    uncapped = chunks_of(doc, size=500, overlap=50)
    assert len(capped) > len(uncapped)


def test_max_chunk_size_above_chunk_size_changes_nothing() -> None:
    doc = "# T\n" + "\n".join(numbered_lines(100)) + "\n"
    assert chunks_of(doc, size=300, max_chunk_size=2000) == chunks_of(doc, size=300)


def test_max_chunk_size_equal_to_overlap_still_terminates() -> None:
    doc = "x" * 1000
    chunks = chunks_of(doc, size=500, overlap=50, max_chunk_size=50)
    assert all(len(c.content) <= 50 for c in chunks)
    assert_reassembles(doc, chunks, max_overlap=5)


# --- property-style: random documents, several sizes -----------------------------------------

_VOCABULARY = [
    "deploy",
    "rollback",
    "kubernetes",
    "배포",
    "실패",
    "파이프라인",
    "x",
    "—",
    "🙂",
    "#",
    "`",
]


def random_word(rng: random.Random) -> str:
    if rng.random() < 0.05:
        # Longer than some chunk sizes; random letters, so it never repeats itself.
        return "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(40, 260)))
    return rng.choice(_VOCABULARY)


def random_document(rng: random.Random) -> str:
    lines: list[str] = []
    for _ in range(rng.randint(0, 120)):
        kind = rng.random()
        if kind < 0.12:
            lines.append("#" * rng.randint(1, 7) + " " + random_word(rng))
        elif kind < 0.16:
            lines.append(rng.choice(["```", "~~~", "```python"]))
        elif kind < 0.25:
            lines.append(" " * rng.randint(0, 6))
        else:
            count = rng.randint(1, 60)
            separator = rng.choice([" ", " ", "\t", ""])
            lines.append(separator.join(random_word(rng) for _ in range(count)))
    newline = rng.choice(["\n", "\r\n"])
    return newline.join(lines) + rng.choice(["", newline])


@pytest.mark.parametrize(
    ("size", "overlap", "max_chunk_size"),
    [
        (50, 0, None),
        (50, 10, None),
        (50, 49, None),
        (64, 20, None),
        (100, 30, None),
        (500, 50, None),
        (500, 50, 80),
        (2000, 200, None),
        (2000, 100, 700),
    ],
)
def test_random_documents_respect_every_guarantee(
    size: int, overlap: int, max_chunk_size: int | None
) -> None:
    rng = random.Random(f"{size}-{overlap}-{max_chunk_size}")
    effective = min(size, max_chunk_size or size)
    effective_overlap = overlap * effective // size
    # An overlap near the size advances a character or two per chunk: many chunks, fewer docs.
    documents = 8 if overlap * 2 > size else 40
    for _ in range(documents):
        doc = random_document(rng)
        chunks = chunks_of(doc, size=size, overlap=overlap, max_chunk_size=max_chunk_size)
        normalised = doc.replace("\r\n", "\n")
        assert all(0 < len(c.content) <= effective for c in chunks)
        assert all(c.content == c.content.strip() for c in chunks)
        assert all(c.content in normalised for c in chunks)
        assert_indexes_consecutive(chunks)
        assert_reassembles(normalised, chunks, max_overlap=effective_overlap)
        if not normalised.strip():
            assert chunks == []


# --- large input -------------------------------------------------------------------------------


def test_five_megabyte_document_streams_through() -> None:
    section = "## Part\n" + ("Some ordinary prose with words of text. " * 3 + "\n") * 40
    doc = "# Big\n" + section * (5_000_000 // len(section))
    assert len(doc) > 4_900_000
    count = 0
    longest = 0
    for chunk in MarkdownSectionChunker().chunk("big.md", doc):
        assert chunk.chunk_index == count
        count += 1
        longest = max(longest, len(chunk.content))
    assert count > 10_000
    assert longest <= 500


def test_five_megabyte_single_line_streams_through() -> None:
    doc = "abcdefghij" * 500_000
    chunks = MarkdownSectionChunker().chunk("big.txt", doc)
    first = next(chunks)
    assert first.content == doc[:500]
    rest = sum(1 for _ in chunks)
    # 500-char pieces advancing 450 characters at a time.
    assert rest + 1 == -(-(len(doc) - 50) // 450)


# --- packing rules, pinned with literal pieces (issue 15: mutation survivors) -------------
# Expected chunks below are worked out by hand from the rules in the module docstring.

ALPHA = "alpha bravo charlie delta echo foxtrot golf hotel"  # 49 chars
INDIA = "india juliet kilo lima mike november oscar papa quebec romeo sierra tango x-ray"  # 79


def test_a_line_that_fits_a_fresh_piece_moves_whole_to_the_next_chunk() -> None:
    # size 100, overlap 20: any line of up to 80 characters (newline included) fits whole
    # after an overlap. INDIA + "\n" is exactly 80, the 50 characters of room left after
    # ALPHA would take most of it: it must not be cut there but start the next piece.
    assert (len(ALPHA), len(INDIA)) == (49, 79)
    chunks = chunks_of(ALPHA + "\n" + INDIA + "\n", size=100, overlap=20)
    assert [c.content for c in chunks] == [ALPHA, "foxtrot golf hotel\n" + INDIA]


def test_a_line_one_longer_than_a_fresh_piece_fills_the_room_left() -> None:
    # 81 characters can never be sure to fit after an overlap: it fills the 50 left after
    # ALPHA, cut after the last blank in that room ("... oscar papa "); the overlap, the
    # last 20 characters of that piece, starts right after a blank.
    line = INDIA + "s"
    chunks = chunks_of(ALPHA + "\n" + line + "\n", size=100, overlap=20)
    assert [c.content for c in chunks] == [
        ALPHA + "\nindia juliet kilo lima mike november oscar papa",
        "november oscar papa quebec romeo sierra tango x-rays",
    ]


def test_a_long_line_is_not_cut_into_a_room_less_than_half_a_fresh_piece() -> None:
    # size 100, overlap 0: a fresh piece holds 100; a long line starts a new piece rather
    # than fill a room under 50. 50 characters of room is "at least half": it is filled.
    long_line = "x" * 150
    room_50 = "a" * 49 + "\n" + long_line + "\n"
    assert [c.content for c in chunks_of(room_50, size=100, overlap=0)] == [
        "a" * 49 + "\n" + "x" * 50,
        "x" * 100,
    ]
    room_49 = "a" * 50 + "\n" + long_line + "\n"
    assert [c.content for c in chunks_of(room_49, size=100, overlap=0)] == [
        "a" * 50,
        "x" * 100,
        "x" * 50,
    ]


@pytest.mark.parametrize("blank", [" ", "\t"])
def test_a_cut_at_a_blank_keeps_the_piece_at_least_half_full(blank: str) -> None:
    # 50 characters of room after "a" * 49: a blank at offset 25 of the long line (half
    # the room) is a cut point; one at offset 24 is not, the line is cut on characters.
    at_half = "x" * 25 + blank + "y" * 124
    chunks = chunks_of("a" * 49 + "\n" + at_half + "\n", size=100, overlap=0)
    assert [c.content for c in chunks] == ["a" * 49 + "\n" + "x" * 25, "y" * 100, "y" * 24]
    before_half = "x" * 24 + blank + "y" * 125
    chunks = chunks_of("a" * 49 + "\n" + before_half + "\n", size=100, overlap=0)
    assert [c.content for c in chunks] == [
        "a" * 49 + "\n" + "x" * 24 + blank + "y" * 25,
        "y" * 100,
    ]


def test_an_overlap_that_starts_at_a_word_keeps_that_word() -> None:
    # ALPHA + "\n" is 50 characters; its last 19 start exactly at "foxtrot".
    chunks = chunks_of(ALPHA + "\n" + INDIA + "\n", size=100, overlap=19)
    assert [c.content for c in chunks] == [ALPHA, "foxtrot golf hotel\n" + INDIA]


def test_an_overlap_that_starts_inside_a_word_starts_at_the_next_one() -> None:
    # The last 22 characters start at "cho" of "echo": the overlap starts at "foxtrot".
    chunks = chunks_of(ALPHA + "\n" + "z" * 75 + "\n", size=100, overlap=22)
    assert [c.content for c in chunks] == [ALPHA, "foxtrot golf hotel\n" + "z" * 75]


@pytest.mark.parametrize("overlap", [40, 42])
def test_a_high_overlap_keeps_whole_words_and_its_full_length(overlap: int) -> None:
    # size 50: each piece is 40 characters of the previous one (from a word start; with
    # 42 the cut falls inside "bbbb", so it moves on to "cccc") and 10 new ones.
    line = "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk llll mmmm"
    chunks = chunks_of(line + "\n", size=50, overlap=overlap)
    assert [c.content for c in chunks] == [
        "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj",
        "cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk llll",
        "eeee ffff gggg hhhh iiii jjjj kkkk llll mmmm",
    ]


def test_a_capped_size_shrinks_the_overlap_in_proportion() -> None:
    # chunk_size 100 with overlap 40, capped at 50: the overlap is 40 * 50 // 100 = 20.
    line = "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk llll mmmm"
    chunks = chunks_of(line + "\n", size=100, overlap=40, max_chunk_size=50)
    assert [c.content for c in chunks] == [
        "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj",
        "gggg hhhh iiii jjjj kkkk llll mmmm",
    ]
