"""The documents the document benchmarks read: renderings, real PDFs, generated large files.

- ``load_rendering(corpus, fmt)``: the man-pages benchmark corpus (``bench.corpora.manpages``)
  rendered from the same manual page sources to ``pdf`` (groff's PDF device,
  ``groff -k -t -mandoc -Tpdf``), ``docx`` or ``html`` (pandoc's man reader,
  ``pandoc -f man``). The NAME section is removed from each source first, as the corpus
  builder removes it from the Markdown, so the query is never copied into the document;
  pandoc gets the page name as the title, as the Markdown has it as its ``#`` heading.
  Cached under ``bench/data/<corpus>-<fmt>/docs/<section>/<page>.<fmt>``, with
  ``rendering.json`` (tool versions, failures).
- ``real_pdfs()``: PDFs that Debian packages ship (manuals typeset by pdfTeX, groff,
  DocBook tool chains), copied (and gunzipped) to ``bench/data/pdfs/<package>--<name>``.
  ``bench/setup.sh`` installs the packages.
- ``long_pdf(pages)``: one PDF of exactly ``pages`` pages: man pages typeset together by
  groff, cut with pypdf. ``big_xlsx(rows)``: one generated sheet of ``rows`` rows and a
  header (openpyxl write-only mode, seeded, deterministic). Each alone in its folder
  under ``bench/data/generated/``, so that folder can be indexed as a scope.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import shutil
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.common.environment import DATA_DIR, log
from bench.corpora.manpages import Corpus

__all__ = [
    "FORMATS",
    "REAL_PDFS",
    "Rendering",
    "big_xlsx",
    "document_key",
    "load_rendering",
    "long_pdf",
    "man_source",
    "real_pdfs",
    "strip_name_section",
]

FORMATS = ("pdf", "docx", "html")
MAN_ROOT = Path("/usr/share/man")
_TIMEOUT = 120

# (Debian package, file it installs). Different producers on purpose: pdfTeX/texinfo (R),
# groff's gropdf, DocBook via dblatex/FOP/LaTeX (bzip2, valgrind, libtasn1, nettle, zlib).
REAL_PDFS: tuple[tuple[str, str], ...] = (
    ("r-doc-pdf", "/usr/share/R/doc/manual/R-intro.pdf"),
    ("r-doc-pdf", "/usr/share/R/doc/manual/R-data.pdf"),
    ("r-doc-pdf", "/usr/share/R/doc/manual/R-admin.pdf"),
    ("r-doc-pdf", "/usr/share/R/doc/manual/R-lang.pdf"),
    ("r-doc-pdf", "/usr/share/R/doc/manual/R-FAQ.pdf"),
    ("r-doc-pdf", "/usr/share/R/doc/manual/R-ints.pdf"),
    ("r-doc-pdf", "/usr/share/R/doc/manual/R-exts.pdf"),
    ("groff", "/usr/share/doc/groff-base/pdf/pdfmark.pdf.gz"),
    ("groff", "/usr/share/doc/groff-base/examples/mom/mom-pdf.pdf.gz"),
    ("bzip2-doc", "/usr/share/doc/bzip2/manual.pdf.gz"),
    ("fontconfig", "/usr/share/doc/fontconfig/fontconfig-user.pdf.gz"),
    ("libtasn1-doc", "/usr/share/doc/libtasn1-doc/libtasn1.pdf"),
    ("nettle-dev", "/usr/share/doc/nettle-dev/nettle.pdf.gz"),
    ("shared-mime-info", "/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf"),
    ("valgrind", "/usr/share/doc/valgrind/valgrind_manual.pdf.gz"),
    ("zlib1g-dev", "/usr/share/doc/zlib1g-dev/crc-doc.1.0.pdf.gz"),
)

_EXTENSIONS = {".md", ".txt", ".pdf", ".docx", ".html"}
_NAME_HEADING = re.compile(r'^\.S[Hh]\s+"?NAME"?\s*$', re.IGNORECASE)
_SECTION_HEADING = re.compile(r"^\.S[Hh](\s|$)")


def document_key(path: str) -> str:
    """The page a document path stands for, whatever its format:
    ``2/fork.2.md``, ``2/fork.2.pdf`` and ``2/fork.2.txt`` are all ``2/fork.2``."""
    stem, dot, extension = path.rpartition(".")
    return stem if dot and f".{extension.lower()}" in _EXTENSIONS else path


def man_source(relative: str) -> Path:
    """The gzipped man source of a corpus page: ``2/fork.2.md`` -> ``man2/fork.2.gz``."""
    section, _, name = relative.partition("/")
    return MAN_ROOT / f"man{section}" / f"{document_key(name)}.gz"


def strip_name_section(source: str) -> str:
    """The roff source without its NAME section (from ``.SH NAME`` to the next ``.SH``)."""
    out: list[str] = []
    skipping = False
    for line in source.splitlines(keepends=True):
        if _NAME_HEADING.match(line.strip()):
            skipping = True
            continue
        if skipping and _SECTION_HEADING.match(line):
            skipping = False
        if not skipping:
            out.append(line)
    return "".join(out)


def _tool_version(command: Sequence[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return "missing"
    return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else ""


def _render_one(fmt: str, source: str, title: str, dest: Path) -> str | None:
    """Render one page; returns None on success, else the reason it failed."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "pdf":
        command = ["groff", "-k", "-t", "-mandoc", "-Tpdf"]
    elif fmt in ("docx", "html"):
        command = ["pandoc", "-f", "man", "-t", fmt, "-s", "-M", f"title={title}"]
    else:
        raise ValueError(f"unknown format {fmt!r}")
    command += [] if fmt == "pdf" else ["-o", str(dest)]
    try:
        done = subprocess.run(
            command,
            input=source.encode("utf-8"),
            capture_output=True,
            timeout=_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {_TIMEOUT} s"
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.decode('utf-8', 'replace')[:200]}"
    if fmt == "pdf":
        dest.write_bytes(done.stdout)
    if not dest.is_file() or dest.stat().st_size == 0:
        return "no output"
    return None


