"""The pure parts of the extraction package, pinned with literal values (issue 15).

``rows`` (table rows as ``name: value`` lines), ``base`` (sizes, reasons, the time
limit) and ``archive`` (the zip check before an Office library opens a file). Expected
values are written out by hand, never computed by the code under test.
"""

from __future__ import annotations

import datetime as dt
import io
import time
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import IO

import pytest

from knowledge.core.errors import ExtractionError
from knowledge.extraction.archive import check_office_archive, core_title, open_office_package
from knowledge.extraction.base import (
    DEFAULT_LIMITS,
    NO_SECTION,
    REASON_ARCHIVE_BOMB,
    REASON_CORRUPT,
    REASON_ENCRYPTED_PDF,
    REASON_NO_TEXT_LAYER,
    REASON_TOO_LARGE,
    REASON_UNSUPPORTED,
    Block,
    ExtractedDocument,
    ExtractionLimits,
    corrupt,
    human_size,
    timed,
    too_large,
)
from knowledge.extraction.rows import row_blocks

SHEET = {"sheet": "Prices"}

# --- rows -----------------------------------------------------------------------------


def lines_of(rows: list[list[object]], first_row: int = 1) -> list[tuple[str, int | None]]:
    blocks = list(row_blocks(rows, SHEET, first_row=first_row))
    assert all(block.section is SHEET for block in blocks)
    return [(block.text, block.position) for block in blocks]


def test_rows_become_name_value_lines_numbered_from_the_first_row() -> None:
    rows: list[list[object]] = [["name", "price"], ["tea", 3], ["coffee", 4.5]]
    assert lines_of(rows) == [("name: tea; price: 3", 2), ("name: coffee; price: 4.5", 3)]
    assert lines_of(rows, first_row=10) == [
        ("name: tea; price: 3", 11),
        ("name: coffee; price: 4.5", 12),
    ]


def test_leading_empty_rows_are_skipped_and_the_first_row_with_a_value_is_the_header() -> None:
    rows: list[list[object]] = [[], [None, ""], ["", "item", None], ["x", "pen", "blue"]]
    # The header's empty names are "column N" (1-based); a cell past the header too.
    assert lines_of(rows) == [("column 1: x; item: pen; column 3: blue", 4)]


def test_cells_beyond_the_header_are_named_by_their_column() -> None:
    rows: list[list[object]] = [["a"], ["1", "2", "3"]]
    assert lines_of(rows) == [("a: 1; column 2: 2; column 3: 3", 2)]


def test_empty_cells_are_left_out_and_an_empty_row_gives_nothing() -> None:
    rows: list[list[object]] = [
        ["a", "b", "c"],
        [None, "", None],
        ["", "mid", None],
        [0, None, 0.0],
    ]
    assert lines_of(rows) == [("b: mid", 3), ("a: 0; c: 0", 4)]


def test_no_header_no_blocks() -> None:
    assert lines_of([]) == []
    assert lines_of([[None], [""]]) == []
    assert lines_of([["only", "header"]]) == []


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "TRUE"),
        (False, "FALSE"),
        (7, "7"),
        (-2.0, "-2"),
        (3.25, "3.25"),
        (999_999_999_999_999.0, "999999999999999"),
        (1e15, "1E+15"),  # as Excel shows it (round 8; was "1000000000000000.0")
        (-1e15, "-1E+15"),
        (0.1 + 0.2, "0.3"),  # Excel's 15 significant digits
        (1 / 3, "0.333333333333333"),
        (dt.datetime(2024, 1, 2), "2024-01-02"),
        (dt.datetime(2024, 1, 2, 10, 30), "2024-01-02T10:30:00"),
        (dt.datetime(2024, 1, 2, 0, 0, 1), "2024-01-02T00:00:01"),
        (dt.date(2024, 1, 2), "2024-01-02"),
        (dt.time(10, 30), "10:30:00"),
        ("  two\n words\t here ", "two words here"),
    ],
)
def test_cell_values_as_text(value: object, text: str) -> None:
    assert lines_of([["v"], [value]]) == [(f"v: {text}", 2)]


# --- base -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1024 * 1024 - 1, "1024.0 KiB"),
        (1024 * 1024, "1.0 MiB"),
        (5 * 1024 * 1024 + 512 * 1024, "5.5 MiB"),
        (100 * 1024 * 1024, "100.0 MiB"),  # 1 KiB off in either factor would give 99.9
    ],
)
def test_human_size(size: int, text: str) -> None:
    assert human_size(size) == text


