"""Search throughput and latency of ``kb serve`` (embedded store) at 1, 16 and 64 clients.

A synthetic corpus (seeded: ``--documents`` Markdown files of Zipf-distributed
pseudo-words, a few sections each) is laid out as one scope of a bucket folder; the real
``kb serve`` command serves it (hashing embedder, so vector and hybrid search run the
store's numpy path). Once the status says READY, each level runs ``--duration`` seconds:
``c`` client threads, each on its own keep-alive connection, send searches back to back,
cycling keyword, vector and hybrid with seeded 1-3 word queries. Reported per level:
searches/s, p50/p99 latency (ms), errors, and the ratio of searches/s to one client's,
measured in the same run.

``--checkout PATH`` serves from another checkout of the project (its
``layers/knowledge``), so two branches can be measured the same way on one machine.
Needs only the product's own dependencies: ``.venv/bin/python -m bench concurrency``.
Writes ``bench/results/concurrency.json`` (or ``concurrency-<label>.json``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.environment import REPO_ROOT, log, write_result
from bench.metrics import percentile

__all__ = ["SERVE_OPTIONS", "ServeProcess", "add_arguments", "main", "write_corpus"]

AGENT, CONTEXT = "bench", "corpus"
MODES = ("keyword", "vector", "hybrid")
_SERVE = "import sys; from knowledge.local.cli import main; sys.exit(main(sys.argv[1:]))"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--documents", type=int, default=1000, help="corpus size (default 1000)")
    parser.add_argument(
        "--clients", default="1,16,64", help="comma-separated client counts (default 1,16,64)"
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per level")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds before the levels")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--checkout", type=Path, default=REPO_ROOT, help="project checkout to serve from"
    )
    parser.add_argument("--label", default="", help="result file suffix (concurrency-LABEL)")


def _vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def _zipf_weights(n: int) -> list[float]:
    return [1.0 / (rank + 1) for rank in range(n)]


def write_corpus(folder: Path, documents: int, seed: int) -> list[str]:
    """``documents`` Markdown files under ``folder``; returns the vocabulary."""
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng)
    weights = _zipf_weights(len(vocabulary))
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(documents):
        sections = []
        for s in range(rng.randint(2, 5)):
            words = rng.choices(vocabulary, weights, k=rng.randint(60, 180))
            sections.append(f"## Section {s}\n\n{' '.join(words)}\n")
        title = " ".join(rng.choices(vocabulary, weights, k=3))
        (folder / f"doc-{n:05d}.md").write_text(f"# {title}\n\n" + "\n".join(sections), "utf-8")
    return vocabulary


def _queries(vocabulary: list[str], seed: int, count: int = 512) -> list[bytes]:
    rng = random.Random(seed + 1)
    weights = _zipf_weights(len(vocabulary))
    bodies = []
    for n in range(count):
        text = " ".join(rng.choices(vocabulary[:1500], weights[:1500], k=rng.randint(1, 3)))
        body = {"query": text, "mode": MODES[n % len(MODES)], "max_results": 5}
        bodies.append(json.dumps(body).encode())
    return bodies


SERVE_OPTIONS = ("--poll-interval", "5", "--embedder", "hashing")
"""``kb serve``'s options here: a search benchmark needs no quick polls."""


