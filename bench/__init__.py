"""Benchmarks of retrieval quality and performance (``python -m bench --help``).

Run from the repository root with the bench venv (``bench/setup.sh`` creates it); every
command writes ``bench/results/<name>.json`` recording the exact command that produced it,
and ``python -m bench report`` turns those files into ``bench/REPORT.md`` and its plots.
Only ``bench.metrics`` is imported by the unit tests: it needs nothing but the standard
library.
"""

from __future__ import annotations

__all__: list[str] = []
