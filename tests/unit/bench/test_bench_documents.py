"""bench.corpora.documents helpers the format benchmarks rely on, on hand-made inputs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.corpora.documents import document_key, man_source, strip_name_section


def test_document_key_is_the_page_whatever_the_format() -> None:
    assert document_key("2/fork.2.md") == "2/fork.2"
    assert document_key("2/fork.2.pdf") == "2/fork.2"
    assert document_key("2/fork.2.PDF") == "2/fork.2"
    assert document_key("3/size_t.3type.docx") == "3/size_t.3type"
    assert document_key("7/man.7.html") == "7/man.7"
    assert document_key("2/fork.2.txt") == "2/fork.2"
    # Not a format extension: the path stays as it is.
    assert document_key("2/fork.2") == "2/fork.2"
    assert document_key("README") == "README"


def test_man_source_of_a_corpus_page() -> None:
    assert man_source("2/fork.2.md") == Path("/usr/share/man/man2/fork.2.gz")
    assert man_source("3/size_t.3type.md") == Path("/usr/share/man/man3/size_t.3type.gz")


def test_strip_name_section_drops_only_the_name_section() -> None:
    source = (
        ".TH fork 2 2023-02-05\n"
        ".SH NAME\n"
        "fork \\- create a child process\n"
        ".SH LIBRARY\n"
        "Standard C library\n"
        ".SH DESCRIPTION\n"
        "NAME is a word here.\n"
    )
    assert strip_name_section(source) == (
        ".TH fork 2 2023-02-05\n"
        ".SH LIBRARY\n"
        "Standard C library\n"
        ".SH DESCRIPTION\n"
        "NAME is a word here.\n"
    )


def test_strip_name_section_with_a_quoted_heading_and_no_following_section() -> None:
    assert strip_name_section('.TH x 3\n.SH "NAME"\nx \\- y\n') == ".TH x 3\n"
    assert strip_name_section(".TH x 3\n.SH SYNOPSIS\nx\n") == ".TH x 3\n.SH SYNOPSIS\nx\n"
