"""`kb serve --workers 1` and `2`: searches/s at 1 vs 16 clients, p95 at 120k chunks.

``kb serve --workers N``: searches/s and latency under concurrent clients.

Two parts, one run, the real ``kb serve`` command (embedded store, hashing embedder) in
subprocesses: a server with ``--workers 1`` (the baseline: one process) and one with
``--workers 2`` (the primary and a worker), both running, each on its own port.

- **Throughput** (``--documents``, default 1,000 documents: about 10,000 chunks): a
  synthetic corpus (seeded: Markdown files of Zipf-distributed pseudo-words, a few
  sections each) laid out as one scope of a bucket folder, each server with its own
  index file of it. For each server and each of ``--modes`` (keyword, hybrid): 1 client,
  then ``--clients`` (16) clients send searches back to back: searches/s, p50/p95/p99
  (ms), errors, and the ratio of the many clients' searches/s to one client's, same
  server, same run. The target: at least ``TARGET_RATIO`` with 2 workers.
- **A large scope**: one scope of about 120,000 chunks (``bench/runs/keyword_scale.py``'s
  ``many`` shape, 2,000 documents; its cached store file is copied once to
  ``bench/data/concurrency/``, gitignored, and reused; both servers read it): 1 client,
  then ``--clients`` clients in keyword mode with ``LARGE_QUERIES`` queries made by that
  benchmark's generator; p50/p95 (ms). The target: a p95 of at most ``TARGET_P95_S``
  with 2 workers.

The machine is shared, and other work comes and goes: so each level's seconds
(``--duration``, ``--large-duration``) are split into ``--rounds`` rounds that take the
two servers in turn (each first in turn), and a level's figures are over all its rounds.
The load generator is this process: one thread per client, each on its own keep-alive
``http.client`` connection, which costs little CPU next to a search (its CPU seconds are
recorded, and the server's processes' CPU seconds: the cores they kept busy), with the
lowest and highest load average seen around a level's rounds. ``--checkout PATH`` serves
another checkout of the project (its ``layers/knowledge``). Writes
``bench/results/concurrency.json`` (or ``concurrency-<label>.json``). Linux only
(``/proc``). Run: ``.venv-bench/bin/python -m bench concurrency``.
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
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.environment import DATA_DIR, REPO_ROOT, log, write_result
from bench.common.metrics import percentile

__all__ = [
    "SERVE_OPTIONS",
    "TARGET_P95_S",
    "TARGET_RATIO",
    "ServeProcess",
    "add_arguments",
    "main",
    "write_corpus",
]

AGENT, CONTEXT = "bench", "corpus"
MODES = ("keyword", "vector", "hybrid")
TARGET_RATIO = 1.6
"""Searches/s of 16 clients over one client's, with 2 workers (2 cores)."""
TARGET_P95_S = 1.0
"""p95 of a search under 16 clients in the ~120k-chunk scope, with 2 workers."""
WORKERS = (1, 2)
LARGE = DATA_DIR / "concurrency" / "scale-120k"
LARGE_QUERIES = 2000
"""Distinct queries for the large scope, so that few repeat within a level."""
_LARGE_SOURCE = "bench concurrency (a copy of keyword-scale's many)"
_SERVE = "import sys; from knowledge.local.cli import main; sys.exit(main(sys.argv[1:]))"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--documents", type=int, default=1000, help="corpus size (default 1000)")
    parser.add_argument("--clients", type=int, default=16, help="clients next to 1 (default 16)")
    parser.add_argument(
        "--modes", default="keyword,hybrid", help="throughput modes (default keyword,hybrid)"
    )
    parser.add_argument(
        "--duration", type=float, default=12.0, help="seconds per level, in all the rounds"
    )
    parser.add_argument(
        "--large-duration", type=float, default=20.0, help="seconds per level, large scope"
    )
    parser.add_argument("--no-large", action="store_true", help="skip the ~120k-chunk scope")
    parser.add_argument(
        "--rounds", type=int, default=4, help="rounds each level's seconds are split into"
    )
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


