"""Rows of a table as text: ``column: value`` pairs with the header's names.

Shared by ``xlsx`` and ``csv``: the first row with any value is the header; every later
row becomes one line ``name: value; name: value`` (empty cells left out; a column without
a header name is ``column N``). A row with no value gives nothing. A fractional number
reads as Excel shows it, to 15 significant digits (``0.333333333333333``, ``2.5E+20``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from knowledge.extraction.base import Block

__all__ = ["row_blocks"]


def row_blocks(
    rows: Iterable[Sequence[Any]], section: Mapping[str, Any], *, first_row: int = 1
) -> Iterator[Block]:
    """One block per data row, ``position`` = its 1-based row number in the sheet/file."""
    header: list[str] | None = None
    for number, row in enumerate(rows, start=first_row):
        cells = [_cell_text(value) for value in row]
        if header is None:
            if any(cells):
                header = [name or f"column {i}" for i, name in enumerate(cells, start=1)]
            continue
        pairs = [
            f"{header[i] if i < len(header) else f'column {i + 1}'}: {text}"
            for i, text in enumerate(cells)
            if text
        ]
        if pairs:
            yield Block("; ".join(pairs), section, number)


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        # Excel shows (and keeps) 15 significant digits: 0.1 + 0.2 is 0.3, not 0.30000000000000004.
        return f"{value:.15G}"
    if isinstance(value, dt.datetime) and value.time() == dt.time(0):
        return value.date().isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return " ".join(str(value).split())
