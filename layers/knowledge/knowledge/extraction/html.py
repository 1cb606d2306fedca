"""HTML through lxml's HTML parser (libxml2): the main text, with headings.

Why lxml: python-docx and python-pptx already need it (no new dependency in the layer),
it parses broken real-world HTML at C speed, and it gives a tree to drop whole elements
from. (The standard library's ``html.parser`` would need a hand-written tree builder;
selectolax would be one more native wheel for no gain here.)

What is kept: the ``<main>`` element (or ``role="main"``), else a single ``<article>``,
else the ``<body>``; minus scripts, styles, templates, SVG/MathML, forms and the page
chrome (``nav``, ``aside``, ``header`` and ``footer`` outside ``main``/``article``,
elements with ``role`` navigation, banner, contentinfo, complementary or search, and
``hidden`` ones). ``<h1>``-``<h6>`` start a
section and set its ``heading_path``; paragraphs, list items (``- item``), table rows
(cells joined with `` | ``), ``<pre>`` and other blocks become one block each. The
title is ``<title>``, else the first ``<h1>``. The walk is iterative, so deep nesting
cannot exhaust the stack; the encoding comes from a BOM or ``<meta charset>``, else
UTF-8, else a detected legacy encoding (``encoding.choose_encoding``, with a warning).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from knowledge.extraction.base import Block, ExtractedDocument, ExtractionLimits, corrupt
from knowledge.extraction.encoding import choose_encoding
from knowledge.extraction.plain import decode_as

__all__ = ["extract"]

_DROP = frozenset(
    {
        "script", "style", "noscript", "template", "svg", "math", "iframe", "object",
        "embed", "canvas", "form", "button", "select", "input", "textarea", "nav",
        "aside", "dialog", "head", "title", "meta", "link",
    }
)  # fmt: skip
_PAGE_CHROME = frozenset({"header", "footer"})
_CONTENT_ROOTS = frozenset({"main", "article"})
_CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search"})
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCKS = frozenset(
    {
        "p", "div", "section", "article", "main", "li", "dt", "dd", "blockquote", "pre",
        "tr", "table", "ul", "ol", "dl", "figure", "figcaption", "caption", "address",
        "details", "summary", "br", "hr", "body", "td", "th",
    }
)  # fmt: skip
_CELLS = frozenset({"td", "th"})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)


def extract(data: bytes, limits: ExtractionLimits, source_type: str) -> ExtractedDocument:
    import lxml.etree
    import lxml.html

    # huge_tree: no depth cap of 256 (deeper text would vanish silently); the input is
    # bounded by max_document_bytes and the walk below is iterative.
    # Decoded here (libxml2 knows other names for some codecs than Python, and none
    # detects an undeclared legacy encoding), then handed to libxml2 as UTF-8.
    text, warnings = decode_as(data, choose_encoding(data, _declared_charset(data)))
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, huge_tree=True)
    try:
        root = lxml.html.document_fromstring(text.encode("utf-8", "replace"), parser=parser)
    except (lxml.etree.ParserError, ValueError, LookupError) as exc:
        raise corrupt(f"not readable HTML ({exc})") from exc
    title_text = root.findtext(".//title")
    title = " ".join(title_text.split()) if title_text else None
    return ExtractedDocument(
        source_type=source_type,
        content_type="text/html",
        blocks=_blocks(_main(root)),
        title=title or _first_h1(root),
        warnings=list(warnings),
    )


def _declared_charset(data: bytes) -> str | None:
    match = _META_CHARSET.search(data[:4096])
    return match.group(1).decode("ascii", "replace") if match else None


def _main(root: Any) -> Any:
    for path in (".//main", ".//*[@role='main']"):
        found = root.find(path) if "@" not in path else next(iter(root.xpath(path)), None)
        if found is not None:
            return found
    articles = root.findall(".//article")
    if len(articles) == 1:
        return articles[0]
    body = root.find("body")
    return body if body is not None else root


def _first_h1(root: Any) -> str | None:
    h1 = root.find(".//h1")
    if h1 is None:
        return None
    text = " ".join(h1.text_content().split())
    return text or None


def _dropped(element: Any) -> bool:
    tag = element.tag
    if not isinstance(tag, str):  # comments, processing instructions
        return True
    name = tag.lower()
    if name in _DROP:
        return True
    if name in _PAGE_CHROME:
        # The page's banner and footer; an article's own header (its title) is content, and
        # so is a header holding the page's <h1> (pandoc's title block): its nav still goes.
        if name == "header" and element.find(".//h1") is not None:
            return False
        return not any(a.tag in _CONTENT_ROOTS for a in element.iterancestors())
    if element.get("hidden") is not None or element.get("aria-hidden") == "true":
        return True
    return (element.get("role") or "").lower() in _CHROME_ROLES


def _blocks(main: Any) -> Iterator[Block]:
    import lxml.etree

    headings: list[tuple[int, str]] = []
    section: Mapping[str, Any] = MappingProxyType({"heading_path": []})
    buffer: list[str] = []
    cells: list[str] | None = None  # the cells of the table row being read
    list_depth = 0
    skip_depth = 0  # > 0 inside a dropped element
    pre_depth = 0  # > 0 inside <pre>: its line breaks and indentation are the content

    def flush() -> str | None:
        raw = "".join(buffer)
        buffer.clear()
        if pre_depth:
            lines = [line.rstrip() for line in raw.splitlines()]
            return "\n".join(lines).strip("\n") or None
        text = " ".join(raw.split())
        return text or None

    for event, element in lxml.etree.iterwalk(main, events=("start", "end")):
        tag = element.tag.lower() if isinstance(element.tag, str) else ""
        if event == "start":
            if skip_depth or _dropped(element):
                skip_depth += 1
                continue
            if tag in _HEADINGS or tag in _BLOCKS:
                text = flush()
                if text and cells is None:
                    yield Block(text, section)
                elif text and cells is not None:
                    cells.append(text)
            if tag == "pre":
                pre_depth += 1
            if tag == "tr":
                cells = []
            elif tag in ("ul", "ol"):
                list_depth += 1
            if element.text:
                buffer.append(element.text)
            continue
        # end
        if skip_depth:
            skip_depth -= 1
            if skip_depth == 0 and element.tail and element is not main:
                buffer.append(element.tail)
            continue
        if tag in _HEADINGS:
            text = flush()
            if text:
                level = _HEADINGS[tag]
                while headings and headings[-1][0] >= level:
                    headings.pop()
                headings.append((level, text))
                section = MappingProxyType({"heading_path": [h for _, h in headings]})
                yield Block(text, section)
        elif tag in _CELLS and cells is not None:
            text = flush()
            cells.append(text or "")
        elif tag == "tr" and cells is not None:
            text = flush()
            if text:
                cells.append(text)
            row, cells = cells, None
            if any(row):
                yield Block(" | ".join(row), section)
        elif tag in ("ul", "ol"):
            list_depth = max(0, list_depth - 1)
            text = flush()
            if text:
                yield Block(text, section)
        elif tag == "li":
            text = flush()
            if text:
                yield Block("  " * max(0, list_depth - 1) + "- " + text, section)
        elif tag in _BLOCKS:
            text = flush()
            if tag == "pre":
                pre_depth = max(0, pre_depth - 1)
            if text and cells is None:
                yield Block(text, section)
            elif text and cells is not None:
                cells.append(text)
        if element.tail and element is not main:
            buffer.append(element.tail)
    text = flush()
    if text:
        yield Block(text, section)
