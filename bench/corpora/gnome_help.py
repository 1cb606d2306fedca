"""A third Korean help-pages known-item benchmark, built from Debian's ``gnome-user-docs``.

The package ships GNOME Help and the GNOME system administration guide as Mallard XML
(``.page`` files, translated with itstool: a string nobody translated stays English)
under ``usr/share/help/<lang>/``. ``bench/setup.sh`` downloads it with
``apt-get download`` and unpacks it with ``dpkg-deb -x`` into ``bench/data/debs/``
(no root install). As ``bench/corpora/gimp_help.py`` does:

- every page under ``ko/gnome-help/`` and ``ko/system-admin-guide/`` becomes one
  Markdown document **without its title**: the page's ``<title>`` and its ``<info>``
  block (links, credits, revision notes and the ``<desc>`` line that guide pages show
  under the link to it) are left out, as are editorial ``<comment>`` and ``<media>``
  (captions of videos); section titles stay as ``##`` headings. A ``<link xref>`` with
  no text of its own (rendered with the target's title by Yelp) gives no text here;
- a page whose title holds Hangul and whose text is at least 20% Hangul gives one query,
  that title; titles shared by two pages give no query;
- the relevant document is that page. Untranslated pages stay as distractors.

Built corpora are cached under ``bench/data/gnome-help-ko/``.
"""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.common.environment import DATA_DIR, log
from bench.corpora.gimp_help import write_title_queries
from bench.corpora.manpages import Corpus, read_corpus

__all__ = ["HELP_ROOT", "load_gnome_help", "page_text"]

HELP_ROOT = DATA_DIR / "debs" / "gnome-user-docs" / "usr" / "share" / "help" / "ko"
GUIDES = ("gnome-help", "system-admin-guide")
NAME = "gnome-help-ko"
MIN_TEXT_CHARS = 80

_MAL = "{http://projectmallard.org/1.0/}"
_SKIPPED = {"info", "comment", "media", "include"}
_BLOCKS = {
    "p", "item", "td", "th", "tr", "note", "list", "steps", "terms", "tree", "listing",
    "example", "figure", "table", "quote", "synopsis", "desc", "subtitle", "title", "section",
}  # fmt: skip
_PRE = {"screen", "code"}


def _local(tag: object) -> str:
    name = tag if isinstance(tag, str) else ""
    return name.rsplit("}", 1)[-1]


def _walk(element: ET.Element, out: list[str], pre: bool) -> None:
    name = _local(element.tag)
    if name in _SKIPPED or not isinstance(element.tag, str):
        return
    block = name in _PRE and element.text is not None and "\n" in element.text
    if name == "title":  # a section's title (the page's own is never walked)
        out.append("\n\n## " + " ".join("".join(element.itertext()).split()) + "\n\n")
        return
    if name == "item":
        out.append("\n- ")
    elif block:
        out.append("\n```\n")
    elif name in _BLOCKS:
        out.append("\n\n")
    inner = pre or block
    if element.text:
        out.append(element.text if inner else re.sub(r"\s+", " ", element.text))
    for child in element:
        _walk(child, out, inner)
        if child.tail:
            out.append(child.tail if inner else re.sub(r"\s+", " ", child.tail))
    if block:
        out.append("\n```\n")
    elif name in _BLOCKS:
        out.append("\n\n")


def page_text(xml: str) -> tuple[str, str]:
    """``(title, Markdown text without the title)`` of one Mallard page."""
    root = ET.fromstring(xml)
    title = root.find(f"{_MAL}title")
    out: list[str] = []
    for child in root:
        if child is not title:
            _walk(child, out, False)
    lines = [line.strip() for line in "".join(out).splitlines()]
    text = re.sub(r"\n- *\n+", "\n- ", "\n".join(lines))  # an item's first paragraph
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    heading = "" if title is None else " ".join("".join(title.itertext()).split())
    return heading, text


def _build(target: Path) -> None:
    files = sorted(path for guide in GUIDES for path in (HELP_ROOT / guide).glob("*.page"))
    if not files:
        raise SystemExit(f"gnome-user-docs is not unpacked under {HELP_ROOT}: run bench/setup.sh")
    write_help_pages(target, files, NAME)


def write_help_pages(target: Path, files: list[Path], name: str) -> int:
    """Write the Mallard ``files`` long enough to be pages as ``target/docs/<guide>/<page>.md``
    (through ``<target>.partial``, renamed when done) with their title queries; the count of
    queries. Shared by the GNOME help sets."""
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    pages: list[tuple[str, str, str]] = []
    for path in files:
        title, text = page_text(path.read_text(encoding="utf-8"))
        if len(text) < MIN_TEXT_CHARS:
            continue
        relative = f"{path.parent.name}/{path.stem}.md"
        doc = partial / "docs" / relative
        doc.parent.mkdir(parents=True, exist_ok=True)
        doc.write_text(text + "\n", encoding="utf-8")
        pages.append((relative, title, text))
    queries = write_title_queries(partial, pages)
    partial.rename(target)
    log(f"built {name}: {queries} queries over {len(pages)} pages")
    return queries


def load_gnome_help() -> Corpus:
    """The gnome-help-ko corpus, built from the unpacked package if missing."""
    root = DATA_DIR / NAME
    if not (root / "queries.jsonl").is_file():
        _build(root)
    return read_corpus(
        root, NAME, None, builder="bench/corpora/gnome_help.py from Debian's gnome-user-docs (ko)"
    )
