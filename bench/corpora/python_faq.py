"""The Python FAQ question benchmark (English), built from Debian's ``python3.11-doc``.

``python3.11-doc`` installs the Python documentation as HTML; its FAQ is one page per
topic under ``/usr/share/doc/python3.11/html/faq/`` (general, programming, design,
library, extending, windows, gui, installed; ``bench/setup.sh`` installs it). Its headings
are questions in the asker's words ("Why are default values shared between objects?"),
as in the Debian FAQ, so it is built as ``bench/corpora/faq.py`` builds that one: every
section whose heading ends in ``?`` gives one query and one document:

- the document is the section's answer as Markdown, **without its question**;
- the query is the question (without Sphinx's ``¶`` permalink);
- the relevant document is that answer (known-item, one relevant document per query).

Only the page's main text is read (Sphinx's ``role="main"`` block, not the sidebar); the
page's table of contents, which lists every question, belongs to the page title's
section, which is not a question. A section's answer is its text up to the next heading
of any level, and answers of fewer than ``MIN_ANSWER_CHARS`` characters are skipped, as
in the Debian FAQ.

The built corpus is cached under ``bench/data/python-faq/``: ``docs/<page>/<nn>.md``
(``nn``: the question's position among the page's questions) and ``queries.jsonl``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.common.environment import DATA_DIR, log
from bench.corpora.faq import MIN_ANSWER_CHARS, html_sections
from bench.corpora.manpages import Corpus, read_corpus

__all__ = ["NAME", "PYTHON_FAQ_DIR", "load_python_faq", "main_text", "questions"]

NAME = "python-faq"
PYTHON_FAQ_DIR = Path("/usr/share/doc/python3.11/html/faq")
_SKIPPED_PAGES = ("index.html",)
_MAIN = 'role="main"'
_SIDEBAR = 'class="sphinxsidebar"'
_PERMALINK = "\u00b6"


def main_text(html: str) -> str:
    """The page's main block: from Sphinx's ``role="main"`` element to its sidebar (the
    whole page when either is missing)."""
    start = html.find(_MAIN)
    if start < 0:
        return html
    start = html.find(">", start) + 1
    end = html.find(_SIDEBAR, start)
    if end < 0:
        return html[start:]
    return html[start : html.rfind("<", start, end)]  # up to the sidebar's opening tag


def questions(html: str) -> list[tuple[str, str]]:
    """``(question, answer)`` for every section of one FAQ page whose heading is a
    question with an answer of at least ``MIN_ANSWER_CHARS`` characters."""
    found: list[tuple[str, str]] = []
    for heading, answer in html_sections(main_text(html)):
        question = heading.replace(_PERMALINK, "").strip()
        if question.endswith("?") and len(answer) >= MIN_ANSWER_CHARS:
            found.append((question, answer))
    return found


def _build(target: Path) -> None:
    pages = sorted(p for p in PYTHON_FAQ_DIR.glob("*.html") if p.name not in _SKIPPED_PAGES)
    if not pages:
        raise SystemExit(
            f"the Python FAQ is not installed under {PYTHON_FAQ_DIR}: run bench/setup.sh"
        )
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    queries: list[dict[str, object]] = []
    for page in pages:
        for position, (question, answer) in enumerate(
            questions(page.read_text(encoding="utf-8")), start=1
        ):
            relative = f"{page.stem}/{position:02d}.md"
            doc = partial / "docs" / relative
            doc.parent.mkdir(parents=True, exist_ok=True)
            doc.write_text(answer + "\n", encoding="utf-8")
            queries.append({"query": question, "relevant": [relative]})
    (partial / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8"
    )
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    log(f"built {NAME}: {len(queries)} questions from {len(pages)} pages")


def load_python_faq() -> Corpus:
    """The Python FAQ corpus, built from the package if missing."""
    root = DATA_DIR / NAME
    if not (root / "queries.jsonl").is_file():
        _build(root)
    return read_corpus(
        root, NAME, None, builder="bench/corpora/python_faq.py from Debian's python3.11-doc"
    )
