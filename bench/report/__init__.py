"""``bench/REPORT.md``: ``writer`` puts the sections together in reading order, ``layout``
is the report's shape (headline table, links, the frozen history), ``helpers`` what the
generators share; every other module writes one current section (or a few that belong
together).
"""

from __future__ import annotations

__all__: list[str] = []
