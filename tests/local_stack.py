"""``kb serve`` in the test process: a bucket folder with the given files, the embedded
store (hashing embedder) in a temporary file, and the server on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path

from knowledge.config import open_store
from knowledge.local.server import LocalServer


@contextmanager
def local_server(tmp_path: Path, files: Mapping[str, str]) -> Iterator[LocalServer]:
    """Serve ``tmp_path/bucket`` holding ``files`` (``agent/context/path`` -> text) for the
    block, once its start-up index is done; the store is ``tmp_path/k.db``."""
    root = tmp_path / "bucket"
    root.mkdir()
    for key, text in files.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text(text, "utf-8")
    with closing(
        open_store(db_path=tmp_path / "k.db", embedder_name="hashing", environ={}, create=True)
    ) as store:
        server = LocalServer(root, store, host="127.0.0.1", port=0, poll_interval=0.1)
        server.start()
        try:
            yield server
        finally:
            server.stop()
