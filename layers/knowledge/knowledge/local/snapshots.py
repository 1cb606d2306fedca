"""What a poll of the bucket folder sees: a stamp per file, and what changed since the last.

``take_snapshot`` stamps every regular, non-hidden file under the root (``mtime_ns``,
size, inode, ``ctime_ns``), ``diff_snapshots`` says which keys changed or are gone, and
``racy_keys`` which files a coarse file-system clock could have hidden a rewrite of
(read again by the next poll). ``knowledge.local.watcher`` acts on them.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DIRTY",
    "RACY_WINDOW_NS",
    "FileStamp",
    "SnapshotDiff",
    "check_poll_interval",
    "diff_snapshots",
    "racy_keys",
    "take_snapshot",
]


@dataclass(frozen=True, slots=True)
class FileStamp:
    """What a poll remembers of a file: a change of any field means the file changed.

    ``mtime_ns`` and ``size`` can both stay the same when a file changes: a backup
    restored with ``cp -p`` / ``rsync -t``, a file renamed over another after its times
    were copied. ``inode`` (another file now has the name) and ``ctime_ns`` (set by the
    system on every write, rename or ``utime``, and by no one to a chosen value) catch
    those; a change of them alone costs a hash of the file's bytes."""

    mtime_ns: int
    size: int
    inode: int = 0
    ctime_ns: int = 0


DIRTY = FileStamp(-1, -1)
"""Remembered for a key the next poll must look at again: it equals no real stamp."""


@dataclass(frozen=True, slots=True)
class SnapshotDiff:
    """Keys (``agent/context/path``) created or changed, and keys deleted, sorted."""

    changed: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.changed or self.deleted)


def check_poll_interval(seconds: float) -> float:
    """``seconds`` if it is a positive, finite number; else ``ValueError`` naming
    ``poll_interval`` (a wait of NaN seconds returns at once: a poll loop without pause;
    an infinite one raises on the polling thread, which then never polls)."""
    if not 0 < seconds < math.inf:
        raise ValueError(f"poll_interval must be a positive number of seconds, got {seconds}")
    return seconds


def take_snapshot(root: Path) -> dict[str, FileStamp]:
    """``{key: FileStamp}`` for every regular, non-hidden file under ``root``.

    Keys are ``/``-separated paths relative to ``root``. Symbolic links to folders are
    not followed (no loops, nothing outside ``root``); FIFOs, sockets and devices are
    left out (``stat`` never opens them). Files that vanish meanwhile, and folders that
    cannot be listed, are left out. Folders are walked with a stack, not recursion: a
    tree nested deeper than Python's recursion limit cannot stop every poll.
    """
    snapshot: dict[str, FileStamp] = {}
    folders = [str(root)]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError:
            continue
        for entry in listed:
            # Hidden entries are never documents (the sources skip them too); pruning
            # them keeps a .git folder or an editor's swap files from costing a stat.
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                    continue
                info = os.stat(entry.path)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            key = Path(os.path.relpath(entry.path, root)).as_posix()
            snapshot[key] = FileStamp(info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
    return snapshot


RACY_WINDOW_NS = 2_000_000_000
"""How close to a snapshot a file's mtime must be for the snapshot to be unsure it saw the
file's last write: the coarsest file-system clock in common use (FAT's 2 s)."""


def racy_keys(snapshot: Mapping[str, FileStamp], taken_at_ns: int) -> set[str]:
    """The keys of ``snapshot`` (taken from wall-clock time ``taken_at_ns`` on) whose mtime
    is not clearly older than the snapshot. On a coarse file-system clock a later write
    within the same tick keeps the mtime, and with the same size the stamp too; so such
    a file is read again by the next poll (an unchanged one costs a hash of its bytes).
    An mtime ahead of this machine's clock (a skewed share) stays racy until the clock
    passes it."""
    since = taken_at_ns - RACY_WINDOW_NS
    return {key for key, stamp in snapshot.items() if stamp.mtime_ns >= since}


def diff_snapshots(before: Mapping[str, FileStamp], after: Mapping[str, FileStamp]) -> SnapshotDiff:
    """Keys that are new or whose stamp changed, and keys that are gone."""
    changed = sorted(key for key, stamp in after.items() if before.get(key) != stamp)
    deleted = sorted(key for key in before if key not in after)
    return SnapshotDiff(tuple(changed), tuple(deleted))
