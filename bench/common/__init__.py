"""What the runs share: the environment (paths, the node, result files), the stores and
embedders under test, the metrics, the plain baselines, and a few measuring wrappers.
"""

from __future__ import annotations

__all__: list[str] = []