def test_reasons_and_their_errors() -> None:
    assert REASON_ENCRYPTED_PDF == "encrypted PDF"
    assert REASON_NO_TEXT_LAYER == "no text layer (scanned image; OCR not supported)"
    assert REASON_UNSUPPORTED == "unsupported format"
    assert REASON_TOO_LARGE == "too large"
    assert REASON_CORRUPT == "corrupt file"
    assert REASON_ARCHIVE_BOMB == "archive bomb"
    assert isinstance(corrupt("x"), ExtractionError)
    assert str(corrupt("bad header")) == "corrupt file: bad header"
    assert isinstance(too_large("x"), ExtractionError)
    assert str(too_large("over 5 MiB")) == "too large: over 5 MiB"


def test_default_limits_and_defaults() -> None:
    limits = (
        DEFAULT_LIMITS.max_unpacked_bytes,
        DEFAULT_LIMITS.max_pdf_pages,
        DEFAULT_LIMITS.max_seconds,
    )
    assert limits == (268_435_456, 2000, 120.0)
    block = Block("text")
    assert (block.section, block.position) == ({}, None)
    assert block.section is NO_SECTION
    with pytest.raises(TypeError):
        NO_SECTION["x"] = 1  # type: ignore[index]
    document = ExtractedDocument("pdf", "application/pdf")
    assert (document.text, document.blocks, document.position_key, document.title) == (
        None,
        None,
        None,
        None,
    )
    assert document.warnings == []
    assert ExtractedDocument("pdf", "application/pdf").warnings is not document.warnings


