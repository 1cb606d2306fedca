"""``kb serve`` in the test process: a bucket folder with the given files, the embedded
store (hashing embedder) in a temporary file, and the server on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from knowledge.config import StoreSettings, open_store
from knowledge.local.server import LocalServer

over_workers = pytest.mark.parametrize("workers", [1, 2], ids=["one-process", "with-a-worker"])
"""Runs a test whose server takes the ``workers`` fixture in one process, then with a worker
process beside it (the kernel hands each connection to either)."""


def store_settings(db: Path) -> StoreSettings:
    """The settings of the test stores (``db``, hashing embedder, no environment): how a
    worker process opens the same store."""
    return StoreSettings.resolve(db_path=db, embedder_name="hashing", environ={})


@contextmanager
def local_server(
    tmp_path: Path, files: Mapping[str, str], *, workers: int = 1
) -> Iterator[LocalServer]:
    """Serve ``tmp_path/bucket`` holding ``files`` (``agent/context/path`` -> text) for the
    block, once its start-up index is done; the store is ``tmp_path/k.db``. ``workers``
    above 1: that many processes answer (``LocalServer``)."""
    root = tmp_path / "bucket"
    root.mkdir()
    for key, text in files.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text(text, "utf-8")
    with closing(
        open_store(db_path=tmp_path / "k.db", embedder_name="hashing", environ={}, create=True)
    ) as store:
        server = LocalServer(
            root,
            store,
            host="127.0.0.1",
            port=0,
            poll_interval=0.1,
            workers=workers,
            worker_store=store_settings(tmp_path / "k.db"),
        )
        server.start()
        try:
            yield server
        finally:
            server.stop()
