"""`kb serve`: RSS, index file and WAL after a ~120k-chunk document comes and goes.

Does ``kb serve`` give memory and disk back after a large document comes and goes?

The real ``kb serve`` (embedded store, hashing embedder) serves a bucket folder with one
scope of ``--documents`` small Markdown files. Measured three times, each after the
process has settled (its RSS and the file sizes unchanged for a few seconds):

1. **baseline**: the small corpus indexed and searched (every mode, so numpy and the
   scope's vector matrix are loaded);
2. **after index**: one large generated Markdown file (``bench.runs.memory.generate_markdown``,
   seeded; ``--mb`` sizes it: 45 MB makes about 120,000 chunks) put into the scope's
   folder, indexed by the watcher, then searched;
3. **after delete**: the file removed, the watcher's delete done, then searched.

Each time: the server's resident set (``VmRSS`` of ``/proc/<pid>/status``; ``VmHWM`` is
its peak), the index file and its ``-wal``. From the baseline on, a client thread searches
every 0.2 s (every mode in turn), as a served index would be searched, so every
measurement is taken under the same load; its errors are counted (none expected).
Reported: the ratios of RSS and file size after the delete to the baseline's, the WAL
after the delete, and the done-when verdicts (RSS within 1.5x, file within 1.2x, WAL at
most 64 MiB).

``--checkout PATH`` serves from another copy of the project (its ``layers/knowledge``),
to measure older code the same way. Needs only the product's dependencies:
``.venv/bin/python -m bench resources``. Writes ``bench/results/resources.json`` (or
``resources-<label>.json``). Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common.environment import DATA_DIR, REPO_ROOT, log, write_result
from bench.runs.concurrency import write_corpus
from bench.runs.memory import MB, generate_markdown

__all__ = ["LIMITS", "add_arguments", "main"]

AGENT, CONTEXT = "bench", "resources"
BIG = "big.md"
MIB = 2**20
_SERVE = "import sys; from knowledge.local.cli import main; sys.exit(main(sys.argv[1:]))"
_QUERIES = ("kalo mine", "ruta shi den", "varex", "poqu lomi")
_MODES = ("keyword", "vector", "hybrid")

LIMITS = {"rss_ratio": 1.5, "file_ratio": 1.2, "wal_mib": 64.0}
"""The done-when: RSS and file size after the delete over the baseline's, WAL size."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mb", type=float, default=45.0, help="size of the large file (45 MB: ~120k chunks)"
    )
    parser.add_argument(
        "--documents", type=int, default=300, help="small documents indexed at the baseline"
    )
    parser.add_argument(
        "--checkout", type=Path, default=REPO_ROOT, help="project checkout to serve from"
    )
    parser.add_argument("--label", default="", help="result file suffix (resources-LABEL)")
    parser.add_argument(
        "--settle", type=float, default=4.0, help="seconds without change that count as settled"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per phase, at most")


class _Server:
    """``kb serve`` in a subprocess, from ``checkout``."""

    def __init__(self, checkout: Path, root: Path, db: Path) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(checkout / "layers" / "knowledge")
        argv = [sys.executable, "-c", _SERVE, "serve", str(root), "--port", "0"]
        argv += ["--db", str(db), "--poll-interval", "1", "--embedder", "hashing"]
        self.db = db
        self.process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=str(checkout),
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        match = re.search(r"on http://127\.0\.0\.1:(\d+) ", line)
        if not match:
            self.stop()
            raise RuntimeError(f"kb serve did not start: {line!r}")
        self.port = int(match.group(1))

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        try:
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()

    def status(self) -> dict[str, Any]:
        _, answer = self.request("GET", f"/v1/agents/{AGENT}/contexts/{CONTEXT}/status")
        return dict(answer)

    def search(self, text: str, mode: str) -> bool:
        body = json.dumps({"query": text, "mode": mode, "max_results": 5}).encode()
        code, _ = self.request("POST", f"/v1/agents/{AGENT}/contexts/{CONTEXT}/search", body)
        return code == 200

    def wait_documents(self, count: int, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status()
            if status.get("state") == "READY" and status.get("document_count") == count:
                return status
            time.sleep(0.5)
        raise RuntimeError(f"the scope did not reach {count} documents within {timeout:.0f} s")

    def sample(self) -> dict[str, float]:
        """The server's RSS and peak RSS, the index file and its WAL, in MiB."""
        fields: dict[str, float] = {}
        with open(f"/proc/{self.process.pid}/status", encoding="ascii") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    fields[name] = int(value.split()[0]) / 1024  # kB
        return {
            "rss_mib": round(fields["VmRSS"], 1),
            "peak_rss_mib": round(fields["VmHWM"], 1),
            "file_mib": round(_size(self.db) / MIB, 2),
            "wal_mib": round(_size(Path(f"{self.db}-wal")) / MIB, 2),
        }

    def settled(self, quiet: float, timeout: float) -> tuple[dict[str, float], float]:
        """Wait until RSS (within 1 MiB) and both file sizes stay put for ``quiet``
        seconds; the last sample and the seconds it took."""
        started = time.monotonic()
        last = self.sample()
        since = time.monotonic()
        while time.monotonic() - since < quiet and time.monotonic() - started < timeout:
            time.sleep(0.5)
            now = self.sample()
            moved = (
                abs(now["rss_mib"] - last["rss_mib"]) > 1.0
                or now["file_mib"] != last["file_mib"]
                or now["wal_mib"] != last["wal_mib"]
            )
            if moved:
                since = time.monotonic()
            last = now
        return last, round(time.monotonic() - started - quiet, 1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


class _Searcher:
    """One client searching back to back (every mode in turn) until stopped; it also
    follows the largest WAL seen meanwhile."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._stop = threading.Event()
        self.ok = 0
        self.errors: list[str] = []
        self.peak_wal_mib = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        rng = random.Random(3)
        while not self._stop.is_set():
            self.peak_wal_mib = max(self.peak_wal_mib, self._server.sample()["wal_mib"])
            mode = rng.choice(_MODES)
            try:
                if self._server.search(rng.choice(_QUERIES), mode):
                    self.ok += 1
                else:
                    self.errors.append(f"{mode}: not 200")
            except (OSError, http.client.HTTPException, ValueError) as exc:
                self.errors.append(f"{mode}: {exc}")
            time.sleep(0.2)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        return {"ok": self.ok, "errors": len(self.errors), "first_errors": self.errors[:3]}


def _searched(server: _Server) -> None:
    """Every query in every mode once: what a served index is asked between changes."""
    for mode in _MODES:
        for text in _QUERIES:
            if not server.search(text, mode):
                raise RuntimeError(f"a {mode} search failed")


def _big_file(mb: float) -> tuple[Path, int]:
    path = DATA_DIR / "resources" / f"big-{mb:g}mb.md"
    if not path.is_file():
        log(f"generating {path.relative_to(REPO_ROOT)} ...")
        partial = path.with_suffix(".part")
        generate_markdown(partial, int(mb * MB))
        partial.replace(path)
    return path, path.stat().st_size


def main(args: argparse.Namespace) -> None:
    checkout = args.checkout.resolve()
    big, big_bytes = _big_file(args.mb)
    with tempfile.TemporaryDirectory(prefix="kb-bench-resources-") as tmp:
        folder = Path(tmp) / "bucket" / AGENT / CONTEXT
        write_corpus(folder, args.documents, seed=11)
        log(f"starting kb serve from {checkout}")
        server = _Server(checkout, Path(tmp) / "bucket", Path(tmp) / "k.db")
        try:
            before = server.wait_documents(args.documents, args.timeout)
            _searched(server)
            searcher = _Searcher(server)  # the same load at every measurement
            baseline, _ = server.settled(args.settle, args.timeout)
            log(f"baseline: {baseline}")

            started = time.monotonic()
            hidden = folder / f".{BIG}.part"  # hidden: never listed, so never half-read
            shutil.copyfile(big, hidden)
            hidden.replace(folder / BIG)
            indexed = server.wait_documents(args.documents + 1, args.timeout)
            index_seconds = round(time.monotonic() - started, 1)
            _searched(server)
            after_index, index_settle = server.settled(args.settle, args.timeout)
            chunks = indexed["chunk_count"] - before["chunk_count"]
            log(f"after index ({index_seconds} s): {after_index}")

            started = time.monotonic()
            (folder / BIG).unlink()
            server.wait_documents(args.documents, args.timeout)
            delete_seconds = round(time.monotonic() - started, 1)
            _searched(server)
            after_delete, delete_settle = server.settled(args.settle, args.timeout)
            searches = searcher.stop()
            log(f"after delete ({delete_seconds} s): {after_delete}; searches {searches}")
        finally:
            server.stop()
    ratios = {
        "rss_ratio": round(after_delete["rss_mib"] / baseline["rss_mib"], 2),
        "file_ratio": round(after_delete["file_mib"] / baseline["file_mib"], 2),
        "wal_mib": after_delete["wal_mib"],
    }
    verdicts = {name: ratios[name] <= limit for name, limit in LIMITS.items()}
    payload = {
        "checkout": str(checkout),
        "embedder": "hashing (256 dimensions)",
        "store": "embedded (SQLite file)",
        "small_documents": args.documents,
        "large_file_mb": round(big_bytes / MB, 2),
        "large_file_chunks": chunks,
        "baseline": baseline,
        "after_index": after_index,
        "after_delete": after_delete,
        "peak_wal_mib": max(searcher.peak_wal_mib, after_index["wal_mib"]),
        "seconds": {
            "index": index_seconds,
            "settle_after_index": index_settle,
            "delete": delete_seconds,
            "settle_after_delete": delete_settle,
        },
        "searches_meanwhile": searches,
        "ratios": ratios,
        "limits": LIMITS,
        "met": verdicts,
    }
    name = f"resources-{args.label}" if args.label else "resources"
    write_result(name, payload)
    print(json.dumps({"ratios": ratios, "met": verdicts}, indent=2))
