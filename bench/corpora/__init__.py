"""The benchmark sets: documents and the questions asked of them (man pages, the Debian FAQ,
the Korean help pages, real and generated documents, the abstention sets). A builder
caches what it makes under ``bench/data/`` (gitignored); ``bench/setup.sh`` fetches the
sources.
"""

from __future__ import annotations

__all__: list[str] = []