def _queries(vocabulary: list[str], seed: int, mode: str, count: int = 512) -> list[bytes]:
    rng = random.Random(seed + 1)
    weights = _zipf_weights(len(vocabulary))
    bodies = []
    for _ in range(count):
        text = " ".join(rng.choices(vocabulary[:1500], weights[:1500], k=rng.randint(1, 3)))
        body = {"query": text, "mode": mode, "max_results": 5}
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
        self._log_file = log_file
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

    def wait_for_log(self, text: str, timeout: float) -> None:
        """Wait until the log (``log_file``) holds ``text``."""
        assert self._log_file is not None
        deadline = time.monotonic() + timeout
        while text not in self._log_file.read_text("utf-8", errors="replace"):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"kb serve never logged {text!r}")
            time.sleep(0.2)

    def wait_ready(
        self, timeout: float, agent: str = AGENT, context: str = CONTEXT
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        path = f"/v1/agents/{agent}/contexts/{context}/status"
        while time.monotonic() < deadline:
            status = self.request("GET", path)
            if status.get("state") == "READY":
                return status
            time.sleep(0.5)
        raise RuntimeError(f"the corpus was not indexed within {timeout:.0f} s")

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the server and its running workers (Linux ``/proc``)."""
        pids = [self.process.pid]
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            try:  # a thread that just ended is listed, and gone
                pids += [int(n) for n in (task / "children").read_text().split()]
            except FileNotFoundError:
                continue
        ticks = 0
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except FileNotFoundError:
                continue
            ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

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
    port: int,
    path: str,
    bodies: list[bytes],
    offset: int,
    stop_at: float,
    out: list[tuple[float, bool]],
) -> None:
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


def _ms(done: list[float], q: float) -> float | None:
    return round(percentile(done, q) * 1000, 1) if done else None


@dataclass
class Level:
    """One configuration's searches at one client count, gathered over the rounds."""

    clients: int
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    seconds: float = 0.0
    client_cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    loads: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        done = self.latencies
        return {
            "clients": self.clients,
            "searches": len(done),
            "errors": self.errors,
            "seconds": round(self.seconds, 2),
            "searches_per_s": round(len(done) / self.seconds, 1) if self.seconds else None,
            "p50_ms": _ms(done, 50),
            "p95_ms": _ms(done, 95),
            "p99_ms": _ms(done, 99),
            "client_cpu_s": round(self.client_cpu_s, 2),
            "server_cores": round(self.server_cpu_s / self.seconds, 2) if self.seconds else None,
            "load_min": round(min(self.loads), 2) if self.loads else None,
            "load_max": round(max(self.loads), 2) if self.loads else None,
        }


def run_level(
    port: int,
    bodies: list[bytes],
    clients: int,
    duration: float,
    path: str = f"/v1/agents/{AGENT}/contexts/{CONTEXT}/search",
    server: ServeProcess | None = None,
    into: Level | None = None,
) -> Level:
    """``clients`` threads searching for ``duration`` seconds, added to ``into`` (a new
    ``Level`` by default): latencies, errors, the load generator's own CPU seconds, the
    ``server``'s (its processes'), and the load average before and after."""
    level = into if into is not None else Level(clients)
    samples: list[list[tuple[float, bool]]] = [[] for _ in range(clients)]
    level.loads.append(os.getloadavg()[0])
    server_cpu = server.cpu_seconds() if server is not None else 0.0
    cpu = time.process_time()
    started = time.perf_counter()
    stop_at = started + duration
    threads = [
        threading.Thread(target=_client, args=(port, path, bodies, i * 37, stop_at, samples[i]))
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    level.seconds += time.perf_counter() - started
    level.client_cpu_s += time.process_time() - cpu
    if server is not None:
        level.server_cpu_s += server.cpu_seconds() - server_cpu
    level.loads.append(os.getloadavg()[0])
    level.latencies += [latency for sample in samples for latency, ok in sample if ok]
    level.errors += sum(1 for sample in samples for _, ok in sample if not ok)
    return level


def _serve(checkout: Path, root: Path, db: Path, workers: int, log_file: Path) -> ServeProcess:
    """``kb serve`` with ``workers`` processes, once every worker serves."""
    server = ServeProcess(
        checkout, root, db, (*SERVE_OPTIONS, "--workers", str(workers)), log_file=log_file
    )
    if workers > 1:
        server.wait_for_log(f"worker {workers - 1}: serving", timeout=600)
    return server


def _level_line(label: str, level: dict[str, Any]) -> None:
    log(
        f"  {label} {level['clients']:>2} clients: {level['searches_per_s']} searches/s, "
        f"p50 {level['p50_ms']} ms, p95 {level['p95_ms']} ms, {level['errors']} errors, "
        f"server cores {level['server_cores']}, load {level['load_min']}-{level['load_max']}"
    )


def _rounds(
    servers: dict[int, ServeProcess],
    plans: list[tuple[str, list[bytes], str]],
    clients: Sequence[int],
    args: argparse.Namespace,
    duration: float,
) -> dict[tuple[int, str, int], Level]:
    """Every (workers, plan, client count) for ``duration`` seconds in all, in
    ``args.rounds`` rounds that take the servers in turn (each first in turn), so that
    the machine's other work weighs on every configuration alike."""
    levels: dict[tuple[int, str, int], Level] = {}
    order = list(servers)
    share = duration / args.rounds
    for round_number in range(args.rounds):
        turn = order[round_number % len(order) :] + order[: round_number % len(order)]
        for workers in turn:
            server = servers[workers]
            for name, bodies, path in plans:
                for count in clients:
                    level = levels.setdefault((workers, name, count), Level(count))
                    run_level(server.port, bodies, count, share, path, server, level)
    return levels


def _start(
    checkout: Path, root: Path, dbs: dict[int, Path], tmp: Path, label: str, **ready: str
) -> dict[int, ServeProcess]:
    """A server per worker count (each on its own port), once each is ready."""
    servers: dict[int, ServeProcess] = {}
    try:
        for workers in WORKERS:
            log(f"{label}: kb serve --workers {workers}")
            servers[workers] = _serve(
                checkout, root, dbs[workers], workers, tmp / f"{label}-{workers}.log"
            )
        for server in servers.values():
            server.wait_ready(1800, **ready)
    except BaseException:
        for server in servers.values():
            server.stop()
        raise
    return servers


def _throughput(
    args: argparse.Namespace, checkout: Path, tmp: Path
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The corpus at 1 and ``--clients`` clients per mode, with each worker count."""
    root = tmp / "bucket"
    log(f"writing {args.documents} documents")
    vocabulary = write_corpus(root / AGENT / CONTEXT, args.documents, args.seed)
    modes = [m.strip() for m in str(args.modes).split(",") if m.strip()]
    path = f"/v1/agents/{AGENT}/contexts/{CONTEXT}/search"
    plans = [(mode, _queries(vocabulary, args.seed, mode), path) for mode in modes]
    dbs = {workers: tmp / f"k-{workers}.db" for workers in WORKERS}
    servers = _start(checkout, root, dbs, tmp, "corpus")
    try:
        status = servers[1].request("GET", f"/v1/agents/{AGENT}/contexts/{CONTEXT}/status")
        corpus = {"documents": status["document_count"], "chunks": status["chunk_count"]}
        log(f"ready: {corpus['chunks']} chunks")
        for server in servers.values():  # every process warm
            for _, bodies, _ in plans:
                run_level(server.port, bodies, args.clients, args.warmup)
        levels = _rounds(servers, plans, (1, args.clients), args, args.duration)
    finally:
        for server in servers.values():
            server.stop()
    runs = []
    for workers in WORKERS:
        for mode in modes:
            one = levels[(workers, mode, 1)].summary()
            many = levels[(workers, mode, args.clients)].summary()
            _level_line(f"workers {workers} {mode}", one)
            _level_line(f"workers {workers} {mode}", many)
            ratio = (
                many["searches_per_s"] / one["searches_per_s"] if one["searches_per_s"] else None
            )
            runs.append(
                {
                    "workers": workers,
                    "mode": mode,
                    "levels": [one, many],
                    "ratio": None if ratio is None else round(ratio, 2),
                }
            )
    return corpus, runs


def large_store() -> tuple[Path, dict[str, Any]]:
    """The ~120k-chunk store file: ``keyword_scale``'s ``many`` shape (built there when
    missing), copied once under ``LARGE`` and marked as indexed elsewhere, so that
    ``kb serve`` over an empty folder leaves its scope alone."""
    from bench.runs import keyword_scale

    db = LARGE / "kb.db"
    marker = LARGE / "built.json"
    if db.is_file() and marker.is_file():
        return db, json.loads(marker.read_text("utf-8"))
    source, built = keyword_scale.store_file("many", keyword_scale.Zipf())
    shutil.rmtree(LARGE, ignore_errors=True)
    LARGE.mkdir(parents=True)
    log(f"copying {source} to {db}")
    with closing(sqlite3.connect(source)) as conn, closing(sqlite3.connect(db)) as copy:
        conn.backup(copy)  # a consistent copy, whatever its WAL holds
    from knowledge.core.scope import KnowledgeScope
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder())
    try:
        scope = KnowledgeScope(keyword_scale.AGENT, keyword_scale.CONTEXT)
        store.set_scope_source(scope, _LARGE_SOURCE)
    finally:
        store.close()
    marker.write_text(json.dumps(built, indent=2) + "\n", encoding="utf-8")
    return db, built


def _large(args: argparse.Namespace, checkout: Path, tmp: Path) -> dict[str, Any]:
    """The ~120k-chunk scope at 1 and ``--clients`` clients, keyword, with each worker
    count (both servers read the one file)."""
    from bench.runs import keyword_scale

    db, built = large_store()
    queries = keyword_scale.generate_queries(keyword_scale.Zipf(), LARGE_QUERIES)
    bodies = [
        json.dumps({"query": q, "mode": "keyword", "max_results": 10}).encode() for q in queries
    ]
    agent, context = keyword_scale.AGENT, keyword_scale.CONTEXT
    path = f"/v1/agents/{agent}/contexts/{context}/search"
    root = tmp / "empty-bucket"
    root.mkdir()
    servers = _start(
        checkout, root, dict.fromkeys(WORKERS, db), tmp, "large", agent=agent, context=context
    )
    try:
        status = servers[1].request("GET", f"/v1/agents/{agent}/contexts/{context}/status")
        for server in servers.values():
            run_level(server.port, bodies, args.clients, args.warmup, path)
        plans = [("keyword", bodies, path)]
        levels = _rounds(servers, plans, (1, args.clients), args, args.large_duration)
    finally:
        for server in servers.values():
            server.stop()
    runs = []
    for workers in WORKERS:
        one = levels[(workers, "keyword", 1)].summary()
        many = levels[(workers, "keyword", args.clients)].summary()
        _level_line(f"large workers {workers}", one)
        _level_line(f"large workers {workers}", many)
        runs.append({"workers": workers, "one_client": one, "level": many})
    return {
        "chunks": status["chunk_count"],
        "documents": status["document_count"],
        "queries": len(queries),
        "store_built": built,
        "runs": runs,
    }


def main(args: argparse.Namespace) -> None:
    checkout = args.checkout.resolve()
    with tempfile.TemporaryDirectory(prefix="kb-bench-concurrency-") as name:
        tmp = Path(name)
        corpus, runs = _throughput(args, checkout, tmp)
        large = None if args.no_large else _large(args, checkout, tmp)
    two = [r for r in runs if r["workers"] == 2]
    large_two = None if large is None else next(r for r in large["runs"] if r["workers"] == 2)
    met = {
        "ratio": all(r["ratio"] is not None and r["ratio"] >= TARGET_RATIO for r in two),
        "p95": None
        if large_two is None
        else large_two["level"]["p95_ms"] is not None
        and large_two["level"]["p95_ms"] <= TARGET_P95_S * 1000,
    }
    payload = {
        "checkout": str(checkout),
        "rounds": args.rounds,
        "corpus": corpus,
        "clients": args.clients,
        "duration_s": args.duration,
        "large_duration_s": args.large_duration,
        "target_ratio": TARGET_RATIO,
        "target_p95_s": TARGET_P95_S,
        "runs": runs,
        "large": large,
        "met": met,
    }
    name = f"concurrency-{args.label}" if args.label else "concurrency"
    path = write_result(name, payload)
    print(f"{'workers':>8} {'mode':>8} {'1 client/s':>11} {'N clients/s':>12} {'ratio':>6}")
    for run in runs:
        one, many = run["levels"]
        print(
            f"{run['workers']:>8} {run['mode']:>8} {one['searches_per_s']:>11} "
            f"{many['searches_per_s']:>12} {run['ratio']!s:>6}"
        )
    for run in (large or {}).get("runs", []):
        level = run["level"]
        print(f"large, workers {run['workers']}: p50 {level['p50_ms']}, p95 {level['p95_ms']} ms")
    log(f"wrote {path}")
