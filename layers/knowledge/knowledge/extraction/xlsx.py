"""Excel (.xlsx) through openpyxl in read-only mode: rows are streamed, sheet by sheet.

One section per worksheet (``sheet`` = its name); each data row is one block
``header: value; ...`` (``rows.row_blocks``) with ``position`` = its row number, so a
chunk cites ``row_start``/``row_end``. ``load_workbook(read_only=True, data_only=True)``
reads a sheet's XML as the rows are asked for (cached values of formulas, not the
formulas), so a 100k-row sheet is never in memory whole. The archive is checked first
(``archive.open_office_package``).
"""

from __future__ import annotations

import functools
import zipfile
from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import IO, Any

from knowledge.extraction.archive import core_title, open_office_package
from knowledge.extraction.base import Block, ExtractedDocument, ExtractionLimits, corrupt
from knowledge.extraction.rows import row_blocks

__all__ = ["extract"]

_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def extract(data: bytes, limits: ExtractionLimits, source_type: str) -> ExtractedDocument:
    workbook = open_office_package(data, limits, "xlsx", "Excel workbook", _load)
    return ExtractedDocument(
        source_type=source_type,
        content_type=_CONTENT_TYPE,
        blocks=_blocks(workbook),
        position_key="row",
        title=core_title(workbook.properties),
    )


def _load() -> tuple[Callable[[IO[bytes]], Any], tuple[type[Exception], ...]]:
    import openpyxl

    opener = functools.partial(openpyxl.load_workbook, read_only=True, data_only=True)
    return opener, (zipfile.BadZipFile, TypeError, OSError)


def _blocks(workbook: Any) -> Iterator[Block]:
    try:
        for sheet in workbook.worksheets:
            section = MappingProxyType({"sheet": sheet.title})
            try:
                yield from row_blocks(sheet.iter_rows(values_only=True), section)
            except (KeyError, ValueError, TypeError, SyntaxError, zipfile.BadZipFile) as exc:
                raise corrupt(f"sheet '{sheet.title}' cannot be read ({exc})") from exc
    finally:
        workbook.close()
