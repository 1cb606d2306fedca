"""The Debian FAQ question benchmark (English and Korean), built from Debian's packages.

``debian-faq`` (English) and ``debian-faq-ko`` (Korean) install the FAQ as HTML chapters
under ``/usr/share/doc/debian/FAQ/`` (``bench/setup.sh`` installs them). Every numbered
section whose heading is a question ("3.1.4. If I were to decide to change to another
distribution, can I do that?") gives one query and one document:

- the document is the section's answer as Markdown, **without its question** (the heading
  is left out, so the words of the question are not handed to the index for free);
- the query is the question without its number;
- the relevant document is that answer (known-item, one relevant document per query).

A section's answer is its text up to the next heading of any level, so a section that
only introduces sub-sections has no answer of its own and is skipped, as are answers of
fewer than ``MIN_ANSWER_CHARS`` characters. In Korean, a heading counts as a question
when it ends in ``?`` (the translation keeps the question mark) and its answer is in
Korean (some sections were never translated: those are skipped, so the Korean set is
Korean to Korean).

Built corpora are cached under ``bench/data/faq-<lang>/`` like the man pages:
``docs/<chapter>/<number>.md`` and ``queries.jsonl``.
"""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

from bench.common.environment import DATA_DIR, log
from bench.corpora.manpages import Corpus, read_corpus

__all__ = [
    "FAQ_DIR",
    "LANGUAGES",
    "MIN_ANSWER_CHARS",
    "html_sections",
    "load_faq",
    "parse_sections",
]

FAQ_DIR = Path("/usr/share/doc/debian/FAQ")
LANGUAGES = {"en": (FAQ_DIR, "*.en.html"), "ko": (FAQ_DIR / "ko", "*.ko.html")}
MIN_ANSWER_CHARS = 80
# Chapters that are not questions and answers (the index, the colophon).
_SKIPPED_FILES = ("index.", "faqinfo.")
_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)+)\.?\s+(.*)$", re.S)
_HANGUL = re.compile("[\uac00-\ud7af]")
_BLOCKS = {"p", "div", "li", "dt", "dd", "pre", "tr", "br", "table", "blockquote"}


class _Sections(HTMLParser):
    """Collects ``(heading text, body text)`` per ``h1``-``h4`` in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[tuple[str, list[str]]] = []
        self._heading: list[str] | None = None
        self._body: list[str] | None = None
        self._pre = 0
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"script", "style", "title"}:
            self._skip += 1
        elif re.fullmatch(r"h[1-4]", tag):
            self._heading = []
        elif tag == "pre":
            self._pre += 1
            self._emit("\n```\n")
        elif tag == "li":
            self._emit("\n- ")
        elif tag in _BLOCKS:
            self._emit("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in {"script", "style", "title"}:
            self._skip = max(0, self._skip - 1)
        elif re.fullmatch(r"h[1-4]", tag) and self._heading is not None:
            heading = " ".join("".join(self._heading).split())
            self._heading = None
            self._body = []
            self.sections.append((heading, self._body))
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self._emit("\n```\n")
        elif tag in _BLOCKS:
            self._emit("\n\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._heading is not None:
            self._heading.append(data)
        elif self._pre:
            self._emit(data)
        else:
            self._emit(re.sub(r"\s+", " ", data))

    def _emit(self, text: str) -> None:
        if self._body is not None and self._heading is None:
            self._body.append(text)


def _clean(body: str) -> str:
    lines = [line.rstrip() for line in body.splitlines()]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return "\n".join(
        line.lstrip() if not line.startswith("  ") else line for line in text.splitlines()
    ).strip()


def html_sections(html: str) -> list[tuple[str, str]]:
    """``(heading, text)`` for every ``h1``-``h4`` of ``html`` in document order: the
    heading's text and, as Markdown, the text up to the next heading of any level."""
    parser = _Sections()
    parser.feed(html)
    parser.close()
    return [(heading, _clean("".join(parts))) for heading, parts in parser.sections]


def parse_sections(html: str) -> list[tuple[str, str, str]]:
    """``(number, question, answer)`` for every numbered section of one chapter's HTML."""
    found: list[tuple[str, str, str]] = []
    for heading, answer in html_sections(html):
        match = _NUMBER.match(heading)
        if match is None:
            continue
        found.append((match.group(1), match.group(2).strip(), answer))
    return found


def _build(target: Path, lang: str) -> None:
    folder, pattern = LANGUAGES[lang]
    files = sorted(p for p in folder.glob(pattern) if not p.name.startswith(_SKIPPED_FILES))
    if not files:
        raise SystemExit(
            f"the Debian FAQ ({lang}) is not installed under {folder}: run bench/setup.sh"
        )
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    queries: list[dict[str, object]] = []
    for path in files:
        chapter = path.name.split(".")[0]
        for number, question, answer in parse_sections(path.read_text(encoding="utf-8")):
            if not question.rstrip().endswith("?") or len(answer) < MIN_ANSWER_CHARS:
                continue
            if lang == "ko" and not (_HANGUL.search(question) and _HANGUL.search(answer)):
                continue
            relative = f"{chapter}/{number}.md"
            doc = partial / "docs" / relative
            doc.parent.mkdir(parents=True, exist_ok=True)
            doc.write_text(answer + "\n", encoding="utf-8")
            queries.append({"query": question, "relevant": [relative]})
    (partial / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8"
    )
    partial.rename(target)
    log(f"built faq-{lang}: {len(queries)} questions from {len(files)} chapters")


def load_faq(lang: str) -> Corpus:
    """The FAQ corpus in ``lang`` (``en`` or ``ko``), built from the packages if missing."""
    if lang not in LANGUAGES:
        raise SystemExit(f"unknown FAQ language {lang!r}: one of {', '.join(LANGUAGES)}")
    name = f"faq-{lang}"
    root = DATA_DIR / name
    if not (root / "queries.jsonl").is_file():
        _build(root, lang)
    source = "debian-faq" if lang == "en" else "debian-faq-ko"
    return read_corpus(root, name, None, builder=f"bench/corpora/faq.py from Debian's {source}")
