"""``knowledge.ingest.repos.pack.inflated_size`` against packs written by the real ``git``: the
sum of every object's size (deltas at the size of the object they make) as
``git cat-file`` reports it, and the limit refused before the walk ends."""

from __future__ import annotations

import io
import random
import subprocess
from pathlib import Path

import pytest

from knowledge.ingest.repos.pack import PackFormatError, PackLimitExceeded, inflated_size

ENV = {
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_SYSTEM": "/dev/null",
    "HOME": "/nonexistent",
    "PATH": "/usr/bin:/bin",
}


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True)
    return done.stdout.decode()


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, int]:
    """A repository repacked with deltas (similar files, two commits): its pack and the
    total size of its objects."""
    work = tmp_path_factory.mktemp("packed")
    _git(work, "init", "-q")
    rng = random.Random(7)
    words = ["".join(rng.choice("abcdefgh") for _ in range(6)) for _ in range(300)]
    text = " ".join(rng.choice(words) for _ in range(20_000))
    (work / "a.txt").write_text(text)
    (work / "b.txt").write_text(text[:500] + "CHANGED" + text[500:])
    (work / "zeros.bin").write_bytes(b"\0" * 300_000)
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "one")
    (work / "a.txt").write_text(text + " more")
    _git(work, "commit", "-qam", "two")
    _git(work, "repack", "-adfq")
    pack = next((work / ".git/objects/pack").glob("*.pack")).read_bytes()
    verify = _git(work, "verify-pack", "-v", str(next((work / ".git/objects/pack").glob("*.idx"))))
    assert "chain length" in verify, "the pack holds no delta"
    sizes = _git(work, "cat-file", "--batch-all-objects", "--batch-check=%(objectsize)")
    return pack, sum(int(n) for n in sizes.split())


def test_the_inflated_size_is_git_s_own_count(packed: tuple[bytes, int]) -> None:
    pack, total = packed
    assert inflated_size(io.BytesIO(pack), 10**9) == total


def test_over_the_limit_is_refused(packed: tuple[bytes, int]) -> None:
    pack, total = packed
    with pytest.raises(PackLimitExceeded):
        inflated_size(io.BytesIO(pack), total - 1)
    assert inflated_size(io.BytesIO(pack), total) == total


def test_a_cut_or_foreign_pack_is_a_format_error(packed: tuple[bytes, int]) -> None:
    pack, _ = packed
    with pytest.raises(PackFormatError):
        inflated_size(io.BytesIO(pack[: len(pack) // 2]), 10**9)
    with pytest.raises(PackFormatError):
        inflated_size(io.BytesIO(b"NOPE" + pack[4:]), 10**9)