@dataclass(frozen=True, slots=True)
class Rendering:
    """The corpus in one format: its folder, what made it, and the pages that failed."""

    fmt: str
    docs_dir: Path
    documents: int
    total_bytes: int
    tool: str
    failures: dict[str, str]

    def describe(self) -> dict[str, object]:
        return {
            "format": self.fmt,
            "documents": self.documents,
            "total_bytes": self.total_bytes,
            "tool": self.tool,
            "failures": self.failures,
        }


def _tool_for(fmt: str) -> str:
    if fmt == "pdf":
        return "groff -k -t -mandoc -Tpdf (" + _tool_version(["groff", "--version"]) + ")"
    return f"pandoc -f man -t {fmt} -s (" + _tool_version(["pandoc", "--version"]) + ")"


def load_rendering(corpus: Corpus, fmt: str, workers: int = 2) -> Rendering:
    """``corpus`` rendered to ``fmt`` (built on first use, then cached)."""
    root = DATA_DIR / f"{corpus.name}-{fmt}"
    record = root / "rendering.json"
    if not record.is_file():
        missing = "groff" if fmt == "pdf" else "pandoc"
        if shutil.which(missing) is None:
            raise SystemExit(f"{missing} is missing: run bench/setup.sh first")
        shutil.rmtree(root, ignore_errors=True)
        pages = sorted(
            p.relative_to(corpus.docs_dir).as_posix() for p in corpus.docs_dir.rglob("*.md")
        )
        log(f"rendering {len(pages)} pages to {fmt} ...")

        def render(relative: str) -> tuple[str, str | None]:
            source = gzip.decompress(man_source(relative).read_bytes()).decode("utf-8", "replace")
            key = document_key(relative)
            dest = root / "docs" / f"{key}.{fmt}"
            return relative, _render_one(fmt, strip_name_section(source), key.split("/")[-1], dest)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            failures = {rel: why for rel, why in pool.map(render, pages) if why is not None}
        record.write_text(
            json.dumps({"tool": _tool_for(fmt), "failures": failures}, indent=2), encoding="utf-8"
        )
        log(f"{fmt}: {len(pages) - len(failures)} rendered, {len(failures)} failed")
    info = json.loads(record.read_text(encoding="utf-8"))
    files = sorted((root / "docs").rglob(f"*.{fmt}"))
    return Rendering(
        fmt=fmt,
        docs_dir=root / "docs",
        documents=len(files),
        total_bytes=sum(f.stat().st_size for f in files),
        tool=info["tool"],
        failures=info["failures"],
    )


