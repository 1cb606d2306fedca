"""Excel (.xlsx) through openpyxl in read-only mode: rows are streamed, sheet by sheet.

One section per visible worksheet (``sheet`` = its name); each data row is one block
``header: value; ...`` (``rows.row_blocks``) with ``position`` = its row number, so a
chunk cites ``row_start``/``row_end``. ``load_workbook(read_only=True, data_only=True)``
reads a sheet's XML as the rows are asked for (cached values of formulas, not the
formulas), so a 100k-row sheet is never in memory whole. The archive is checked first
(``archive.open_office_package``).

What Excel shows is what is read: dates as dates (openpyxl, from the cell's format), a
number formatted as a percentage as one (``0.125`` in ``0.0%`` is ``12.5%``), other
numbers to Excel's 15 significant digits (``rows``). Hidden and "very hidden" sheets
(drafts, lookup tables, a macro's machinery) are left out, as hidden slides and hidden
HTML are, and named in a warning. A formula a program wrote without the value Excel
saves with it (openpyxl, pandas without a recalculation) has no value to read: its
sheet and the number of such cells are in a warning.
"""

from __future__ import annotations

import functools
import io
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import MappingProxyType
from typing import IO, Any

from knowledge.extraction.archive import core_title, open_office_package
from knowledge.extraction.base import Block, ExtractedDocument, ExtractionLimits, corrupt
from knowledge.extraction.rows import row_blocks

__all__ = ["extract"]

_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
# A cell holding a formula (``<f>...</f>`` or ``<f .../>``) and no value after it (no
# ``<v>``, or an empty one: what openpyxl writes); group 1 is the cell's attributes.
_P = rb"(?:[\w.-]+:)?"
_FORMULA_WITHOUT_VALUE = re.compile(
    rb"<" + _P + rb"c\b([^<>]*)>\s*<" + _P + rb"f\b[^<>]*(?:/>|>[^<]*</" + _P + rb"f>)\s*"
    rb"(?:<" + _P + rb"v\s*/>|<" + _P + rb"v>\s*</" + _P + rb"v>)?\s*</" + _P + rb"c>"
)
# An empty text result (``t="str"``) is a saved value: the formula gave "".
_TEXT_TYPE = re.compile(rb"""\bt\s*=\s*["']str["']""")
_SCAN_STEP, _SCAN_OVERLAP = 1024 * 1024, 4096
# ``0%``, ``0.0%``, ``#,##0.00%``: the digits after the point are the decimals shown.
_PERCENT = re.compile(r"[0#?,]*(?:\.([0#?]+))?%")


def extract(data: bytes, limits: ExtractionLimits, source_type: str) -> ExtractedDocument:
    workbook = open_office_package(data, limits, "xlsx", "Excel workbook", _load)
    document = ExtractedDocument(
        source_type=source_type,
        content_type=_CONTENT_TYPE,
        position_key="row",
        title=core_title(workbook.properties),
    )
    document.blocks = _blocks(workbook, data, document.warnings)
    return document


def _load() -> tuple[Callable[[IO[bytes]], Any], tuple[type[Exception], ...]]:
    import openpyxl

    opener = functools.partial(openpyxl.load_workbook, read_only=True, data_only=True)
    return opener, (zipfile.BadZipFile, TypeError, OSError)


def _blocks(workbook: Any, data: bytes, warnings: list[str]) -> Iterator[Block]:
    try:
        hidden = [sheet.title for sheet in workbook.worksheets if sheet.sheet_state != "visible"]
        if hidden:
            names = ", ".join(f"'{title}'" for title in hidden)
            plural = "sheet" if len(hidden) == 1 else "sheets"
            warnings.append(f"{len(hidden)} hidden {plural} left out: {names}")
        for sheet in workbook.worksheets:
            if sheet.sheet_state != "visible":
                continue
            section = MappingProxyType({"sheet": sheet.title})
            try:
                yield from row_blocks(_shown_rows(sheet.iter_rows()), section)
                missing = _formulas_without_value(data, getattr(sheet, "_worksheet_path", None))
            except (KeyError, ValueError, TypeError, SyntaxError, zipfile.BadZipFile) as exc:
                raise corrupt(f"sheet '{sheet.title}' cannot be read ({exc})") from exc
            if missing:
                plural = "cell has" if missing == 1 else "cells have"
                warnings.append(
                    f"sheet '{sheet.title}': {missing} formula {plural} no saved value (the "
                    "file was written by a program, not saved by Excel), so their values "
                    "are not indexed; open and save it in Excel or LibreOffice to index them"
                )
    finally:
        workbook.close()


def _shown_rows(rows: Iterable[Sequence[Any]]) -> Iterator[list[Any]]:
    """Each row's values, a number formatted as a percentage shown as one."""
    for row in rows:
        yield [_shown(cell) for cell in row]


def _shown(cell: Any) -> Any:
    value = getattr(cell, "value", None)
    if isinstance(value, int | float) and not isinstance(value, bool):
        match = _PERCENT.fullmatch(str(getattr(cell, "number_format", "") or ""))
        if match:
            decimals = len(match.group(1) or "")
            return f"{value * 100:.{decimals}f}%"
    return value


def _formulas_without_value(data: bytes, member: str | None) -> int:
    """How many cells of the sheet stored at ``member`` hold a formula without a saved
    value (``<f>...</f></c>``: no ``<v>`` after it). A regular expression over the XML
    bytes, streamed: a tenth of the time a second XML parse of the sheet would take. The
    archive was checked (sizes, member count) before openpyxl opened it."""
    if not member:
        return 0
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        try:
            source = archive.open(member.lstrip("/"))
        except KeyError:
            return 0
        missing, tail = 0, b""
        with source:
            while chunk := source.read(_SCAN_STEP):
                window = tail + chunk
                # A match that ends inside the carried tail was counted in the last window.
                missing += sum(
                    1
                    for m in _FORMULA_WITHOUT_VALUE.finditer(window)
                    if m.end() > len(tail) and not _TEXT_TYPE.search(m.group(1))
                )
                tail = window[-_SCAN_OVERLAP:]
        return missing
