"""`kb serve`: a new one-line file's latency while another agent indexes.

How long one agent's new one-line file takes to be searchable while another agent
indexes a 50 MiB file and 40 uploads of 4 MiB, on ``kb serve``: this code and an older
commit's, in one run.

Each version gets a fresh bucket folder with three scopes (``uploader/manuals``,
``uploader/uploads``, ``neighbour/notes``, one small file each) and its own index file,
and the real ``kb serve ROOT --allow-writes`` (``bench.runs.concurrency.ServeProcess``: the
default 1 s poll, the hashing embedder) from its checkout: this working tree, then the
``layers/knowledge`` of ``--old-commit`` exported with ``git archive`` to a temporary
folder. Per version:

1. **baseline**: ``--tries`` times, the neighbour copies a new one-line file (a unique
   keyword in it) into ``ROOT/neighbour/notes/`` as a user would, and the benchmark
   searches the scope for that keyword every 20 ms until the file is found; a seeded
   pause of 0-1 s before each try spreads the tries over the poll's cycle.
2. **load**: a ``--size-mib`` text file (English words in sentences and paragraphs,
   seeded, cached under ``bench/data/noisy-neighbour/``) is copied into
   ``ROOT/uploader/manuals/`` (under a hidden name, then renamed, so no poll indexes half
   of it), and ``--puts`` parallel ``PUT``s of the largest body the route accepts
   (``knowledge.ingest.api_writes.put_limit``: 4 MiB, text/plain) go into
   ``uploader/uploads``. Once they are answered, the neighbour's tries run again, each
   giving up after ``--give-up`` seconds; none starts after ``--cap`` seconds of load.
   The status of both uploader scopes is sampled at the start of each try.
3. **drain**: a thread reads both uploader scopes' status every 0.5 s from the start of
   the load; the first time each holds its new documents (the document row and the
   chunks are swapped in by one transaction, so counted is searchable) is the time to
   searchable, confirmed at the end by a search for each file's own keyword. Until then
   the neighbour keeps trying (the *tail*): where a try is never held long, the
   measured tries cover only the load's first half minute, and the tail the rest, the
   big document's swap included.

Throughout the load a thread takes the index file's write lock from a connection of its
own every 0.1 s (``BEGIN IMMEDIATE``, ``ROLLBACK``) and times each wait: how long a
write of another scope would wait for SQLite at that moment.

Reported per version: p50/p95/max of both phases (a try that gave up counts its
``--give-up`` seconds, so a figure that reads one is a lower bound), the load p95 over the
baseline p95, how many tries started while the load was still being indexed, the PUT
answers, whether a status showed the big document's progress (``progress.document``,
``chunks_done``, ``chunks_estimated``), the tail's slowest try and the one under way at
the big document's swap, the write lock's longest waits, the server's CPU use (cores
busy, from ``/proc/<pid>/stat``) next to the whole machine's (``/proc/stat``: other work
on a shared machine takes its share) and its threads' seconds waiting for a CPU
(``schedstat``), and when the server's log says each neighbour file was indexed (this
code logs a job's changes as it ends; the old code logs a poll's once the whole poll is
done, so there the figure is the poll's end). The target: this code's
load p95 <= 2 s. If the default write quotas refuse PUTs (429), the count is recorded
and this code's run is repeated with ``--max-write-mib-per-minute 0`` so both versions
carry the same load (the old code has no quotas).

``.venv-bench/bin/python -m bench noisy-neighbour`` (``--skip-old`` measures this code
only). Writes ``bench/results/noisy-neighbour.json``. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import random
import re
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from itertools import accumulate
from pathlib import Path
from typing import Any

from bench.common.environment import DATA_DIR, REPO_ROOT, log, write_result
from bench.common.metrics import percentile
from bench.runs.concurrency import ServeProcess
from knowledge.core.model import IndexOptions
from knowledge.ingest.api_writes import put_limit

__all__ = ["TARGET_P95_S", "add_arguments", "generate_text", "main"]

NAME = "noisy-neighbour"
OLD_COMMIT = "d010b08"
TARGET_P95_S = 2.0
"""The done-when: this code's neighbour p95 under load, seconds."""
MIB = 2**20
MANUALS = ("uploader", "manuals")
UPLOADS = ("uploader", "uploads")
NOTES = ("neighbour", "notes")
BIG = "manual.txt"
SEARCH_EVERY_S = 0.02
STATUS_EVERY_S = 0.5
LOCK_EVERY_S = 0.1
_SAMPLES_KEPT = 6
_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ indexed (\S+?):? ")