@dataclass(frozen=True, slots=True)
class RealPdf:
    package: str
    origin: str
    path: Path


def real_pdfs() -> list[RealPdf]:
    """The ``REAL_PDFS`` that are installed, as plain PDF files under ``bench/data/pdfs``."""
    folder = DATA_DIR / "pdfs"
    folder.mkdir(parents=True, exist_ok=True)
    found: list[RealPdf] = []
    for package, origin in REAL_PDFS:
        source = Path(origin)
        if not source.is_file():
            log(f"missing {origin} (Debian package {package}): run bench/setup.sh")
            continue
        name = source.name.removesuffix(".gz")
        dest = folder / f"{package}--{name}"
        if not dest.is_file():
            data = source.read_bytes()
            dest.write_bytes(gzip.decompress(data) if origin.endswith(".gz") else data)
        found.append(RealPdf(package, origin, dest))
    return found


def long_pdf(pages: int) -> Path:
    """A PDF of exactly ``pages`` pages of typeset man pages (sections 2 and 3, in order)."""
    dest = DATA_DIR / "generated" / f"pdf-{pages}" / f"manpages-{pages}-pages.pdf"
    if dest.is_file():
        return dest
    from pypdf import PdfReader, PdfWriter

    dest.parent.mkdir(parents=True, exist_ok=True)
    sources = sorted((MAN_ROOT / "man2").glob("*.gz")) + sorted((MAN_ROOT / "man3").glob("*.gz"))
    # About three typeset pages per manual page; take enough, render once, then cut.
    texts: list[str] = []
    for source in sources:
        text = gzip.decompress(source.read_bytes()).decode("utf-8", "replace")
        if not text.lstrip().startswith(".so"):
            texts.append(text)
        if len(texts) >= pages // 2:
            break
    whole = dest.with_name(f".{dest.name}.whole")  # hidden: never listed as a document
    log(f"typesetting {len(texts)} man pages into one PDF ...")
    done = subprocess.run(
        ["groff", "-k", "-t", "-mandoc", "-Tpdf"],
        input="\n".join(texts).encode("utf-8"),
        capture_output=True,
        timeout=1800,
        check=True,
    )
    whole.write_bytes(done.stdout)
    reader = PdfReader(whole)
    if len(reader.pages) < pages:
        raise SystemExit(f"only {len(reader.pages)} pages typeset, {pages} wanted")
    writer = PdfWriter()
    for index in range(pages):
        writer.add_page(reader.pages[index])
    with dest.open("wb") as out:
        writer.write(out)
    whole.unlink()
    return dest


_REGIONS = ("north", "south", "east", "west", "central")
_PRODUCTS = ("widget", "gadget", "sprocket", "gear", "flange", "bracket", "valve", "pump")


def big_xlsx(rows: int, seed: int = 20_251_130) -> Path:
    """One sheet ``orders``: a header and ``rows`` rows of 8 columns (ids, dates, text,
    numbers), written in openpyxl's write-only mode (streamed)."""
    dest = DATA_DIR / "generated" / f"xlsx-{rows}" / f"orders-{rows}-rows.xlsx"
    if dest.is_file():
        return dest
    from datetime import date, timedelta

    from openpyxl import Workbook

    dest.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    book = Workbook(write_only=True)
    sheet = book.create_sheet("orders")
    sheet.append(
        ["order_id", "date", "customer", "product", "quantity", "unit_price", "region", "note"]
    )
    start = date(2024, 1, 1)
    for i in range(rows):
        sheet.append(
            [
                f"ORD-{i:07d}",
                start + timedelta(days=rng.randrange(700)),
                f"customer {rng.randrange(5000):04d}",
                rng.choice(_PRODUCTS),
                rng.randint(1, 500),
                round(rng.uniform(0.5, 999.0), 2),
                rng.choice(_REGIONS),
                " ".join(rng.choices(_PRODUCTS + _REGIONS, k=rng.randint(0, 6))),
            ]
        )
    partial = dest.with_name(f".{dest.name}.partial")  # hidden: never listed as a document
    book.save(partial)
    partial.rename(dest)
    return dest
