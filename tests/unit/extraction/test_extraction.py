from __future__ import annotations

import codecs

import pytest

from knowledge.core.errors import ExtractionError, ValidationError
from knowledge.core.model import IndexOptions
from knowledge.extraction import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DOCUMENT_PATTERNS,
    SUPPORTED_EXTENSIONS,
    ExtractedText,
    extract_document,
    extract_text,
    is_supported,
)


def test_utf8_markdown() -> None:
    result = extract_text("docs/guide.md", "# 가이드\nnaïve café ✓\n".encode())
    assert result == ExtractedText(
        text="# 가이드\nnaïve café ✓\n", content_type="text/markdown", warnings=()
    )


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        ("a.md", "text/markdown"),
        ("a.MD", "text/markdown"),
        ("dir/b.markdown", "text/markdown"),
        ("notes.txt", "text/plain"),
        ("NOTES.TXT", "text/plain"),
        ("agent/ctx/x.y.Txt", "text/plain"),
    ],
)
def test_content_type_follows_the_extension_case_insensitively(
    name: str, content_type: str
) -> None:
    assert extract_text(name, b"hello").content_type == content_type
    assert is_supported(name)


def test_supported_extensions() -> None:
    assert SUPPORTED_EXTENSIONS == (
        ".adoc",
        ".csv",
        ".docx",
        ".htm",
        ".html",
        ".json",
        ".markdown",
        ".md",
        ".pdf",
        ".pptx",
        ".rst",
        ".toml",
        ".txt",
        ".xlsx",
        ".xml",
        ".yaml",
        ".yml",
    )


@pytest.mark.parametrize(
    ("name", "data", "kind", "content_type"),
    [
        ("guide.rst", b"Deploy\n======\n\nRun ``make deploy``.\n", "rst", "text/x-rst"),
        ("pyproject.toml", b'[project]\nname = "walrus"\n', "text", "text/plain"),
        ("manual.adoc", b"= Walrus\n\n== Deploy\nRun it.\n", "asciidoc", "text/asciidoc"),
    ],
)
def test_repository_text_formats_are_read_as_text(
    name: str, data: bytes, kind: str, content_type: str
) -> None:
    # A repository's docs and config: they vanished silently before (not in the registry).
    document = extract_document(name, data)
    assert (document.source_type, document.content_type) == (kind, content_type)
    assert document.text is not None
    assert document.text.strip() == data.decode().strip()
    assert "*." + name.rsplit(".", 1)[1] in DOCUMENT_PATTERNS  # the default patterns


def test_utf8_bom_is_stripped() -> None:
    result = extract_text("a.md", codecs.BOM_UTF8 + b"# Title\n")
    assert result.text == "# Title\n"
    assert result.warnings == ()


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_with_bom_is_decoded_not_rejected_as_binary(encoding: str) -> None:
    bom = codecs.BOM_UTF16_LE if encoding.endswith("le") else codecs.BOM_UTF16_BE
    result = extract_text("a.txt", bom + "안녕\r\nhello\r\n".encode(encoding))
    assert result.text == "안녕\nhello\n"
    assert result.warnings == ()


def test_invalid_utf8_bytes_are_replaced_and_reported() -> None:
    # Damaged UTF-8 (its other non-ASCII characters are valid UTF-8), not another encoding.
    data = b"caf\xe9 ok \xff\xfe end " + "서울 데이터".encode()
    result = extract_text("a.txt", data)
    assert result.text == "caf\ufffd ok \ufffd\ufffd end 서울 데이터"
    assert len(result.warnings) == 1
    warning = result.warnings[0]
    assert "3 invalid UTF-8 bytes" in warning
    assert "U+FFFD" in warning
    assert "offset 3" in warning


def test_invalid_byte_offset_counts_the_bom() -> None:
    result = extract_text("a.txt", codecs.BOM_UTF8 + b"ab\x80")
    assert result.text == "ab\ufffd"
    assert result.warnings == (
        "1 invalid UTF-8 byte replaced with U+FFFD (first at byte offset 5)",
    )