# Common English words, most frequent first (weighted 1/rank): sentences that read like
# a manual's to the chunker and the keyword analysis.
_WORD_TEXT = """
the of and to a in is that for it as with be on not this by are or from at which can
you an will if all your has have more one use when also was set data file may other
into their these each new must system any such only used then time its two user than
first see should file value name first most where number some following files default
command line output input option options server client request response error list
table field record value values process program memory disk network port address host
service services configuration configure installed install package packages version
update updates page pages text document documents section sections chapter example
examples note notes warning information support supported feature features access
directory directories path paths key keys user users group groups account accounts
setting settings mode modes state status change changes changed create created delete
deleted write written read reads run runs running start started stop stopped open
close closed return returns call calls function functions method methods class object
objects type types string strings character characters byte bytes size length limit
limits level levels time times date dates day days week month year hour minute second
start end begin first last next previous before after during while until since always
never often usually sometimes every each both either neither few many much several
large small long short high low fast slow simple complex common special general local
remote public private secure safe current main default standard specific available
possible required optional necessary important useful different same similar other
another such own certain whole full empty single double multiple additional extra
network connection connections session sessions message messages event events signal
signals thread threads task tasks job jobs queue queues buffer buffers cache caches
index indexes search searches query queries result results order sort filter filters
match matches pattern patterns rule rules policy policies permission permissions role
roles owner owners team teams project projects report reports review reviews test tests
check checks verify verified build builds release releases deploy deployment machine
machines device devices driver drivers kernel module modules library libraries source
sources target targets format formats encoding encoded compress compressed archive
backup backups restore restored recover recovery failure failures problem problems
issue issues solution solutions reason reasons case cases way ways part parts step
steps stage stages phase phases point points line lines block blocks region regions
area areas zone zones space spaces room rooms building floor floors door doors window
windows power supply supplies temperature pressure voltage current flow rate rates
speed speeds weight weights volume volumes measure measured unit units meter meters
customer customers order orders invoice invoices payment payments price prices cost
costs budget budgets plan plans schedule schedules meeting meetings agenda minutes
manual manuals guide guides procedure procedures instruction instructions operator
operators maintenance inspection inspections safety hazard hazards equipment tool tools
"""
_WORDS = list(dict.fromkeys(_WORD_TEXT.split()))

_CONNECTORS = ("however", "therefore", "for example", "in practice", "as a rule", "then")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--size-mib", type=float, default=50.0, help="the big file's size (default 50 MiB)"
    )
    parser.add_argument("--puts", type=int, default=40, help="parallel 4 MiB PUTs (default 40)")
    parser.add_argument(
        "--tries", type=int, default=20, help="neighbour tries per phase (default 20)"
    )
    parser.add_argument("--skip-old", action="store_true", help="measure this code only")
    parser.add_argument(
        "--old-commit", default=OLD_COMMIT, help=f"the older version (default {OLD_COMMIT})"
    )
    parser.add_argument(
        "--give-up", type=float, default=120.0, help="seconds a try waits at most (default 120)"
    )
    parser.add_argument(
        "--cap",
        type=float,
        default=600.0,
        help="no try under load starts after this many seconds of load (default 600)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=1500.0,
        help="seconds from the load's start to wait for it to be searchable (default 1500)",
    )
    parser.add_argument("--seed", type=int, default=17)


