"""Each document format: its text, and the citation metadata its chunks carry.

Files are made here with the libraries people make them with (``document_files``); the
expected values are literals written from what each file was made to hold.
"""

from __future__ import annotations

from typing import Any

import document_files as files
import pytest

from knowledge.core.errors import ExtractionError
from knowledge.core.model import DocumentChunk, IndexOptions
from knowledge.extraction import (
    DOCUMENT_PATTERNS,
    extract_document,
    extract_text,
    is_supported,
    source_type_of,
)
from knowledge.ingest.chunking import MarkdownSectionChunker


def chunks(name: str, data: bytes, size: int = 500) -> list[DocumentChunk]:
    document = extract_document(name, data)
    assert document.blocks is not None
    return list(
        MarkdownSectionChunker(size, 50).chunk_blocks(
            name, document.blocks, title=document.title, position_key=document.position_key
        )
    )


def meta(chunk: DocumentChunk) -> dict[str, Any]:
    return dict(chunk.metadata)


# --- PDF ------------------------------------------------------------------------------------


def test_pdf_text_is_per_page_in_order() -> None:
    data = files.pdf(["First page about kubernetes.", "Second page about rollbacks."])
    result = extract_text("handbook.pdf", data)
    assert result.content_type == "application/pdf"
    assert result.text == "First page about kubernetes.\nSecond page about rollbacks."


def test_pdf_chunks_cite_their_page() -> None:
    data = files.pdf(["alpha " * 20, "bravo " * 20, "charlie " * 20], title="Ops Handbook")
    found = chunks("handbook.pdf", data, size=200)
    pages = {(c.content.split()[-1], meta(c).get("page"), meta(c).get("page_end")) for c in found}
    assert ("alpha", 1, None) in pages
    assert any(word == "charlie" and page in (2, 3) for word, page, _ in pages)
    assert all(meta(c)["title"] == "Ops Handbook" for c in found)


def test_a_pdf_chunk_spanning_pages_gives_first_and_last() -> None:
    data = files.pdf(["short one", "short two", "short three"])
    (only,) = chunks("notes.pdf", data)
    assert only.content == "short one\nshort two\nshort three"
    assert meta(only)["page"] == 1
    assert meta(only)["page_end"] == 3
    assert meta(only)["title"] == "notes"  # no Title in the PDF: the file name


def test_encrypted_pdf_is_refused_with_its_reason() -> None:
    with pytest.raises(ExtractionError) as info:
        extract_document("secret.pdf", files.pdf(["classified"], password="pw"))
    assert str(info.value) == "encrypted PDF"


def test_a_pdf_with_only_an_owner_password_is_readable_and_indexed() -> None:
    # Permissions (print, copy) without a password to open: the text is there to read.
    data = files.pdf(["owner only protected text"], password="")
    assert extract_text("restricted.pdf", data).text == "owner only protected text"


def test_scanned_pdf_has_no_text_layer() -> None:
    document = extract_document("scan.pdf", files.scanned_pdf(3))
    with pytest.raises(ExtractionError) as info:
        list(document.blocks or ())
    assert str(info.value) == "no text layer (scanned image; OCR not supported)"


@pytest.mark.parametrize(
    "data",
    [b"%PDF-1.7\n garbage that is not a PDF", b"", b"\x00\x01\x02 random"],
    ids=["garbage", "empty", "binary"],
)
def test_corrupt_pdf_is_a_corrupt_file(data: bytes) -> None:
    with pytest.raises(ExtractionError, match=r"^corrupt file: not a readable PDF"):
        extract_document("broken.pdf", data)


def test_a_pdf_over_the_page_limit_is_too_large_before_any_page_is_read() -> None:
    with pytest.raises(ExtractionError) as info:
        extract_document("huge.pdf", files.raw_pdf(2001))
    assert str(info.value) == "too large: 2001 pages, over the limit of 2000"


