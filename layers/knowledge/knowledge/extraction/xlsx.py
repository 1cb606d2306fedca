"""Excel (.xlsx) through openpyxl in read-only mode: rows are streamed, sheet by sheet.

One section per worksheet (``sheet`` = its name); each data row is one block
``header: value; ...`` (``rows.row_blocks``) with ``position`` = its row number, so a
chunk cites ``row_start``/``row_end``. ``load_workbook(read_only=True, data_only=True)``
reads a sheet's XML as the rows are asked for (cached values of formulas, not the
formulas), so a 100k-row sheet is never in memory whole. The archive is checked first
(``archive.check_office_archive``).
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

from knowledge.extraction.archive import check_office_archive
from knowledge.extraction.base import Block, ExtractedDocument, ExtractionLimits, corrupt
from knowledge.extraction.rows import row_blocks

__all__ = ["extract"]

_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def extract(data: bytes, limits: ExtractionLimits, source_type: str) -> ExtractedDocument:
    check_office_archive(data, limits, "xlsx")
    import openpyxl

    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, SyntaxError, OSError) as exc:
        raise corrupt(f"not a readable Excel workbook ({type(exc).__name__}: {exc})") from exc
    title = (workbook.properties.title or "").strip() or None
    return ExtractedDocument(
        source_type=source_type,
        content_type=_CONTENT_TYPE,
        blocks=_blocks(workbook),
        position_key="row",
        title=title,
    )


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