def test_a_truncated_multibyte_character_at_the_end_is_reported() -> None:
    data = "끝".encode()[:2]
    result = extract_text("a.md", b"x" + data)
    assert result.text == "x\ufffd\ufffd"
    assert "2 invalid UTF-8 bytes" in result.warnings[0]


def test_a_literal_replacement_character_is_not_counted_as_invalid() -> None:
    result = extract_text("a.md", "already \ufffd here".encode())
    assert result.text == "already \ufffd here"
    assert result.warnings == ()


def test_nul_byte_means_binary() -> None:
    data = b"PK\x03\x04" + b"\x00" * 20 + b"rest"
    with pytest.raises(ExtractionError, match=r"binary content \(NUL byte at offset 4\)"):
        extract_text("archive.txt", data)


def test_nul_byte_after_the_sniffed_prefix_is_not_checked() -> None:
    data = b"a" * 8192 + b"\x00"
    assert extract_text("a.txt", data).text == "a" * 8192 + "\x00"


def test_many_control_bytes_mean_binary() -> None:
    data = bytes([0x01, 0x02, 0x03, 0x10, 0x7F]) * 40 + b"some text" * 10
    with pytest.raises(ExtractionError, match=r"binary content .*control bytes"):
        extract_text("blob.md", data)


def test_a_few_control_bytes_and_ansi_colours_are_text() -> None:
    data = b"\x1b[31merror\x1b[0m: failed\x07\n\tindented\x0c\n" * 20
    result = extract_text("build.txt", data)
    assert "\x1b[31merror" in result.text


def test_oversize_document_names_size_and_limit() -> None:
    with pytest.raises(ExtractionError) as info:
        extract_text("big.md", b"x" * 2048, max_bytes=1024)
    message = str(info.value)
    assert "2048 bytes" in message
    assert "1024 bytes" in message
    assert "limit" in message


def test_document_exactly_at_the_limit_is_accepted() -> None:
    assert extract_text("a.md", b"x" * 1024, max_bytes=1024).text == "x" * 1024


def test_default_limit_is_64_mib_and_matches_index_options() -> None:
    assert DEFAULT_MAX_DOCUMENT_BYTES == 64 * 1024 * 1024
    assert IndexOptions().max_document_bytes == DEFAULT_MAX_DOCUMENT_BYTES
    too_big = b"x" * (DEFAULT_MAX_DOCUMENT_BYTES + 1)
    with pytest.raises(ExtractionError, match=str(DEFAULT_MAX_DOCUMENT_BYTES)):
        extract_text("a.txt", too_big)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_bad_max_bytes_is_a_validation_error(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        extract_text("a.md", b"x", max_bytes=bad)  # type: ignore[arg-type]
    assert info.value.field == "max_bytes"


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("setup.exe", "'.exe'"),
        ("photo.PNG", "'.png'"),
        (".env", "no extension"),  # a dot file (round 8: Makefile and README are read as text)
        ("dir.md/.gitignore", "no extension"),
    ],
)
def test_unsupported_extension_names_it_and_the_supported_ones(name: str, shown: str) -> None:
    assert not is_supported(name)
    with pytest.raises(ExtractionError) as info:
        extract_text(name, b"text")
    message = str(info.value)
    assert shown in message
    assert message.startswith("unsupported format")
    for extension in (".md", ".markdown", ".txt", ".pdf", ".docx", ".xlsx"):
        assert extension in message


def test_unsupported_extension_is_reported_before_reading_the_size() -> None:
    with pytest.raises(ExtractionError, match="unsupported"):
        extract_text("x.exe", b"x" * 100, max_bytes=10)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"a\r\nb\r\n", "a\nb\n"),
        (b"a\rb\r", "a\nb\n"),
        (b"a\r\n\r\nb", "a\n\nb"),
        (b"a\n\rb", "a\n\nb"),
    ],
)
def test_newlines_are_normalised(raw: bytes, expected: str) -> None:
    assert extract_text("a.txt", raw).text == expected


def test_empty_document_is_no_text() -> None:
    # Round 8: as an empty DOCX is (was: empty text, "indexed" with 0 chunks).
    with pytest.raises(ExtractionError, match=r"^no text: empty or whitespace only"):
        extract_text("empty.md", b"")