def test_a_pdf_at_the_page_limit_is_read() -> None:
    document = extract_document("long.pdf", files.raw_pdf(2000, text="page text"))
    blocks = list(document.blocks or ())
    assert len(blocks) == 2000
    assert blocks[-1].position == 2000


def test_deeply_nested_pdf_objects_do_not_hang_or_crash() -> None:
    # 200,000 nested arrays in a page dictionary: PDFium caps its parser's depth.
    text = extract_text("deep.pdf", files.raw_pdf(1, text="still readable", nesting=200_000))
    assert text.text == "still readable"


# --- DOCX -----------------------------------------------------------------------------------

GUIDE = [
    ("h1", "Guide"),
    ("p", "Intro text for everyone."),
    ("h2", "Install"),
    ("bullet", "download the package"),
    ("number", "run the installer"),
    ("table", [["Platform", "Command"], ["Linux", "apt install kb"]]),
    ("h2", "Usage"),
    ("p", "Search with kb search."),
    ("h3", "Filters"),
    ("p", "Filter by source type."),
]


def test_docx_text_keeps_lists_and_table_rows() -> None:
    text = extract_text("guide.docx", files.docx(GUIDE)).text
    assert text.splitlines() == [
        "Guide",
        "Intro text for everyone.",
        "",
        "Install",
        "- download the package",
        "1. run the installer",  # a numbered item with its number (round 8)
        "Platform | Command",
        "Linux | apt install kb",
        "",
        "Usage",
        "Search with kb search.",
        "",
        "Filters",
        "Filter by source type.",
    ]


def test_docx_headings_give_the_heading_path_and_sections_never_merge() -> None:
    found = chunks("guide.docx", files.docx(GUIDE, title="The Guide"))
    assert [(c.content.splitlines()[0], meta(c)["heading_path"]) for c in found] == [
        ("Guide", ["Guide"]),
        ("Install", ["Guide", "Install"]),
        ("Usage", ["Guide", "Usage"]),
        ("Filters", ["Guide", "Usage", "Filters"]),
    ]
    assert {meta(c)["title"] for c in found} == {"The Guide"}


