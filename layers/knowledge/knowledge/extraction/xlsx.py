"""Excel (.xlsx) through openpyxl in read-only mode: rows are streamed, sheet by sheet.

One section per visible worksheet (``sheet`` = its name); each data row is one block
``header: value; ...`` (``rows.row_blocks``) with ``position`` = its row number, so a
chunk cites ``row_start``/``row_end``. ``load_workbook(read_only=True, data_only=True)``
reads a sheet's XML as the rows are asked for (cached values of formulas, not the
formulas), so a 100k-row sheet is never in memory whole. The archive is checked first
(``archive.open_office_package``).

What Excel shows is what is read: dates as dates (openpyxl, from the cell's format), a
number formatted as a percentage as one (``0.125`` in ``0.0%`` is ``12.5%``), other
numbers to Excel's 15 significant digits (``rows``), a cell merged down over several
rows in each of them. Hidden and "very hidden" sheets
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
from typing import IO, Any, NamedTuple

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
_MERGE_CELL = re.compile(
    rb"<" + _P + rb"""mergeCell\b[^<>]*\bref\s*=\s*["']([A-Z]+[0-9]+:[A-Z]+[0-9]+)["']"""
)
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
                layout = _sheet_layout(data, getattr(sheet, "_worksheet_path", None))
                if layout.formulas_without_value:
                    warnings.append(_no_saved_value(sheet.title, layout.formulas_without_value))
                rows = _shown_rows(sheet.iter_rows(), layout.merged_down)
                yield from row_blocks(rows, section)
            except (KeyError, ValueError, TypeError, SyntaxError, zipfile.BadZipFile) as exc:
                raise corrupt(f"sheet '{sheet.title}' cannot be read ({exc})") from exc
    finally:
        workbook.close()


def _no_saved_value(title: str, count: int) -> str:
    plural = "cell has" if count == 1 else "cells have"
    return (
        f"sheet '{title}': {count} formula {plural} no saved value (the file was written "
        "by a program, not saved by Excel), so their values are not indexed; open and "
        "save it in Excel or LibreOffice to index them"
    )


def _shown_rows(
    rows: Iterable[Sequence[Any]], merged_down: Sequence[_Merge] = ()
) -> Iterator[list[Any]]:
    """Each row's values, a number formatted as a percentage shown as one, and the value
    of a cell merged down over several rows in each of those rows (Excel shows one value
    for all of them; the file holds it in the first row only). Not from the header row
    (the first with a value, as ``rows.row_blocks`` reads it): a header merged down over
    a second header row is not data."""
    starting: dict[int, list[_Merge]] = {}
    header_seen = False
    for merge in merged_down:
        starting.setdefault(merge.first_row, []).append(merge)
    active: dict[_Merge, Any] = {}
    for number, row in enumerate(rows, start=1):
        values = [_shown(cell) for cell in row]
        for merge in [m for m in active if m.last_row < number]:
            del active[merge]
        for merge, value in active.items():
            if value is not None:
                while len(values) <= merge.column:
                    values.append(None)
                if values[merge.column] is None:
                    values[merge.column] = value
        merges = starting.pop(number, ())
        if header_seen:
            for merge in merges:
                active[merge] = values[merge.column] if merge.column < len(values) else None
        header_seen = header_seen or any(value is not None and value != "" for value in values)
        yield values


def _shown(cell: Any) -> Any:
    value = getattr(cell, "value", None)
    if isinstance(value, int | float) and not isinstance(value, bool):
        match = _PERCENT.fullmatch(str(getattr(cell, "number_format", "") or ""))
        if match:
            decimals = len(match.group(1) or "")
            return f"{value * 100:.{decimals}f}%"
    return value


class _Merge(NamedTuple):
    """A merged range spanning rows: its first column (0-based) and its rows (1-based)."""

    column: int
    first_row: int
    last_row: int


class _Layout(NamedTuple):
    formulas_without_value: int
    merged_down: tuple[_Merge, ...]


def _sheet_layout(data: bytes, member: str | None) -> _Layout:
    """What the rows alone do not tell, read from the XML of the sheet stored at
    ``member`` before its rows are: how many cells hold a formula without a saved value
    (``<f>...</f></c>``: no ``<v>`` after it), and the merged ranges that span rows (the
    list is after the rows in the file). Regular expressions over the XML bytes,
    streamed: a tenth of the time a second XML parse of the sheet takes. The archive was
    checked (sizes, member count) before openpyxl opened it."""
    if not member:
        return _Layout(0, ())
    from openpyxl.utils.cell import range_boundaries

    missing, tail, merges = 0, b"", []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        try:
            source = archive.open(member.lstrip("/"))
        except KeyError:
            return _Layout(0, ())
        with source:
            while chunk := source.read(_SCAN_STEP):
                window = tail + chunk
                # A match that ends inside the carried tail was counted in the last window.
                missing += sum(
                    1
                    for m in _FORMULA_WITHOUT_VALUE.finditer(window)
                    if m.end() > len(tail) and not _TEXT_TYPE.search(m.group(1))
                )
                for m in _MERGE_CELL.finditer(window):
                    if m.end() > len(tail):
                        merges.append(m.group(1).decode("ascii"))
                tail = window[-_SCAN_OVERLAP:]
    merged_down: list[_Merge] = []
    for reference in merges:
        min_col, min_row, _, max_row = range_boundaries(reference)
        spans_rows = min_row is not None and max_row is not None and max_row > min_row
        if spans_rows and min_col is not None and min_row is not None and max_row is not None:
            merged_down.append(_Merge(min_col - 1, min_row, max_row))
    return _Layout(missing, tuple(merged_down))