# --- the load's text ---------------------------------------------------------------------


def _sentence(rng: random.Random, cum: list[float]) -> str:
    words = rng.choices(_WORDS, cum_weights=cum, k=rng.randint(6, 22))
    if rng.random() < 0.3:
        words.insert(rng.randint(2, len(words) - 1), rng.choice(_CONNECTORS) + ",")
    text = " ".join(words)
    return text[0].upper() + text[1:] + ("?" if rng.random() < 0.05 else ".")


def generate_text(path: Path, size_bytes: int, seed: int, marker: str) -> int:
    """Write about ``size_bytes`` (at least) of plain English-like text to ``path``: a
    first line naming ``marker`` (a word found nowhere else), then numbered chapters of
    paragraphs of 2-7 sentences. Same seed, same bytes; streamed, so little memory."""
    rng = random.Random(seed)
    cum = list(accumulate(1.0 / (rank + 1) for rank in range(len(_WORDS))))
    written = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="ascii", newline="\n") as out:
        head = f"Reference {marker}: generated text for the noisy-neighbour benchmark.\n\n"
        out.write(head)
        written += len(head)
        chapter = 0
        while written < size_bytes:
            chapter += 1
            title = " ".join(rng.choices(_WORDS, cum_weights=cum, k=4)).title()
            parts = [f"Chapter {chapter}. {title}\n\n"]
            for _ in range(rng.randint(8, 16)):
                sentences = [_sentence(rng, cum) for _ in range(rng.randint(2, 7))]
                parts.append(" ".join(sentences) + "\n\n")
            block = "".join(parts)
            out.write(block)
            written += len(block)
    return written


def _marker(kind: str, n: int) -> str:
    """A keyword of letters only (no tokenizer splits it), unique to one file."""
    return "nnb" + kind + "".join("qwertyuiop"[int(d)] for d in f"{n:04d}")


def _cached(name: str, size_bytes: int, seed: int, marker: str) -> Path:
    path = DATA_DIR / "noisy-neighbour" / name
    if not path.is_file():
        partial = path.with_suffix(".part")
        generate_text(partial, size_bytes, seed, marker)
        partial.replace(path)
    return path


def _bodies(count: int, size: int, seed: int) -> list[bytes]:
    """``count`` different bodies of exactly ``size`` bytes, each with its own marker."""
    bodies = []
    for n in range(count):
        path = _cached(f"upload-{n:03d}-{size}.txt", size, seed + 1000 + n, _marker("up", n))
        data = path.read_bytes()[: size - 1] + b"\n"
        assert len(data) == size
        bodies.append(data)
    return bodies


# --- talking to the server ---------------------------------------------------------------


def _call(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    content_type: str = "application/json",
    timeout: float = 60.0,
) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": content_type})
        response = conn.getresponse()
        raw = response.read()
        try:
            answer = json.loads(raw) if raw else None
        except ValueError:
            answer = raw[:200].decode("utf-8", "replace")
        return response.status, answer
    finally:
        conn.close()


def _scope_url(scope: tuple[str, str]) -> str:
    return f"/v1/agents/{scope[0]}/contexts/{scope[1]}"


def _status(port: int, scope: tuple[str, str]) -> dict[str, Any]:
    code, answer = _call(port, "GET", _scope_url(scope) + "/status")
    if code != 200 or not isinstance(answer, dict):
        return {"error": f"status {code}"}
    return answer


def _found(port: int, scope: tuple[str, str], word: str, path: str) -> bool:
    body = json.dumps({"query": word, "mode": "keyword", "min_score": 0, "max_results": 5})
    code, answer = _call(port, "POST", _scope_url(scope) + "/search", body.encode())
    if code != 200 or not isinstance(answer, dict):
        return False
    return any(r.get("document_path") == path for r in answer.get("results", []))