def test_corrupt_docx_is_a_corrupt_file() -> None:
    data = files.docx(GUIDE)
    with pytest.raises(ExtractionError, match=r"^corrupt file: "):
        extract_document("cut.docx", data[: len(data) // 2])


def test_password_protected_office_file_is_named_as_such() -> None:
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600
    with pytest.raises(ExtractionError, match=r"^corrupt file: .*password-protected"):
        extract_document("locked.docx", ole)


# --- PPTX -----------------------------------------------------------------------------------


def test_pptx_is_one_section_per_slide_with_title_body_and_notes() -> None:
    data = files.pptx(
        [
            ("Welcome", ["Agenda for today", "Questions at the end"], "Greet the room"),
            ("Rollback plan", ["Run the rollback job"], ""),
        ]
    )
    found = chunks("deck.pptx", data)
    assert [(c.content, meta(c)["slide"], meta(c)["heading_path"]) for c in found] == [
        (
            "Welcome\nAgenda for today\nQuestions at the end\nNotes: Greet the room",
            1,
            ["Welcome"],
        ),
        ("Rollback plan\nRun the rollback job", 2, ["Rollback plan"]),
    ]


# --- XLSX and CSV ---------------------------------------------------------------------------


def test_xlsx_rows_read_column_value_per_sheet_with_row_numbers() -> None:
    data = files.xlsx(
        {
            "Budget": [["Item", "Cost"], ["Coffee", 3.5], ["Tea", 2], [None, None], ["Milk", 1]],
            "Empty": [],
            "People": [["Name", None, "Age"], ["Ann", "desk 4", 30]],
        }
    )
    found = chunks("plan.xlsx", data)
    assert [
        (c.content, {k: meta(c).get(k) for k in ("sheet", "row_start", "row_end")}) for c in found
    ] == [
        (
            "Item: Coffee; Cost: 3.5\nItem: Tea; Cost: 2\nItem: Milk; Cost: 1",
            {"sheet": "Budget", "row_start": 2, "row_end": 5},
        ),
        ("Name: Ann; column 2: desk 4; Age: 30", {"sheet": "People", "row_start": 2, "row_end": 2}),
    ]


def test_csv_rows_with_a_sniffed_delimiter() -> None:
    data = b"name;team\r\nAnn;payments\r\nBob;search\r\n"
    found = chunks("people.csv", data)
    assert [(c.content, meta(c)["row_start"], meta(c)["row_end"]) for c in found] == [
        ("name: Ann; team: payments\nname: Bob; team: search", 2, 3)
    ]
    assert "sheet" not in meta(found[0])


_STREAM_PROBE = """
import json, resource, sys
sys.path.insert(0, sys.argv[1])
import document_files
from knowledge.ingest.chunking import MarkdownSectionChunker
from knowledge.extraction import extract_document
import knowledge.extraction.xlsx  # the library's import is not the data's memory

def rows(count):
    yield ["id", "customer", "region", "amount"]
    for n in range(1, count + 1):
        yield [n, f"customer {n}", "emea" if n % 2 else "apac", n * 1.25]

data = document_files.big_xlsx(rows(100_000))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
document = extract_document("orders.xlsx", data)
count = characters = 0
last = None
chunker = MarkdownSectionChunker()
for chunk in chunker.chunk_blocks("orders.xlsx", document.blocks, position_key="row"):
    count += 1
    characters += len(chunk.content)
    last = dict(chunk.metadata)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"chunks": count, "characters": characters, "last": last,
                  "growth_kib": after - before}))
"""


@pytest.mark.slow
def test_a_100k_row_sheet_is_streamed_not_held() -> None:
    """100,000 rows (7 MB of text) read in a fresh process: its peak memory grows by less
    than 96 MiB while every chunk goes by (measured: about 41 MiB; the same workbook
    opened without read-only mode: about 176 MiB)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    probe = subprocess.run(
        [sys.executable, "-c", _STREAM_PROBE, str(Path(__file__).parents[2] / "support")],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr[-2000:]  # the child's error, not just its code
    result = json.loads(probe.stdout)
    assert result["last"]["sheet"] == "Orders"
    assert result["last"]["row_end"] == 100_001
    assert result["characters"] > 6_000_000
    assert result["growth_kib"] < 96 * 1024, result


# --- HTML -----------------------------------------------------------------------------------

PAGE = b"""<!doctype html><html><head><meta charset="utf-8"><title>Deploy guide</title>
<script>var tracking = "do not index";</script><style>p { color: red }</style></head>
<body><nav><a href="/">Home</a> | <a href="/about">About us</a></nav>
<header>Site banner</header>
<main><h1>Deploying</h1><p>Use a <b>canary</b> release.</p>
<ul><li>build</li><li>ship</li></ul>
<h2>Rolling back</h2><p>Run the rollback job.</p>
<table><tr><th>Env</th><th>Command</th></tr><tr><td>prod</td><td>kb rollback</td></tr></table>
<div hidden>secret draft</div></main>
<aside>Related links</aside><footer>Copyright 2026</footer></body></html>"""


def test_html_main_text_has_headings_and_no_chrome() -> None:
    found = chunks("deploy.html", PAGE)
    assert [(c.content, meta(c)["heading_path"]) for c in found] == [
        ("Deploying\nUse a canary release.\n- build\n- ship", ["Deploying"]),
        (
            "Rolling back\nRun the rollback job.\nEnv | Command\nprod | kb rollback",
            ["Deploying", "Rolling back"],
        ),
    ]
    assert {meta(c)["title"] for c in found} == {"Deploy guide"}
    text = extract_text("deploy.html", PAGE).text
    for chrome in (
        "tracking",
        "color",
        "Home",
        "About us",
        "banner",
        "Related",
        "Copyright",
        "draft",
    ):
        assert chrome not in text


def test_an_article_header_is_content_the_page_header_is_not() -> None:
    page = (
        b"<html><body><header>Site name</header><article><header><h1>Post title</h1>"
        b"</header><p>Post body.</p><footer>Posted by Ann</footer></article>"
        b"<article><p>Another post.</p></article><footer>Site footer</footer></body></html>"
    )
    text = extract_text("blog.html", page).text
    assert text.splitlines() == ["Post title", "Post body.", "Posted by Ann", "Another post."]


def test_html_without_main_uses_the_body_and_its_declared_charset() -> None:
    page = '<html><head><meta charset="iso-8859-1"></head><body><p>café</p></body></html>'
    assert extract_text("a.htm", page.encode("latin-1")).text == "café"


def test_html_nested_deeper_than_python_recursion_is_read() -> None:
    # 1,500 levels: past Python's recursion limit (the walk is iterative), within libxml2's
    # depth limit with huge_tree (2,048; deeper content is dropped by the parser).
    page = b"<html><body>" + b"<div>" * 1500 + b"deep text" + b"</div>" * 1500 + b"</body></html>"
    assert extract_text("deep.html", page).text == "deep text"


def test_html_nested_a_million_deep_ends_without_crashing() -> None:
    page = b"<html><body><p>top text</p>" + b"<div>" * 1_000_000 + b"</body></html>"
    assert extract_text("bomb.html", page).text.startswith("top text")


# --- the registry ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "source_type"),
    [
        ("a.md", "markdown"),
        ("a.markdown", "markdown"),
        ("a.txt", "text"),
        ("A.PDF", "pdf"),
        ("a.docx", "docx"),
        ("a.pptx", "pptx"),
        ("a.xlsx", "xlsx"),
        ("a.csv", "csv"),
        ("a.html", "html"),
        ("a.htm", "html"),
        ("a.doc", None),
        ("a.png", None),
    ],
)
def test_source_types(name: str, source_type: str | None) -> None:
    assert source_type_of(name) == source_type
    assert is_supported(name) == (source_type is not None)


@pytest.mark.parametrize(
    ("name", "target"), [("old.doc", ".docx"), ("old.xls", ".xlsx"), ("old.PPT", ".pptx")]
)
def test_legacy_office_files_are_unsupported_with_what_to_do(name: str, target: str) -> None:
    with pytest.raises(ExtractionError) as info:
        extract_document(name, b"\xd0\xcf\x11\xe0 legacy")
    assert str(info.value).startswith("unsupported format: legacy ")
    assert str(info.value).endswith(f"convert to {target}")


def test_default_patterns_take_every_supported_and_legacy_type() -> None:
    assert IndexOptions().file_patterns == DOCUMENT_PATTERNS
    for extension in (".md", ".txt", ".pdf", ".docx", ".pptx", ".xlsx", ".csv", ".html", ".doc"):
        assert f"*{extension}" in DOCUMENT_PATTERNS


def test_default_patterns_are_the_template_default() -> None:
    from pathlib import Path

    template = (Path(__file__).parents[3] / "template.yaml").read_text()
    assert f'Default: "{",".join(DOCUMENT_PATTERNS)}"' in template


def test_html_pre_keeps_its_lines() -> None:
    page = (
        b"<html><body><main><h2>Synopsis</h2>"
        b"<pre>kb index DIR\n    --agent A\nkb search QUERY</pre><p>after</p></main></body></html>"
    )
    assert extract_text("man.html", page).text == (
        "Synopsis\nkb index DIR\n    --agent A\nkb search QUERY\nafter"
    )


def test_html_page_header_holding_the_title_is_content_but_its_nav_is_not() -> None:
    # pandoc's standalone pages put the document's <h1> in a <header> outside <main>.
    page = (
        b"<html><body><header id='title-block-header'><h1 class='title'>kb(1)</h1>"
        b"<nav><a href='/'>home</a></nav></header><p>Index a folder.</p>"
        b"<header><a href='/'>site banner</a></header></body></html>"
    )
    assert extract_text("kb.1.html", page).text == "kb(1)\nIndex a folder."
