"""Benchmarks of retrieval quality and performance (``python -m bench --help``).

Run from the repository root with the bench venv (``bench/setup.sh`` creates it); every
command writes ``bench/results/<name>.json`` recording the exact command that produced it,
and ``python -m bench report`` turns those files into ``bench/REPORT.md`` and its plots.
By role: ``runs`` (one module per command), ``corpora`` (the sets), ``report`` (the
report's generators), ``probes`` (scripts run in a fresh interpreter), ``common`` (what
runs share); ``bench/README.md`` says where a new one goes.
"""

from __future__ import annotations

__all__: list[str] = []
