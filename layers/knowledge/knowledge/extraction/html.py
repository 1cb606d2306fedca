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
    """The blocks of ``main``, in document order: each element's opening or closing
    ends at most one."""
    import lxml.etree

    walk = _BlockWalk(main)
    for event, element in lxml.etree.iterwalk(main, events=("start", "end")):
        tag = element.tag.lower() if isinstance(element.tag, str) else ""
        block = walk.start(element, tag) if event == "start" else walk.end(element, tag)
        if block is not None:
            yield block
    block = walk.block(walk.flush())
    if block is not None:
        yield block


class _BlockWalk:
    """One walk of the main element (module docstring): the open headings and the
    section they make, the text read since the last block, the cells of the table row
    being read, and how deep the walk is in lists, dropped elements and ``<pre>``."""

    def __init__(self, main: Any) -> None:
        self._main = main
        self._headings: list[tuple[int, str]] = []
        self._section: Mapping[str, Any] = MappingProxyType({"heading_path": []})
        self._buffer: list[str] = []
        self._cells: list[str] | None = None  # the cells of the table row being read
        self._list_depth = 0
        self._skip_depth = 0  # > 0 inside a dropped element
        self._pre_depth = 0  # > 0 inside <pre>: its line breaks and indentation are the content

    def flush(self) -> str | None:
        """The text read since the last block (``None``: none), and a fresh start."""
        raw = "".join(self._buffer)
        self._buffer.clear()
        if self._pre_depth:
            lines = [line.rstrip() for line in raw.splitlines()]
            return "\n".join(lines).strip("\n") or None
        text = " ".join(raw.split())
        return text or None

    def block(self, text: str | None) -> Block | None:
        """``text`` as a block of the section, or as a cell of the row being read."""
        if text and self._cells is None:
            return Block(text, self._section)
        if text and self._cells is not None:
            self._cells.append(text)
        return None

    def start(self, element: Any, tag: str) -> Block | None:
        """An element opens: a block or heading ends the text before it."""
        if self._skip_depth or _dropped(element):
            self._skip_depth += 1
            return None
        block = self.block(self.flush()) if tag in _HEADINGS or tag in _BLOCKS else None
        if tag == "pre":
            self._pre_depth += 1
        if tag == "tr":
            self._cells = []
        elif tag in ("ul", "ol"):
            self._list_depth += 1
        if element.text:
            self._buffer.append(element.text)
        return block

    def end(self, element: Any, tag: str) -> Block | None:
        """An element closes: a heading starts a section, a row, list item or block is
        one block; the text after the element (its tail) is read on."""
        if self._skip_depth:
            self._skip_depth -= 1
            if self._skip_depth == 0 and element.tail and element is not self._main:
                self._buffer.append(element.tail)
            return None
        block = None
        if tag in _HEADINGS:
            block = self._heading(_HEADINGS[tag])
        elif tag in _CELLS and self._cells is not None:
            self._cells.append(self.flush() or "")
        elif tag == "tr" and self._cells is not None:
            block = self._row(self._cells)
        elif tag in ("ul", "ol", "li"):
            block = self._list_end(tag)
        elif tag in _BLOCKS:
            text = self.flush()
            if tag == "pre":
                self._pre_depth = max(0, self._pre_depth - 1)
            block = self.block(text)
        if element.tail and element is not self._main:
            self._buffer.append(element.tail)
        return block

    def _heading(self, level: int) -> Block | None:
        """A heading's text: a block, and the section of what follows (it closes the open
        headings of its level and deeper)."""
        text = self.flush()
        if not text:
            return None
        while self._headings and self._headings[-1][0] >= level:
            self._headings.pop()
        self._headings.append((level, text))
        self._section = MappingProxyType({"heading_path": [h for _, h in self._headings]})
        return Block(text, self._section)

    def _list_end(self, tag: str) -> Block | None:
        """A list ends (text loose in it is a block), or a list item: ``- item``, indented
        two spaces for each list it is nested in."""
        if tag != "li":
            self._list_depth = max(0, self._list_depth - 1)
        text = self.flush()
        if text and tag == "li":
            return Block("  " * max(0, self._list_depth - 1) + "- " + text, self._section)
        return Block(text, self._section) if text else None

    def _row(self, cells: list[str]) -> Block | None:
        """A table row ends: its cells joined with `` | `` (text outside its cells is one
        more; a row of empty cells is nothing)."""
        text = self.flush()
        if text:
            cells.append(text)
        self._cells = None
        return Block(" | ".join(cells), self._section) if any(cells) else None