def _sample(status: dict[str, Any]) -> dict[str, Any]:
    """What a status says about work under way, without the rest."""
    keep = ("state", "message", "document_count", "chunk_count", "progress", "error")
    return {k: status[k] for k in keep if k in status}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the folder, the old checkout --------------------------------------------------------


def _layout(root: Path) -> None:
    """The three scopes, one small file each (so each exists and is indexed at start)."""
    for agent, context in (MANUALS, UPLOADS, NOTES):
        folder = root / agent / context
        folder.mkdir(parents=True)
        (folder / "readme.txt").write_text(f"The {context} of {agent}: start here.\n", "utf-8")


@contextmanager
def _old_checkout(commit: str) -> Iterator[Path]:
    """``layers/knowledge`` of ``commit``, exported to a temporary folder (the repository,
    its index and its work tree are left alone)."""
    with tempfile.TemporaryDirectory(prefix="kb-bench-old-") as tmp:
        archive = Path(tmp) / "old.tar"
        subprocess.run(
            ["git", "archive", "-o", str(archive), commit, "layers/knowledge"],
            cwd=REPO_ROOT,
            check=True,
        )
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        archive.unlink()
        yield Path(tmp)


# --- one version -------------------------------------------------------------------------


class _Monitor:
    """Reads both uploader scopes' status every ``STATUS_EVERY_S`` from the load's start;
    notes when each first holds ``expected`` documents, and when both are READY too."""

    def __init__(self, port: int, expected: dict[tuple[str, str], int], started: float) -> None:
        self._port = port
        self._expected = expected
        self._started = started
        self.complete: dict[tuple[str, str], float] = {}
        self.ready_s: float | None = None
        self.states: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic() - self._started
            ready = True
            for scope, count in self._expected.items():
                try:
                    status = _status(self._port, scope)
                except (OSError, http.client.HTTPException):
                    ready = False
                    continue
                self.states[str(status.get("state"))] += 1
                if scope not in self.complete and status.get("document_count", 0) >= count:
                    self.complete[scope] = round(now, 2)
                ready = ready and scope in self.complete and status.get("state") == "READY"
            if ready and self.ready_s is None:
                self.ready_s = round(now, 2)
                return
            self._stop.wait(STATUS_EVERY_S)

    @property
    def searchable_s(self) -> float | None:
        if len(self.complete) < len(self._expected):
            return None
        return max(self.complete.values())

    def wait(self, until: float) -> None:
        while self.ready_s is None and time.monotonic() < until and self._thread.is_alive():
            time.sleep(0.5)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class _LockProbe:
    """Takes the index file's write lock from a connection of its own every
    ``LOCK_EVERY_S`` (``BEGIN IMMEDIATE``, then ``ROLLBACK``) and times each wait: what a
    write of another scope waits for at that moment. SQLite's busy handler retries with
    sleeps of up to 100 ms, so a wait is known to about 0.1 s."""

    def __init__(self, db: Path, started: float, timeout: float) -> None:
        self._conn = sqlite3.connect(
            str(db), timeout=timeout, isolation_level=None, check_same_thread=False
        )
        self._started = started
        self.waits: list[tuple[float, float]] = []  # (seconds into the load, wait)
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            asked = time.monotonic()
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                self.failed += 1
            waited = time.monotonic() - asked
            self.waits.append((round(asked - self._started, 2), round(waited, 3)))
            self._stop.wait(LOCK_EVERY_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()

    def summary(self) -> dict[str, Any]:
        waits = [wait for _, wait in self.waits]
        if not waits:
            return {"probes": 0}
        longest = sorted(self.waits, key=lambda item: -item[1])[:5]
        return {
            "probes": len(waits),
            "p50_wait_s": round(percentile(waits, 50), 3),
            "p99_wait_s": round(percentile(waits, 99), 3),
            "max_wait_s": max(waits),
            "over_0_25_s": sum(wait > 0.25 for wait in waits),
            "over_1_s": sum(wait > 1.0 for wait in waits),
            "longest": [{"at_s": at, "wait_s": wait} for at, wait in longest],
            "failed": self.failed,
        }


def _one_try(
    port: int, folder: Path, spare: Path, name: str, word: str, give_up: float
) -> dict[str, Any]:
    """Copy a one-line file in, search every 20 ms until it is found or ``give_up``."""
    source = spare / name
    source.write_text(f"Note for the team: {word} is on the agenda.\n", "utf-8")
    written_at = time.time()
    started = time.monotonic()
    shutil.copyfile(source, folder / name)
    searches = 0
    while True:
        searches += 1
        try:
            found = _found(port, NOTES, word, name)
        except (OSError, http.client.HTTPException):
            found = False
        elapsed = time.monotonic() - started
        if found:
            seconds, timed_out = elapsed, False
        elif elapsed >= give_up:
            seconds, timed_out = give_up, True
        else:
            time.sleep(SEARCH_EVERY_S)
            continue
        return {
            "file": name,
            "seconds": round(seconds, 3),
            "timed_out": timed_out,
            "searches": searches,
            "written_at": written_at,
        }


def _summary(tries: list[dict[str, Any]]) -> dict[str, Any]:
    values = [t["seconds"] for t in tries if "seconds" in t]
    if not values:
        return {"tries": 0}
    timed_out = sum(t.get("timed_out", False) for t in tries)
    n = len(values)
    answer: dict[str, Any] = {"tries": n}
    bounds = []
    for key, p in (("p50_s", 50), ("p95_s", 95), ("max_s", 100)):
        answer[key] = round(percentile(values, p), 3)
        # A try that gave up counts its give-up seconds, the largest value: a figure
        # that reads (or interpolates with) one of those is a lower bound.
        if math.ceil((n - 1) * p / 100) >= n - timed_out:
            bounds.append(key)
    answer["timed_out"] = timed_out
    answer["lower_bound"] = bool(bounds)
    answer["lower_bounds"] = bounds
    return answer


def _indexed_times(log_path: Path) -> dict[str, float]:
    """When the server's log says each path was indexed (epoch seconds)."""
    times: dict[str, float] = {}
    if not log_path.is_file():
        return times
    for line in log_path.read_text("utf-8", "replace").splitlines():
        match = _LOG_LINE.match(line)
        if match:
            stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            times.setdefault(match.group(2), stamp)
    return times


def _put_all(port: int, bodies: Sequence[bytes]) -> dict[str, Any]:
    """Every body as a parallel ``PUT`` into ``uploader/uploads``: the answers' codes."""

    def put(n: int) -> int:
        path = f"{_scope_url(UPLOADS)}/documents/upload-{n:03d}.txt"
        try:
            code, _ = _call(port, "PUT", path, bodies[n], "text/plain", timeout=300)
        except (OSError, http.client.HTTPException):
            return -1
        return code

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        codes = list(pool.map(put, range(len(bodies))))
    counts = Counter(codes)
    return {
        "seconds": round(time.monotonic() - started, 2),
        "202": counts.pop(202, 0),
        "429": counts.pop(429, 0),
        "other": {str(code): n for code, n in sorted(counts.items())},
        "accepted": [n for n, code in enumerate(codes) if code == 202],
    }


def _wait_ready(port: int, scopes: Sequence[tuple[str, str]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        statuses = [_status(port, scope) for scope in scopes]
        if all(s.get("state") == "READY" and s.get("document_count") == 1 for s in statuses):
            return
        time.sleep(0.3)
    raise RuntimeError(f"the start-up index did not finish within {timeout:.0f} s")


def _machine_ticks() -> tuple[int, int]:
    """All CPU ticks of the machine and its idle ones (idle + iowait), from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(values), values[3] + values[4]


def _busy_cores(before: tuple[int, int], after: tuple[int, int]) -> float:
    total, idle = after[0] - before[0], after[1] - before[1]
    return round((os.cpu_count() or 1) * (total - idle) / max(total, 1), 2)


def _thread_times(pid: int) -> dict[int, tuple[int, int]]:
    """Per thread of ``pid``: nanoseconds on a CPU, and runnable but waiting for one
    (``/proc/<pid>/task/<tid>/schedstat``)."""
    times: dict[int, tuple[int, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            cpu, wait, _ = task.joinpath("schedstat").read_text().split()
        except (OSError, ValueError):
            continue  # a request thread that ended meanwhile
        times[int(task.name)] = (int(cpu), int(wait))
    return times


def _thread_split(
    before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]
) -> dict[str, Any]:
    """The server's threads between two readings: CPU seconds, and seconds runnable but
    waiting for a CPU (taken by other work on the machine), in all and for the three
    busiest threads (the indexing workers)."""
    deltas = sorted(
        (
            (cpu - before.get(tid, (0, 0))[0], wait - before.get(tid, (0, 0))[1])
            for tid, (cpu, wait) in after.items()
        ),
        reverse=True,
    )
    return {
        "cpu_s": round(sum(d[0] for d in deltas) / 1e9, 1),
        "runqueue_wait_s": round(sum(d[1] for d in deltas) / 1e9, 1),
        "busiest": [
            {"cpu_s": round(cpu / 1e9, 1), "runqueue_wait_s": round(wait / 1e9, 1)}
            for cpu, wait in deltas[:3]
        ],
    }


def _neighbour_tries(
    port: int,
    notes: Path,
    spare: Path,
    prefix: str,
    rng: random.Random,
    args: argparse.Namespace,
    *,
    count: int | None = None,
    started: float | None = None,
    cap: float | None = None,
    until: Callable[[], bool] = lambda: False,
    sample: Callable[[], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """``count`` tries (or, without one, tries until ``until()``), each after a seeded
    0-1 s pause; ``started`` dates them, and none starts ``cap`` seconds after it."""
    tries: list[dict[str, Any]] = []
    n = 0
    while (n < count) if count is not None else not until():
        name, word = f"{prefix}-{n:03d}.txt", _marker(prefix, n)
        n += 1
        time.sleep(rng.random())
        at = time.monotonic() - started if started is not None else 0.0
        if cap is not None and at > cap:
            tries.append({"file": name, "not_run": True})
            continue
        status = sample() if sample is not None else None
        one = _one_try(port, notes, spare, name, word, args.give_up)
        one["at_s"] = round(at, 2)
        if status is not None:
            one["status"] = status
        tries.append(one)
    return tries


def _run_version(
    label: str,
    checkout: Path,
    args: argparse.Namespace,
    big: Path,
    bodies: Sequence[bytes],
    extra: Sequence[str] = (),
) -> dict[str, Any]:
    rng = random.Random(args.seed)
    result: dict[str, Any] = {"checkout": str(checkout), "options": list(extra)}
    loads: dict[str, list[float]] = {"start": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix=f"kb-bench-{NAME}-") as tmp:
        root, spare, server_log = Path(tmp) / "bucket", Path(tmp) / "spare", Path(tmp) / "log"
        _layout(root)
        spare.mkdir()
        notes = root.joinpath(*NOTES)
        options = ["--allow-writes", "--embedder", "hashing", *extra]
        log(f"{label}: starting kb serve from {checkout}")
        db = Path(tmp) / "k.db"
        server = ServeProcess(checkout, root, db, options, server_log)
        port, pid = server.port, server.process.pid
        try:
            _wait_ready(port, (MANUALS, UPLOADS, NOTES), timeout=120)
            baseline = _neighbour_tries(port, notes, spare, "base", rng, args, count=args.tries)
            result["baseline"] = _summary(baseline)
            log(f"{label}: baseline {result['baseline']}")

            loads["load_start"] = [round(x, 2) for x in os.getloadavg()]
            expected = {MANUALS: 2, UPLOADS: 1 + len(bodies)}
            started = time.monotonic()
            cpu_before, ticks_before = _cpu_seconds(pid), _machine_ticks()
            threads_before = _thread_times(pid)
            monitor = _Monitor(port, expected, started)
            lock = _LockProbe(db, started, args.give_up)
            folder = root.joinpath(*MANUALS)
            hidden = folder / f".{BIG}.part"  # hidden: never listed, so never half-read
            shutil.copyfile(big, hidden)
            hidden.replace(folder / BIG)
            puts = _put_all(port, bodies)
            if puts["202"] != len(bodies):
                expected[UPLOADS] = 1 + puts["202"]
            result["puts"] = {k: v for k, v in puts.items() if k != "accepted"}
            log(f"{label}: PUTs answered {result['puts']}")

            def statuses() -> dict[str, Any]:
                return {
                    "manuals": _sample(_status(port, MANUALS)),
                    "uploads": _sample(_status(port, UPLOADS)),
                }

            loaded = _neighbour_tries(
                port,
                notes,
                spare,
                "load",
                rng,
                args,
                count=args.tries,
                started=started,
                cap=args.cap,
                sample=statuses,
            )
            for one in loaded:
                if "seconds" in one:
                    log(f"{label}: try at {one['at_s']:.1f} s: {one['seconds']} s")
            tries_cpu = _cpu_seconds(pid) - cpu_before
            tries_wall = time.monotonic() - started
            loads["tries_end"] = [round(x, 2) for x in os.getloadavg()]
            deadline = started + args.drain_timeout
            tail = _neighbour_tries(
                port,
                notes,
                spare,
                "tail",
                rng,
                args,
                started=started,
                until=lambda: monitor.ready_s is not None or time.monotonic() > deadline,
            )
            monitor.wait(deadline)
            monitor.stop()
            drain_wall = time.monotonic() - started
            drain_cpu = _cpu_seconds(pid) - cpu_before
            drain_ticks = _machine_ticks()
            threads = _thread_split(threads_before, _thread_times(pid))
            lock.stop()
            found = {
                "big": _found(port, MANUALS, _marker("big", 0), BIG),
                "uploads": sum(
                    _found(port, UPLOADS, _marker("up", n), f"upload-{n:03d}.txt")
                    for n in puts["accepted"]
                ),
            }
            counts = {
                "manuals": _status(port, MANUALS).get("document_count"),
                "uploads": _status(port, UPLOADS).get("document_count"),
            }
        finally:
            server.stop()
        indexed = _indexed_times(server_log)
    searchable = monitor.searchable_s
    samples = [{"at_s": one["at_s"], **one.pop("status")} for one in loaded if "status" in one]
    for one in [*loaded, *tail]:
        if "seconds" not in one:
            continue
        one["under_load"] = searchable is None or one["at_s"] < searchable
        stamp = indexed.get("/".join((*NOTES, one["file"])))
        one["indexed_after_s"] = round(stamp - one["written_at"], 3) if stamp else None
        del one["written_at"]
    result["baseline_tries"] = [
        {k: v for k, v in one.items() if k != "written_at"} for one in baseline
    ]
    result["load"] = _summary(loaded)
    result["load"]["not_run"] = sum(1 for t in loaded if t.get("not_run"))
    result["load"]["started_under_load"] = sum(1 for t in loaded if t.get("under_load"))
    result["load_tries"] = loaded
    base_p95, load_p95 = result["baseline"].get("p95_s"), result["load"].get("p95_s")
    result["p95_ratio"] = round(load_p95 / base_p95, 1) if base_p95 and load_p95 else None
    result["tail"] = _tail(tail, monitor.complete.get(MANUALS))
    shown = [s for s in samples if (s["manuals"].get("progress") or {}).get("document")]
    progress_keys = ("document", "chunks_done", "chunks_estimated")
    result["big_progress_seen"] = (
        {k: shown[0]["manuals"]["progress"].get(k) for k in progress_keys} if shown else None
    )
    step = max(1, len(samples) // _SAMPLES_KEPT)
    result["status_samples"] = samples[::step][:_SAMPLES_KEPT]
    result["drain"] = {
        "big_searchable_s": monitor.complete.get(MANUALS),
        "uploads_searchable_s": monitor.complete.get(UPLOADS),
        "all_searchable_s": searchable,
        "ready_s": monitor.ready_s,
        "timeout_s": args.drain_timeout,
        "found_by_search": found,
        "new_documents": {
            "manuals": (counts["manuals"] or 1) - 1,
            "uploads": (counts["uploads"] or 1) - 1,
        },
        "status_states_seen": dict(monitor.states),
    }
    result["write_lock"] = lock.summary()
    result["server_cpu"] = {
        "during_tries_cores": round(tries_cpu / tries_wall, 2),
        "until_drained_cores": round(drain_cpu / drain_wall, 2),
        "cpu_s": round(drain_cpu, 1),
        "wall_s": round(drain_wall, 1),
        "machine_busy_cores": _busy_cores(ticks_before, drain_ticks),
        "threads": threads,
    }
    loads["end"] = [round(x, 2) for x in os.getloadavg()]
    result["load_average"] = loads
    return result


def _tail(tries: list[dict[str, Any]], big_at: float | None) -> dict[str, Any]:
    """The tries after the measured ones, until the load was searchable: their summary,
    the slowest, and the one under way when the big document was swapped in."""
    done = [t for t in tries if "seconds" in t]
    answer = _summary(done)
    if done:
        answer["slowest"] = max(done, key=lambda t: t["seconds"])
    if big_at is not None:
        # The monitor sees the swap up to STATUS_EVERY_S late.
        during = [
            t for t in done if t["at_s"] <= big_at and t["at_s"] + t["seconds"] >= big_at - 0.5
        ]
        answer["at_big_swap"] = during
    return answer


def main(args: argparse.Namespace) -> None:
    size = put_limit(IndexOptions().max_document_bytes)
    log(f"preparing the load: a {args.size_mib:g} MiB file and {args.puts} bodies of {size} bytes")
    big = _cached(
        f"manual-{args.size_mib:g}mib.txt", int(args.size_mib * MIB), args.seed, _marker("big", 0)
    )
    bodies = _bodies(args.puts, size, args.seed)
    versions: dict[str, Any] = {}
    new = _run_version("this code", REPO_ROOT, args, big, bodies)
    if new["puts"]["429"]:
        log(f"{new['puts']['429']} PUTs refused (429): again without the MiB quota")
        refused = new["puts"]["429"]
        new = _run_version(
            "this code", REPO_ROOT, args, big, bodies, ("--max-write-mib-per-minute", "0")
        )
        new["refused_with_default_quotas"] = refused
    versions["new"] = new
    if not args.skip_old:
        with _old_checkout(args.old_commit) as old_checkout:
            old = _run_version(f"old ({args.old_commit})", old_checkout, args, big, bodies)
            old["commit"] = args.old_commit
            versions["old"] = old
    ok = (new["load"].get("p95_s") or float("inf")) <= TARGET_P95_S
    payload = {
        "setup": {
            "big_file_bytes": big.stat().st_size,
            "puts": args.puts,
            "put_bytes": size,
            "tries": args.tries,
            "give_up_s": args.give_up,
            "cap_s": args.cap,
            "poll_interval_s": 1.0,
            "embedder": "hashing",
            "search_every_s": SEARCH_EVERY_S,
        },
        "target_p95_s": TARGET_P95_S,
        "met": ok,
        "versions": versions,
    }
    write_result(NAME, payload)
    for label, version in versions.items():
        print(f"{label}: baseline {version['baseline']}")
        print(f"{label}: load {version['load']}; ratio {version['p95_ratio']}")
        print(f"{label}: PUTs {version['puts']}; drain {version['drain']}")
