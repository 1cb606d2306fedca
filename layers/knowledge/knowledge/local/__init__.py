"""The local stack (no AWS): a folder laid out like the bucket, watched and served.

``LocalServer`` is imported lazily by ``kb serve``; this package's modules import
only the standard library and the ``knowledge`` core.
"""

from __future__ import annotations

from knowledge.local.server import DEFAULT_HOST, DEFAULT_PORT, LocalServer, serve_until_stopped
from knowledge.local.watcher import (
    AppliedChange,
    BucketWatcher,
    FileStamp,
    SnapshotDiff,
    diff_snapshots,
    take_snapshot,
)

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "AppliedChange",
    "BucketWatcher",
    "FileStamp",
    "LocalServer",
    "SnapshotDiff",
    "diff_snapshots",
    "serve_until_stopped",
    "take_snapshot",
]
