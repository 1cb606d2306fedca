"""The Korean help-pages known-item benchmark, built from Debian's ``gimp-help-ko``.

The package ships the GIMP user manual in Korean as DocBook HTML, one page per section,
under ``usr/share/gimp/2.0/help/ko/``. ``bench/setup.sh`` downloads it with
``apt-get download`` and unpacks it with ``dpkg-deb -x`` into ``bench/data/debs/``
(no root install). As the man-pages set does with its NAME line:

- every page becomes one Markdown document **without its title** (the ``<title>``, the
  navigation header and footer, which name this page and its neighbours, and the page's
  own heading are left out; sub-section headings stay as ``##`` headings);
- a page whose title is Korean (holds Hangul, once its number "7.9." / "15장." /
  "부 II." is cut) and whose text is mostly Korean gives one query: that title;
- the relevant document is that page. Titles shared by two pages are ambiguous and give
  no query. Pages that were never translated stay in the corpus as distractors (the
  manual is partly translated, as real Korean documentation often is).

Built corpora are cached under ``bench/data/gimp-help-ko/``: ``docs/<page>.md`` and
``queries.jsonl``.
"""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

from bench.common.environment import DATA_DIR, log
from bench.corpora.manpages import Corpus, read_corpus

__all__ = ["HELP_DIR", "load_gimp_help", "page_text", "query_title"]

HELP_DIR = DATA_DIR / "debs" / "gimp-help-ko" / "usr" / "share" / "gimp" / "2.0" / "help" / "ko"
NAME = "gimp-help-ko"
MIN_TEXT_CHARS = 80
MIN_HANGUL_SHARE = 0.2
"""A query's page must be at least this share Hangul among its letters (Korean text)."""

_HANGUL = re.compile("[\uac00-\ud7af]")
_LETTER = re.compile(r"[^\W\d_]")
# "7.9. ", "15장. ", "부 II. ", "A. ": a section number in front of the title.
_NUMBER = re.compile(r"^\s*(?:부\s+[IVXLC]+\.|[0-9A-Z]+(?:\.[0-9]+)*\.?\s*장?\.?)\s+")
_BLOCKS = {"p", "div", "li", "dt", "dd", "pre", "tr", "br", "table", "blockquote"}
_SKIPPED_CLASSES = {"navheader", "navfooter", "toc", "list-of-figures", "list-of-tables"}


class _Page(HTMLParser):
    """The text of one page as Markdown, its title and own heading left out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.out: list[str] = []
        self._in_title = False
        self._skip_depth = 0  # > 0 inside a skipped div (depth of nested divs in it)
        self._heading: list[str] | None = None
        self._headings_seen = 0
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip_depth:
            if tag == "div":
                self._skip_depth += 1
            return
        classes = set((dict(attrs).get("class") or "").split())
        if tag == "div" and classes & _SKIPPED_CLASSES:
            self._skip_depth = 1
        elif tag == "title":
            self._in_title = True
        elif re.fullmatch(r"h[1-6]", tag):
            self._heading = []
        elif tag == "pre":
            self._pre += 1
            self.out.append("\n```\n")
        elif tag == "li":
            self.out.append("\n- ")
        elif tag in _BLOCKS:
            self.out.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if self._skip_depth:
            if tag == "div":
                self._skip_depth -= 1
            return
        if tag == "title":
            self._in_title = False
        elif re.fullmatch(r"h[1-6]", tag) and self._heading is not None:
            heading = " ".join("".join(self._heading).split())
            self._heading = None
            self._headings_seen += 1
            if self._headings_seen > 1:  # the first is the page's own title: left out
                self.out.append(f"\n\n## {heading}\n\n")
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self.out.append("\n```\n")
        elif tag in _BLOCKS:
            self.out.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._skip_depth:
            return
        elif self._heading is not None:
            self._heading.append(data)
        elif self._pre:
            self.out.append(data)
        else:
            self.out.append(re.sub(r"\s+", " ", data))


def page_text(html: str) -> tuple[str, str]:
    """``(title, Markdown text without the title)`` of one help page."""
    parser = _Page()
    parser.feed(html)
    parser.close()
    lines = [line.strip() for line in "".join(parser.out).splitlines()]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return " ".join(parser.title.split()), text


def query_title(title: str) -> str:
    """The title as a query: its section number cut ("7.9. 레이어 삭제" -> "레이어 삭제")."""
    return _NUMBER.sub("", title.replace("\xa0", " ")).strip()


def is_korean(text: str) -> bool:
    """At least ``MIN_HANGUL_SHARE`` of the text's letters are Hangul."""
    letters = len(_LETTER.findall(text))
    return letters > 0 and len(_HANGUL.findall(text)) / letters >= MIN_HANGUL_SHARE


def write_title_queries(folder: Path, pages: list[tuple[str, str, str]]) -> int:
    """``folder/queries.jsonl`` of a help-pages set: each page's title as the query of
    that page (``pages``: relative path, title, text), for titles with Hangul that no
    other page shares, over Korean pages; the number of queries written."""
    counts: dict[str, int] = {}
    for _, query, _ in pages:
        counts[query] = counts.get(query, 0) + 1
    queries = [
        {"query": query, "relevant": [relative]}
        for relative, query, text in pages
        if _HANGUL.search(query) and counts[query] == 1 and is_korean(text)
    ]
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8"
    )
    return len(queries)


def _build(target: Path) -> None:
    files = sorted(HELP_DIR.glob("*.html"))
    if not files:
        raise SystemExit(f"gimp-help-ko is not unpacked under {HELP_DIR}: run bench/setup.sh")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    pages: list[tuple[str, str, str]] = []
    for path in files:
        title, text = page_text(path.read_text(encoding="utf-8"))
        if len(text) < MIN_TEXT_CHARS:
            continue
        relative = path.with_suffix(".md").name
        doc = partial / "docs" / relative
        doc.parent.mkdir(parents=True, exist_ok=True)
        doc.write_text(text + "\n", encoding="utf-8")
        pages.append((relative, query_title(title), text))
    queries = write_title_queries(partial, pages)
    partial.rename(target)
    log(f"built {NAME}: {queries} queries over {len(pages)} pages")


def load_gimp_help() -> Corpus:
    """The gimp-help-ko corpus, built from the unpacked package if missing."""
    root = DATA_DIR / NAME
    if not (root / "queries.jsonl").is_file():
        _build(root)
    return read_corpus(
        root, NAME, None, builder="bench/corpora/gimp_help.py from Debian's gimp-help-ko"
    )