class ServeProcess:
    """``kb serve ROOT --port 0 --db DB`` in a subprocess, from ``checkout``, with
    ``options`` after those; its log (stderr) goes to ``log_file`` when one is named."""

    def __init__(
        self,
        checkout: Path,
        root: Path,
        db: Path,
        options: Sequence[str] = SERVE_OPTIONS,
        log_file: Path | None = None,
    ) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(checkout / "layers" / "knowledge")
        argv = [sys.executable, "-c", _SERVE, "serve", str(root), "--port", "0"]
        argv += ["--db", str(db), *options]
        self._log = log_file.open("wb") if log_file is not None else None
        self.process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=self._log if self._log is not None else subprocess.DEVNULL,
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

    def request(self, method: str, path: str, body: bytes | None = None) -> dict[str, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
            return dict(json.loads(conn.getresponse().read()))
        finally:
            conn.close()

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        path = f"/v1/agents/{AGENT}/contexts/{CONTEXT}/status"
        while time.monotonic() < deadline:
            status = self.request("GET", path)
            if status.get("state") == "READY":
                return status
            time.sleep(0.5)
        raise RuntimeError(f"the corpus was not indexed within {timeout:.0f} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()


def _client(
    port: int, bodies: list[bytes], offset: int, stop_at: float, out: list[tuple[float, bool]]
) -> None:
    path = f"/v1/agents/{AGENT}/contexts/{CONTEXT}/search"
    headers = {"Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    n = offset
    while time.perf_counter() < stop_at:
        body = bodies[n % len(bodies)]
        n += 1
        started = time.perf_counter()
        try:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            ok = response.status == 200
        except (OSError, http.client.HTTPException):
            ok = False
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        out.append((time.perf_counter() - started, ok))
    conn.close()


def run_level(port: int, bodies: list[bytes], clients: int, duration: float) -> dict[str, Any]:
    samples: list[list[tuple[float, bool]]] = [[] for _ in range(clients)]
    started = time.perf_counter()
    stop_at = started + duration
    threads = [
        threading.Thread(target=_client, args=(port, bodies, i * 37, stop_at, samples[i]))
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    done = [latency for sample in samples for latency, ok in sample if ok]
    errors = sum(1 for sample in samples for _, ok in sample if not ok)
    return {
        "clients": clients,
        "searches": len(done),
        "errors": errors,
        "seconds": round(elapsed, 2),
        "searches_per_s": round(len(done) / elapsed, 1),
        "p50_ms": round(percentile(done, 50) * 1000, 1) if done else None,
        "p99_ms": round(percentile(done, 99) * 1000, 1) if done else None,
    }


def main(args: argparse.Namespace) -> None:
    levels = [int(c) for c in str(args.clients).split(",") if c.strip()]
    checkout = args.checkout.resolve()
    with tempfile.TemporaryDirectory(prefix="kb-bench-concurrency-") as tmp:
        root = Path(tmp) / "bucket"
        log(f"writing {args.documents} documents")
        vocabulary = write_corpus(root / AGENT / CONTEXT, args.documents, args.seed)
        bodies = _queries(vocabulary, args.seed)
        log(f"starting kb serve from {checkout}")
        server = ServeProcess(checkout, root, Path(tmp) / "k.db")
        try:
            indexing = time.perf_counter()
            status = server.wait_ready(timeout=1800)
            log(
                f"indexed {status['document_count']} documents, {status['chunk_count']} chunks "
                f"in {time.perf_counter() - indexing:.1f} s"
            )
            run_level(server.port, bodies, 1, args.warmup)  # warm caches (vectors, FTS pages)
            results = []
            for clients in levels:
                log(f"{clients} clients for {args.duration:g} s")
                level = run_level(server.port, bodies, clients, args.duration)
                log(
                    f"  {level['searches_per_s']} searches/s, p50 {level['p50_ms']} ms, "
                    f"p99 {level['p99_ms']} ms, {level['errors']} errors"
                )
                results.append(level)
        finally:
            server.stop()
    baseline = next((r["searches_per_s"] for r in results if r["clients"] == 1), None)
    for level in results:
        level["ratio_to_one_client"] = (
            round(level["searches_per_s"] / baseline, 2) if baseline else None
        )
    payload = {
        "checkout": str(checkout),
        "documents": status["document_count"],
        "chunks": status["chunk_count"],
        "modes": list(MODES),
        "duration_s": args.duration,
        "levels": results,
    }
    name = f"concurrency-{args.label}" if args.label else "concurrency"
    path = write_result(name, payload)
    print(
        f"{'clients':>8} {'searches/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'ratio':>6}"
    )
    for level in results:
        print(
            f"{level['clients']:>8} {level['searches_per_s']:>11} {level['p50_ms']!s:>8} "
            f"{level['p99_ms']!s:>8} {level['errors']:>7} {level['ratio_to_one_client']!s:>6}"
        )
    log(f"wrote {path}")