class ManualClock:
    """A clock the test moves: what the extractor and the consumer "spend" is exact."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def slow_blocks(count: int, pause: float, clock: ManualClock) -> Iterator[Block]:
    for i in range(count):
        clock.now += pause  # the extractor's own time for this block
        yield Block(f"b{i}", position=i + 1)


def test_timed_passes_every_block_through_when_within_the_limit() -> None:
    blocks = [Block("a"), Block("b", position=2)]
    assert list(timed(blocks, 5.0)) == blocks
    assert list(timed([], 0.0)) == []


def test_timed_stops_once_the_extractor_itself_spent_the_limit() -> None:
    clock = ManualClock()
    taken: list[str] = []
    with pytest.raises(ExtractionError) as caught:
        taken.extend(block.text for block in timed(slow_blocks(10, 0.03, clock), 0.05, clock=clock))
    assert str(caught.value) == "too large: extraction took more than 0.05 s"
    # The time adds up across blocks: the first one (0.03 s) passes, the second does not.
    assert taken == ["b0"]


def test_timed_allows_exactly_the_limit() -> None:
    clock = ManualClock()
    blocks = timed(slow_blocks(2, 0.25, clock), 0.5, clock=clock)
    assert [block.text for block in blocks] == ["b0", "b1"]


def test_timed_counts_the_extractors_cpu_time_not_its_waits_for_a_cpu() -> None:
    """By default the clock is the extracting thread's CPU time: an extractor whose
    thread waits (here it sleeps, as a thread waits for a CPU on a loaded machine) is
    not over a limit its work is within. On wall time, a 100,000-row sheet was refused
    as too large under CI load."""

    def waiting_blocks(count: int) -> Iterator[Block]:
        for i in range(count):
            time.sleep(0.05)  # off the CPU
            yield Block(f"b{i}", position=i + 1)

    assert [block.text for block in timed(waiting_blocks(4), 0.1)] == ["b0", "b1", "b2", "b3"]


def test_timed_does_not_count_the_consumers_time() -> None:
    clock = ManualClock()
    texts = []
    for block in timed(slow_blocks(3, 0.01, clock), 0.05, clock=clock):
        clock.now += 1.0  # the consumer's time, far over the limit in total
        texts.append(block.text)
    assert texts == ["b0", "b1", "b2"]


# --- archive --------------------------------------------------------------------------


def zip_of(members: dict[str, bytes], *, compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in members.items():
            archive.writestr(
                zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0)), data, compress_type=compression
            )
    return buffer.getvalue()


def check(data: bytes, cap: int = 1000) -> str | None:
    try:
        check_office_archive(data, ExtractionLimits(max_unpacked_bytes=cap), "docx")
    except ExtractionError as exc:
        return str(exc)
    return None


def test_an_archive_exactly_at_the_cap_passes_one_byte_more_does_not() -> None:
    # Two members: the count is over the whole archive, not per member.
    assert check(zip_of({"a.xml": b"a" * 600, "b.xml": b"b" * 400})) is None
    data = zip_of({"a.xml": b"a" * 600, "b.xml": b"b" * 401})
    # Stored, so the archive is bigger than its content: merely big, not a bomb.
    assert len(data) == 1195
    assert check(data) == "too large: more than 1000 B uncompressed"


def test_a_highly_compressed_archive_over_the_cap_is_a_bomb() -> None:
    data = zip_of({"word/document.xml": b"0" * 200_000}, compression=zipfile.ZIP_DEFLATED)
    packed = len(data)  # a few hundred bytes, depending on the zlib build
    assert 100 < packed < 1000
    # 250x the packed size: over the 100x a real Office file never reaches.
    assert check(data, cap=250 * packed) == (
        f"archive bomb: {packed} B expands to more than {250 * packed / 1024:.1f} KiB (over 250x)"
    )
    # Exactly 100x the packed size is still a bomb; one byte less is only too large.
    assert check(data, cap=100 * packed) == (
        f"archive bomb: {packed} B expands to more than {100 * packed / 1024:.1f} KiB (over 100x)"
    )
    assert check(data, cap=100 * packed - 1) == (
        f"too large: more than {(100 * packed - 1) / 1024:.1f} KiB uncompressed"
    )


def test_too_many_members_is_a_bomb_however_small() -> None:
    assert check(zip_of({f"{i}.xml": b"" for i in range(10_000)})) is None
    many = zip_of({f"{i}.xml": b"" for i in range(10_001)})
    assert check(many) == "archive bomb: 10001 files in the archive (at most 10000)"


def test_an_ole_container_is_named_as_such() -> None:
    ole = bytes.fromhex("d0cf11e0a1b11ae1") + b"\0" * 504
    assert check(ole) == (
        "corrupt file: not a docx zip package but an OLE container: a password-protected"
        " (encrypted) or legacy Office file; remove the password or save it as .docx"
    )


def test_not_a_zip_is_corrupt() -> None:
    assert (
        check(b"PK not really")
        == "corrupt file: not a valid docx file (zip: File is not a zip file)"
    )
    assert check(b"") == "corrupt file: not a valid docx file (zip: File is not a zip file)"


def test_an_encrypted_member_is_named() -> None:
    data = bytearray(zip_of({"word/document.xml": b"<w/>"}))
    central = data.index(b"PK\x01\x02")
    data[central + 8] |= 0x01  # the central directory's "encrypted" flag bit
    assert check(bytes(data)) == "corrupt file: encrypted zip member 'word/document.xml'"


def test_a_damaged_member_is_named() -> None:
    data = bytearray(zip_of({"word/document.xml": b"<w:document/>"}))
    data[data.index(b"<w:document/>")] = ord("[")  # content no longer matches its CRC
    assert check(bytes(data)) == (
        "corrupt file: damaged zip member 'word/document.xml'"
        " (Bad CRC-32 for file 'word/document.xml')"
    )


def test_the_check_holds_one_step_of_a_member_in_memory_not_the_whole_member() -> None:
    # 64 MiB of zeros packs into about 64 KiB (so 1 MiB is under 100x: too large, not a
    # bomb); the check stops after the second 1 MiB step. Reading the member whole would
    # hold all 64 MiB at once.
    data = zip_of({"word/document.xml": bytes(64 * 1024 * 1024)}, compression=zipfile.ZIP_DEFLATED)
    tracemalloc.start()
    try:
        message = check(data, cap=1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert message == "too large: more than 1.0 MiB uncompressed"
    assert peak < 16 * 1024 * 1024


def test_a_library_error_on_opening_is_corrupt_naming_the_document_and_the_error() -> None:
    def load() -> tuple[Callable[[IO[bytes]], object], tuple[type[Exception], ...]]:
        def opener(stream: IO[bytes]) -> object:
            raise KeyError("word/document.xml")

        return opener, ()

    with pytest.raises(ExtractionError) as info:
        open_office_package(zip_of({"a.xml": b"x"}), DEFAULT_LIMITS, "docx", "Word file", load)
    assert (
        str(info.value) == "corrupt file: not a readable Word file (KeyError: 'word/document.xml')"
    )


def test_a_blank_or_missing_core_title_is_none() -> None:
    assert core_title(SimpleNamespace(title=None)) is None
    assert core_title(SimpleNamespace(title="  ")) is None
    assert core_title(SimpleNamespace(title=" Runbook ")) == "Runbook"
