"""``kb serve`` under a hostile folder, a slow start, odd HTTP and signals (issue 9).

Real HTTP on 127.0.0.1, real files, links and FIFOs, real signals to real subprocesses.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from local_stack import over_workers, store_settings
from test_local_server import WAIT_SECONDS, request, search_paths, wait_until

from knowledge.config import open_store
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.base import Embedding
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.local.server import LocalServer
from knowledge.stores.embedded import EmbeddedKnowledgeStore
from knowledge.stores.protocol import KnowledgeStore

pytestmark = pytest.mark.integration


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


@contextmanager
def serving(
    root: Path,
    store: KnowledgeStore,
    *,
    poll_interval: float = 0.1,
    ready: bool = True,
    workers: int = 1,
) -> Iterator[LocalServer]:
    """``store`` (``root/../k.db`` when ``workers`` is above 1) served from ``root``."""
    server = LocalServer(
        root,
        store,
        host="127.0.0.1",
        port=0,
        poll_interval=poll_interval,
        body_timeout=0.5,
        workers=workers,
        worker_store=store_settings(root.parent / "k.db"),
    )
    server.start(wait=False)
    try:
        if ready:
            assert server.wait_until_ready(WAIT_SECONDS)
        yield server
    finally:
        server.stop()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[KnowledgeStore]:
    with closing(
        open_store(db_path=tmp_path / "k.db", embedder_name="hashing", environ={}, create=True)
    ) as s:
        yield s


# --- item 2: links out of a scope, at start-up, in the watcher and through reindex ------------


def test_links_never_expose_another_agents_files(tmp_path: Path, store: KnowledgeStore) -> None:
    root = tmp_path / "bucket"
    write(root / "agent-b" / "ctx1" / "secret.md", "# Secret\n\nthe zebra password is 1234\n")
    write(root / "agent-a" / "own" / "mine.md", "# Mine\n\nagent a notes\n")
    (root / "agent-a" / "stolen").symlink_to("../agent-b/ctx1")
    (root / "agent-c").symlink_to("agent-b")
    with serving(root, store) as server:
        url = server.url
        assert search_paths(url, "agent-b", "ctx1", "zebra") == ["secret.md"]
        assert search_paths(url, "agent-a", "stolen", "zebra") == []
        assert search_paths(url, "agent-c", "ctx1", "zebra") == []

        # reindex follows no link either, and says why the scope is empty
        status, body, _ = request(url, "POST", "/v1/agents/agent-a/contexts/stolen/reindex")
        assert status == 200, body
        assert body["indexed_documents"] == 0
        assert {"path": ".", "reason": "symlink outside its scope"} in body["skipped"]
        assert search_paths(url, "agent-a", "stolen", "zebra") == []

        # links made while the server runs: a scope link and a file link
        (root / "agent-a" / "later").symlink_to("../agent-b/ctx1")
        (root / "agent-a" / "own" / "link.md").symlink_to(root / "agent-b" / "ctx1" / "secret.md")
        write(root / "agent-a" / "own" / "marker.md", "# Marker\n\nokapi\n")
        wait_until(
            lambda: search_paths(url, "agent-a", "own", "okapi") == ["marker.md"],
            "the watcher has seen the new files",
        )
        assert search_paths(url, "agent-a", "own", "zebra") == []
        assert search_paths(url, "agent-a", "later", "zebra") == []


@pytest.mark.parametrize(
    "loops",
    [
        # A link to itself, and two links to each other: following either never ends.
        [("loop", "loop"), ("agent-a/loop", "loop")],
        [("ping", "pong"), ("pong", "ping"), ("agent-a/ping", "pong"), ("agent-a/pong", "ping")],
        # A link back to a folder above it (resolvable: a folder outside any scope).
        [("loop", "."), ("agent-a/loop", ".")],
    ],
)
def test_a_link_loop_in_the_served_folder_or_an_agent_folder_is_skipped(
    tmp_path: Path,
    store: KnowledgeStore,
    loops: list[tuple[str, str]],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    root = tmp_path / "bucket"
    write(root / "agent-a" / "own" / "mine.md", "# Mine\n\nthe okapi notes\n")
    for link, target in loops:
        (root / link).symlink_to(target)
    with serving(root, store) as server:
        status, body, _ = request(server.url, "GET", "/playground/scopes")
        assert status == 200, body
        assert body["scopes"] == [{"agent": "agent-a", "context": "own"}]
        assert search_paths(server.url, "agent-a", "own", "okapi") == ["mine.md"]
    logged = capfd.readouterr().err + caplog.text
    assert "Traceback" not in logged
    assert str(tmp_path) not in logged


# --- item 5: orphaned scopes ------------------------------------------------------------------


def test_a_scope_whose_folder_vanished_while_down_is_emptied_at_start_up(
    tmp_path: Path, store: KnowledgeStore
) -> None:
    root = tmp_path / "bucket"
    write(root / "ops" / "one" / "a.md", "# A\n\nzebra one\n")
    write(root / "ops" / "two" / "b.md", "# B\n\nzebra two\n")
    with serving(root, store) as server:
        assert search_paths(server.url, "ops", "two", "zebra") == ["b.md"]
    (root / "ops" / "two" / "b.md").unlink()
    (root / "ops" / "two").rmdir()  # while the server is down
    with serving(root, store) as server:
        assert search_paths(server.url, "ops", "two", "zebra") == []
        _, body, _ = request(server.url, "GET", "/v1/agents/ops/contexts/two/status")
        assert (body["state"], body["document_count"]) == ("EMPTY", 0)
        assert search_paths(server.url, "ops", "one", "zebra") == ["a.md"]
    assert [scope.key for scope in store.list_scopes()] == ["ops/one"]


def test_a_scope_kb_index_wrote_into_the_same_file_is_left_alone_by_kb_serve(
    tmp_path: Path,
) -> None:
    """``kb index DIR`` and ``kb serve ROOT`` share the default index file: the server
    empties the scopes whose folder vanished from *its* root, not a scope ``kb index``
    wrote from another folder (it used to empty it at every start)."""
    from knowledge.local.cli import main

    db = tmp_path / "k.db"
    notes = write(tmp_path / "notes" / "n.md", "# Notes\n\nthe okapi lives in forests\n")
    root = tmp_path / "bucket"
    write(root / "ops" / "one" / "a.md", "# A\n\nzebra one\n")
    write(root / "ops" / "two" / "b.md", "# B\n\nzebra two\n")
    argv = ["index", str(notes.parent), "--agent", "me", "--context", "notes", "--db", str(db)]
    assert main([*argv, "--embedder", "hashing"]) == 0

    with closing(open_store(db_path=db, embedder_name="hashing", environ={}, create=True)) as store:
        with serving(root, store) as server:
            assert search_paths(server.url, "me", "notes", "okapi") == ["n.md"]
            assert search_paths(server.url, "ops", "two", "zebra") == ["b.md"]
        (root / "ops" / "two" / "b.md").unlink()
        (root / "ops" / "two").rmdir()  # while the server is down
        with serving(root, store) as server:  # a second start: still there
            assert search_paths(server.url, "me", "notes", "okapi") == ["n.md"]
            _, body, _ = request(server.url, "GET", "/v1/agents/me/contexts/notes/status")
            assert (body["state"], body["document_count"]) == ("READY", 1)
            assert search_paths(server.url, "ops", "two", "zebra") == []  # its own: emptied
        assert [scope.key for scope in store.list_scopes()] == ["me/notes", "ops/one"]

        # The same scope given a folder under the root is the server's from then on.
        write(root / "me" / "notes" / "m.md", "# M\n\nthe okapi moved here\n")
        with serving(root, store) as server:
            assert search_paths(server.url, "me", "notes", "okapi") == ["m.md"]
        (root / "me" / "notes" / "m.md").unlink()
        (root / "me" / "notes").rmdir()
        with serving(root, store) as server:
            assert search_paths(server.url, "me", "notes", "okapi") == []


def test_reindex_of_a_vanished_scope_empties_it_and_a_404_names_no_server_path(
    tmp_path: Path, store: KnowledgeStore
) -> None:
    root = tmp_path / "bucket"
    write(root / "ops" / "one" / "a.md", "# A\n\nzebra one\n")
    with serving(root, store, poll_interval=600.0) as server:  # the watcher will not help
        (root / "ops" / "one" / "a.md").unlink()
        (root / "ops" / "one").rmdir()
        status, body, _ = request(server.url, "POST", "/v1/agents/ops/contexts/one/reindex")
        assert status == 200, body
        assert body["deleted_documents"] == 1
        assert search_paths(server.url, "ops", "one", "zebra") == []

        status, body, _ = request(server.url, "POST", "/v1/agents/ops/contexts/never/reindex")
        assert status == 404
        assert "ops/never" in body["error"]
        assert str(tmp_path) not in json.dumps(body)
        assert "bucket" not in body["error"]


# --- item 6: serve at once, progress ----------------------------------------------------------


class GatedEmbedder:
    """The hashing embedder, but every batch waits for a permit: the test decides how
    far the start-up index gets."""

    def __init__(self) -> None:
        self._inner = HashingEmbedder()
        self.permits = threading.Semaphore(0)

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dimensions(self) -> int:
        return self._inner.dimensions

    def embed(self, text: str) -> Embedding:
        return self._inner.embed(text)

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        if not self.permits.acquire(timeout=30):
            raise TimeoutError("no permit")
        return self._inner.embed_batch(texts)


def test_health_answers_and_status_reports_progress_while_the_start_up_index_runs(
    tmp_path: Path,
) -> None:
    root = tmp_path / "bucket"
    for n in range(5):  # indexed first (scopes go in order)
        write(root / "ops" / "alpha" / f"doc{n}.md", f"# Doc {n}\n\nzebra number {n}\n")
    for n in range(3):
        write(root / "ops" / "beta" / f"doc{n}.md", f"# Later {n}\n\nokapi number {n}\n")
    embedder = GatedEmbedder()
    starting: list[LocalServer] = []

    def start() -> None:
        server = LocalServer(root, store, host="127.0.0.1", port=0, poll_interval=0.1)
        starting.append(server)
        server.start(wait=False)

    with closing(EmbeddedKnowledgeStore(tmp_path / "k.db", embedder)) as store:
        starter = threading.Thread(target=start, daemon=True)
        starter.start()
        try:
            starter.join(5.0)
            assert not starter.is_alive(), "start() waits for the start-up index"
            url = starting[0].url
            status, body, _ = request(url, "GET", "/v1/health")
            assert (status, body["status"]) == (200, "ok")

            def status_of(context: str) -> dict[str, Any]:
                return request(url, "GET", f"/v1/agents/ops/contexts/{context}/status")[1]

            # From the moment start() returns, the status says the index is under way
            # (while the folders are listed, without counts yet).
            assert status_of("alpha")["state"] == "INDEXING"
            wait_until(
                lambda: status_of("alpha")["progress"] is not None,
                "the totals are known once the folders are listed",
            )
            first = status_of("alpha")
            assert first["state"] == "INDEXING"
            assert first["progress"]["documents_total"] == 5
            assert first["progress"]["documents_done"] <= 1
            pending = status_of("beta")
            assert pending["state"] == "INDEXING"
            assert pending["progress"] == {"documents_done": 0, "documents_total": 3}

            for _ in range(3):
                embedder.permits.release()
            wait_until(
                lambda: status_of("alpha")["progress"]["documents_done"] >= 3,
                "progress counts the documents done",
            )
            for _ in range(5):
                embedder.permits.release()
            assert starting[0].wait_until_ready(WAIT_SECONDS)
            done = status_of("beta")
            assert (done["state"], done["document_count"], done["progress"]) == ("READY", 3, None)
            assert search_paths(url, "ops", "alpha", "zebra") != []
        finally:
            for _ in range(20):
                embedder.permits.release()  # whatever happened, let the index finish
            starter.join(WAIT_SECONDS)
            for server in starting:
                server.stop()


class SlowListingStore(EmbeddedKnowledgeStore):
    """An embedded store whose ``list_scopes`` waits for the test: the start-up index is
    held while it lists what to index."""

    listed = threading.Event()

    def list_scopes(self) -> list[KnowledgeScope]:
        assert self.listed.wait(30), "the test never let the listing go on"
        return super().list_scopes()


def test_status_says_indexing_while_the_start_up_index_is_still_listing(tmp_path: Path) -> None:
    root = tmp_path / "bucket"
    write(root / "ops" / "alpha" / "doc.md", "# Doc\n\nzebra\n")
    SlowListingStore.listed = threading.Event()
    with closing(SlowListingStore(tmp_path / "k.db", HashingEmbedder())) as store:
        server = LocalServer(root, store, host="127.0.0.1", port=0, poll_interval=0.1)
        server.start(wait=False)
        try:
            status = request(server.url, "GET", "/v1/agents/ops/contexts/alpha/status")[1]
            assert (status["state"], status["progress"]) == ("INDEXING", None)
            assert "listing" in status["message"]
            SlowListingStore.listed.set()
            assert server.wait_until_ready(WAIT_SECONDS)
            status = request(server.url, "GET", "/v1/agents/ops/contexts/alpha/status")[1]
            assert (status["state"], status["document_count"]) == ("READY", 1)
        finally:
            SlowListingStore.listed.set()
            server.stop()


# --- item 8: every HTTP edge case answers JSON in the API's error shape -----------------------


@pytest.fixture
def server(tmp_path: Path, store: KnowledgeStore, workers: int) -> Iterator[LocalServer]:
    root = tmp_path / "bucket"
    write(root / "ops-bot" / "runbooks" / "rollback.md", "# Rollback\n\nhelm rollback\n")
    with serving(root, store, workers=workers) as local:
        yield local


def exchange(server: LocalServer, raw: bytes, *, read_timeout: float = 5.0) -> bytes:
    """Send raw bytes; return everything the server answers until it closes (or goes
    quiet for ``read_timeout`` seconds)."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=read_timeout) as conn:
        conn.sendall(raw)
        reply = b""
        try:
            while chunk := conn.recv(65536):
                reply += chunk
        except TimeoutError:
            pass
    return reply


def parse(reply: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, payload = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    match = re.match(r"HTTP/1\.1 (\d{3}) ", lines[0])
    assert match, reply[:200]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(match.group(1)), headers, payload


def assert_error_shape(payload: bytes) -> dict[str, Any]:
    body = json.loads(payload)
    assert set(body) == {"error", "field"}
    assert isinstance(body["error"], str)
    assert body["error"]
    return body


@pytest.mark.parametrize("method", ["OPTIONS", "TRACE", "FOO", "PROPFIND"])
def test_unknown_methods_are_405_with_allow(server: LocalServer, method: str) -> None:
    # Connection: close, so the answer ends with the connection, not with the read timeout
    raw = f"{method} /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    reply = exchange(server, raw.encode())
    status, headers, payload = parse(reply)
    assert status == 405
    assert headers["allow"] == "GET"
    assert headers["content-type"] == "application/json; charset=utf-8"
    assert method in assert_error_shape(payload)["error"]


@over_workers
def test_head_is_405_with_allow_and_no_body(server: LocalServer) -> None:
    reply = exchange(server, b"HEAD /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    status, headers, payload = parse(reply)
    assert (status, headers["allow"], payload) == (405, "GET", b"")
    assert headers["content-type"] == "application/json; charset=utf-8"


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"THIS IS NOT A REQUEST LINE\r\n\r\n", 400),
        (b"GET /v1/health HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
        (
            b"GET /v1/health HTTP/1.1\r\n"
            + b"".join(b"X-H%d: v\r\n" % n for n in range(150))
            + b"\r\n",
            431,
        ),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
    ],
    ids=["request-line", "long-header", "many-headers", "long-uri"],
)
def test_protocol_errors_are_json(server: LocalServer, raw: bytes, status: int) -> None:
    got, headers, payload = parse(exchange(server, raw))
    assert got == status
    assert headers["content-type"] == "application/json; charset=utf-8"
    assert_error_shape(payload)


@over_workers
def test_a_lone_surrogate_in_the_body_gets_a_json_answer(server: LocalServer) -> None:
    body = b'{"query": "\\ud800 rollback"}'
    raw = (
        b"POST /v1/agents/ops-bot/contexts/runbooks/search HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    status, _, payload = parse(exchange(server, raw))
    assert status == 400
    assert assert_error_shape(payload)["field"] in {"body", "query"}


def test_a_path_sent_as_raw_utf_8_means_what_it_says(tmp_path: Path, store: KnowledgeStore) -> None:
    """A client that does not percent-encode (raw UTF-8 on the request line) gets the
    document it named, and an error that quotes its own text, not Latin-1 mojibake;
    bytes that are not UTF-8 are a 400 naming the path."""
    root = tmp_path / "bucket"
    write(root / "ops-bot" / "runbooks" / "배포.md", "# 배포\n\nhelm rollback\n")
    with serving(root, store) as server:

        def get(path: bytes) -> tuple[int, dict[str, Any]]:
            raw = b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            status, _, payload = parse(exchange(server, raw))
            return status, json.loads(payload.decode("utf-8"))

        base = b"/v1/agents/ops-bot/contexts/runbooks/documents/"
        status, body = get(base + "배포.md".encode())
        assert (status, body["path"]) == (200, "배포.md")
        status, body = get("/v1/agents/팀/contexts/runbooks/status".encode())
        assert (status, body["field"]) == (400, "agent")
        assert "'팀'" in body["error"]
        status, body = get(base + b"\xff\xfe.md")
        assert (status, body["field"]) == (400, "path")
        assert "UTF-8" in body["error"]


@over_workers
def test_a_body_shorter_than_its_content_length_is_answered_after_a_short_wait(
    server: LocalServer,
) -> None:
    raw = (
        b"POST /v1/agents/ops-bot/contexts/runbooks/search HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b'Content-Length: 100\r\n\r\n{"query": "x"}'
    )
    started = time.monotonic()
    status, _, payload = parse(exchange(server, raw, read_timeout=20.0))
    assert status in {400, 408}
    assert assert_error_shape(payload)["field"] == "body"
    # body_timeout is 0.5 s, not the 30 s idle time (15 s: room for a loaded machine)
    assert time.monotonic() - started < 15.0


@over_workers
def test_a_body_trickled_in_is_cut_off_after_the_body_timeout(server: LocalServer) -> None:
    """``body_timeout`` (0.5 s here) is the time the whole body may take, not the time
    between two of its bytes: a client sending a byte every 0.1 s must not hold the
    request open for as long as it likes. The trickle lasts at least 3 s, so the 408
    comes before the body is complete, however loaded the machine is."""
    host, port = server.url.removeprefix("http://").split(":")
    body = b'{"query": "' + b"x" * 18 + b'"}'
    head = (
        b"POST /v1/agents/ops-bot/contexts/runbooks/search HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    with socket.create_connection((host, int(port)), timeout=WAIT_SECONDS) as conn:
        conn.sendall(head)
        reply = b""
        for byte in body:
            if select.select([conn], [], [], 0.1)[0]:  # the server answered meanwhile
                break
            try:
                conn.sendall(bytes([byte]))
            except OSError:  # it closed the connection after answering
                break
        while chunk := conn.recv(65536):
            reply += chunk
    status, _, payload = parse(reply)
    assert (status, assert_error_shape(payload)["field"]) == (408, "body")


# --- item 3: TCP_NODELAY and the listen backlog -----------------------------------------------


@over_workers
def test_keep_alive_responses_are_not_held_back_by_nagle(server: LocalServer) -> None:
    """With Nagle's algorithm on, a response written as headers then body waits for the
    client's delayed ACK: every keep-alive request after the first took 40+ ms."""
    host, port = server.url.removeprefix("http://").split(":")

    def quartile_of_later_requests() -> float:
        timings = []
        with socket.create_connection((host, int(port)), timeout=5) as conn:
            reader = conn.makefile("rb")
            for _ in range(12):
                started = time.perf_counter()
                conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                length = 0
                while (line := reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                reader.read(length)
                timings.append(time.perf_counter() - started)
        # The first answer goes out before the client delays its ACKs; the rest waited.
        later = sorted(timings[1:])
        return later[len(later) // 4]  # the lower quartile: a loaded machine slows some

    # Nagle holds every later answer for the delayed ACK (>= 40 ms on Linux) in every
    # attempt, however idle the machine; a loaded machine slows whole attempts, so one
    # fast attempt of up to twenty is the proof (the loop ends at the first).
    quartiles = []
    for _ in range(20):
        quartiles.append(quartile_of_later_requests())
        if quartiles[-1] < 0.030:
            break
    assert min(quartiles) < 0.030, [round(m * 1000, 1) for m in quartiles]


def kb_serve(
    root: Path,
    db: Path,
    *extra: str,
    script: str | None = None,
    prefix: Sequence[str] = (),
    stderr: Any = subprocess.PIPE,
) -> subprocess.Popen[str]:
    """``kb serve ROOT --port 0 --db DB --poll-interval 0.2 EXTRA...`` in a child Python
    (``script`` instead of the plain ``kb`` main; ``prefix``: a command to run it under)."""
    code = (
        script or "import sys; from knowledge.local.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    argv = [sys.executable, "-c", code, "serve", str(root), "--port", "0", "--db", str(db)]
    return subprocess.Popen(
        [*prefix, *argv, "--poll-interval", "0.2", *extra],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        encoding="utf-8",
    )


def served_url(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"on (http://127\.0\.0\.1:\d+) \(Ctrl-C to stop\)", line)
    assert match, line
    return match.group(1)


@contextmanager
def running(process: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    try:
        yield process
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
        process.communicate()


def test_a_burst_of_64_connections_is_queued_not_dropped(tmp_path: Path) -> None:
    """The server process is stopped (SIGSTOP), so only the kernel's accept queue, sized
    by the listen backlog, takes connections: with the stdlib's 5, only 6 got in."""
    root = tmp_path / "bucket"
    write(root / "ops" / "one" / "a.md", "# A\n\nzebra\n")
    with running(kb_serve(root, tmp_path / "k.db")) as process:
        url = served_url(process)
        port = int(url.rsplit(":", 1)[1])
        os.kill(process.pid, signal.SIGSTOP)
        clients = []
        try:
            for _ in range(64):
                client = socket.socket()
                client.setblocking(False)
                client.connect_ex(("127.0.0.1", port))
                clients.append(client)
            deadline = time.monotonic() + 20.0  # the kernel answers at once; margin for load
            connected: set[socket.socket] = set()
            while len(connected) < len(clients) and time.monotonic() < deadline:
                _, writable, _ = select.select(
                    [], [c for c in clients if c not in connected], [], 0.1
                )
                connected.update(
                    c for c in writable if c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
                )
            assert len(connected) == 64
        finally:
            os.kill(process.pid, signal.SIGCONT)
        for client in clients:
            client.setblocking(True)
            client.settimeout(10)
            client.sendall(
                b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            )
        replies = []
        for client in clients:
            with client:
                reply = b""
                while chunk := client.recv(65536):
                    reply += chunk
                replies.append(reply)
        assert all(reply.startswith(b"HTTP/1.1 200 ") for reply in replies)
        process.send_signal(signal.SIGTERM)
        process.wait(WAIT_SECONDS)


# --- item 6 (terminal) and item 7: progress line, signal-safe stop ----------------------------


def test_kb_serve_prints_the_start_up_progress(tmp_path: Path) -> None:
    root = tmp_path / "bucket"
    for n in range(4):
        write(root / "ops" / "one" / f"d{n}.md", f"# D{n}\n\nzebra {n}\n")
    with running(kb_serve(root, tmp_path / "k.db")) as process:
        url = served_url(process)
        wait_until(
            lambda: (
                request(url, "GET", "/v1/agents/ops/contexts/one/status")[1]["state"] == "READY"
            ),
            "the start-up index is done",
        )
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=WAIT_SECONDS)
    assert process.returncode == 0, err
    assert "indexed 4/4 documents" in err


# Runs ``kb serve`` and sends SIGTERM to itself at the worst moment for a handler that
# takes a lock: inside threading.Condition.wait, with the condition's lock held, on the
# main thread (a signal that lands there during Event.wait() is what once hung a server).
_SIGNAL_AT_WORST_MOMENT = """
import os, signal, sys, threading
from knowledge.local.cli import main

fired = [0]

def hook(frame, event, arg):
    if (
        event == "call"
        and fired[0] < 3
        and frame.f_code.co_name == "wait"
        and frame.f_code.co_filename == threading.__file__
        and isinstance(frame.f_locals.get("self"), threading.Condition)
        and threading.current_thread() is threading.main_thread()
        and callable(signal.getsignal(signal.SIGTERM))  # the server's handler is installed
    ):
        fired[0] += 1
        os.kill(os.getpid(), signal.SIGTERM)

sys.setprofile(hook)
sys.exit(main(sys.argv[1:]))
"""


def test_a_signal_at_any_moment_stops_the_server(tmp_path: Path) -> None:
    root = tmp_path / "bucket"
    write(root / "ops" / "one" / "a.md", "# A\n\nzebra\n")
    with running(kb_serve(root, tmp_path / "k.db", script=_SIGNAL_AT_WORST_MOMENT)) as process:
        assert process.stdout is not None
        first = process.stdout.readline()
        try:  # the hook's own signals stop it; if none landed, one from outside must
            process.wait(5.0)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                pytest.fail("the server ignored SIGTERM (its signal handler deadlocked)")
        out = first + process.stdout.read()
    assert process.returncode == 0, out
    assert "Serving" in out
    assert "Stopping..." in out


# --- a start-up index that can never write: said at once, not retried forever -----------------


def test_kb_serve_that_can_never_write_its_index_exits_with_the_reason(tmp_path: Path) -> None:
    """`--embedder none` over a file built with vectors: every write is refused. The server
    used to keep serving the old index as READY while the watcher failed every file every
    poll; `kb serve` now stops with the store's message and exit code 2."""
    root = tmp_path / "bucket"
    write(root / "ops-bot" / "runbooks" / "rollback.md", "# Rollback\n\nhelm rollback\n")
    db = tmp_path / "k.db"
    built = open_store(db_path=db, embedder_name="hashing", environ={}, create=True)
    with closing(built), serving(root, built):
        pass  # the file now records the hashing embedder
    process = kb_serve(root, db, "--embedder", "none")
    try:
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 2, err
    assert "kb: error: index" in err
    assert "refusing to write chunks without vectors" in err
    assert "Traceback" not in err


def test_a_server_whose_start_up_index_is_misconfigured_is_never_ready(tmp_path: Path) -> None:
    root = tmp_path / "bucket"
    write(root / "ops-bot" / "runbooks" / "rollback.md", "# Rollback\n\nhelm rollback\n")
    db = tmp_path / "k.db"
    built = open_store(db_path=db, embedder_name="hashing", environ={}, create=True)
    with closing(built), serving(root, built):
        pass
    with closing(
        open_store(db_path=db, embedder_name="none", environ={}, create=True)
    ) as keyword_only:
        server = LocalServer(root, keyword_only, port=0, poll_interval=0.1)
        server.start(wait=False)
        try:
            assert not server.wait_until_ready(WAIT_SECONDS)  # returns once it failed
            assert server.startup_error is not None
            assert "refusing to write chunks without vectors" in str(server.startup_error)
            status, body, _ = request(
                server.url, "GET", "/v1/agents/ops-bot/contexts/runbooks/status"
            )
            assert (status, body["state"]) == (200, "ERROR")
            assert "refusing to write chunks without vectors" in body["message"]
        finally:
            server.stop()


# --- DNS rebinding and other sites' pages ------------------------------------------------------


def _get_documents(server: LocalServer, headers: str) -> tuple[int, dict[str, Any]]:
    raw = (
        "GET /v1/agents/ops-bot/contexts/runbooks/documents HTTP/1.1\r\n"
        f"{headers}Connection: close\r\n\r\n"
    )
    status, _, payload = parse(exchange(server, raw.encode()))
    return status, json.loads(payload)


@pytest.mark.parametrize(
    ("headers", "status", "field"),
    [
        # A name an attacker's DNS answers with 127.0.0.1: the browser sends its own name.
        ("Host: rebind.attacker.example:{port}\r\n", 421, "Host"),
        ("Host: 192.168.1.20:{port}\r\n", 421, "Host"),
        # A page of another site posting (or reading, after a rebinding) to the server.
        ("Host: 127.0.0.1:{port}\r\nOrigin: https://attacker.example\r\n", 403, "Origin"),
        ("Host: 127.0.0.1:{port}\r\nOrigin: null\r\n", 403, "Origin"),
    ],
    ids=["rebound-name", "lan-address", "foreign-origin", "null-origin"],
)
def test_a_page_of_another_site_cannot_read_the_local_index(
    server: LocalServer, headers: str, status: int, field: str
) -> None:
    """A server on 127.0.0.1 answers only requests addressed to a loopback name, and no
    request a page of another site sent (``Origin``): otherwise any web page the user
    opens could read every scope (DNS rebinding) or start reindexes."""
    port = server.url.rsplit(":", 1)[1]
    got, body = _get_documents(server, headers.format(port=port))
    assert (got, body.get("field")) == (status, field), body
    assert "rollback" not in json.dumps(body)


@pytest.mark.parametrize(
    "headers",
    [
        "Host: 127.0.0.1:{port}\r\n",
        "Host: localhost:{port}\r\n",
        "Host: LOCALHOST\r\n",
        "Host: [::1]:{port}\r\n",
        "Host: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n",  # the playground
        "Host: localhost:{port}\r\nOrigin: http://localhost:{port}\r\n",
        "",  # HTTP/1.0-style clients may send no Host at all
    ],
    ids=["ip", "localhost", "upper-case", "ipv6", "own-origin", "localhost-origin", "no-host"],
)
def test_requests_addressed_to_a_loopback_name_are_served(
    server: LocalServer, headers: str
) -> None:
    port = server.url.rsplit(":", 1)[1]
    got, body = _get_documents(server, headers.format(port=port))
    assert got == 200, body
    assert [d["path"] for d in body["documents"]] == ["rollback.md"]


# --- a folder the server cannot read ---------------------------------------------------------


def _as_plain_user() -> list[str]:
    """A command prefix under which permissions apply: root reads a folder of mode 000
    through its DAC capabilities, so as root they are dropped (util-linux ``setpriv``)."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all"]


_KB = "import sys; from knowledge.local.cli import main; sys.exit(main(sys.argv[1:]))"


@contextmanager
def unreadable(folder: Path) -> Iterator[None]:
    folder.chmod(0)
    try:
        yield
    finally:  # pytest's clean-up and the next run need it back
        folder.chmod(0o755)


def test_kb_index_keeps_the_documents_of_a_folder_it_cannot_read(tmp_path: Path) -> None:
    """A folder that cannot be listed (permission denied; an I/O error on a share) holds
    what it held: its documents stay searchable, the rest of the folder is synced (a
    deleted file is removed), and the reason names no path of the machine."""
    docs = tmp_path / "docs"
    write(docs / "keep.md", "# Keep\n\nokapi keep\n")
    write(docs / "gone.md", "# Gone\n\nokapi gone\n")
    write(docs / "private" / "secret.md", "# Secret\n\nokapi secret\n")
    db = tmp_path / "k.db"
    scope = ["--agent", "ops", "--context", "one", "--db", str(db)]
    first = subprocess.run(
        [sys.executable, "-c", _KB, "index", str(docs), *scope],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert first.returncode == 0, first.stderr
    (docs / "gone.md").unlink()
    with unreadable(docs / "private"):
        again = subprocess.run(
            [*_as_plain_user(), sys.executable, "-c", _KB, "index", str(docs), *scope, "--json"],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert again.returncode == 1, again.stderr  # a file error: exit 1 with the reasons
    result = json.loads(again.stdout)
    assert result["errors"] == [{"path": "private/", "reason": "cannot list: Permission denied"}]
    assert result["deleted_documents"] == 1
    assert str(tmp_path) not in again.stdout
    found = subprocess.run(
        [sys.executable, "-c", _KB, "search", "okapi", *scope, "--json"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    paths = sorted({r["document_path"] for r in json.loads(found.stdout)["results"]})
    assert paths == ["keep.md", "private/secret.md"]


def test_kb_index_reindex_keeps_the_documents_of_a_folder_it_cannot_read(
    tmp_path: Path,
) -> None:
    """A reindex drops the scope and writes it again, but not what a folder it cannot
    list held (before, those documents were dropped with the rest): the listed files are
    rewritten, a deleted one is removed, the unreadable folder's documents stay."""
    docs = tmp_path / "docs"
    write(docs / "keep.md", "# Keep\n\nokapi keep\n")
    write(docs / "gone.md", "# Gone\n\nokapi gone\n")
    write(docs / "private" / "secret.md", "# Secret\n\nokapi secret\n")
    db = tmp_path / "k.db"
    scope = ["--agent", "ops", "--context", "one", "--db", str(db)]
    kb = [sys.executable, "-c", _KB]
    first = subprocess.run(
        [*kb, "index", str(docs), *scope], check=False, capture_output=True, text=True, timeout=120
    )
    assert first.returncode == 0, first.stderr
    (docs / "gone.md").unlink()
    write(docs / "keep.md", "# Keep\n\nokapi keep, rewritten\n")
    with unreadable(docs / "private"):
        again = subprocess.run(
            [*_as_plain_user(), *kb, "index", str(docs), *scope, "--reindex", "--json"],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert again.returncode == 1, again.stderr  # a file error: exit 1 with the reasons
    result = json.loads(again.stdout)
    assert result["errors"] == [{"path": "private/", "reason": "cannot list: Permission denied"}]
    assert (result["indexed_documents"], result["deleted_documents"]) == (1, 1)
    found = subprocess.run(
        [*kb, "search", "okapi", *scope, "--json", "--max-results", "10"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    results = json.loads(found.stdout)["results"]
    assert sorted({r["document_path"] for r in results}) == ["keep.md", "private/secret.md"]
    assert any("rewritten" in r["content"] for r in results)


def test_a_reindex_that_keeps_an_unreadable_folder_keeps_the_listings_own_problems(
    tmp_path: Path,
) -> None:
    """An indexed file that the listing now leaves out with a reason (here: it became a
    link out of its scope) is removed and its status problem says why, also when a
    folder that cannot be listed keeps the reindex from replacing the scope."""
    docs = tmp_path / "docs"
    write(docs / "keep.md", "# Keep\n\nokapi keep\n")
    write(docs / "link.md", "# Link\n\nokapi link\n")
    write(docs / "private" / "secret.md", "# Secret\n\nokapi secret\n")
    outside = write(tmp_path / "outside.md", "# Outside\n\nokapi outside\n")
    db = tmp_path / "k.db"
    scope = ["--agent", "ops", "--context", "one", "--db", str(db)]
    kb = [sys.executable, "-c", _KB]
    first = subprocess.run(
        [*kb, "index", str(docs), *scope], check=False, capture_output=True, text=True, timeout=120
    )
    assert first.returncode == 0, first.stderr
    (docs / "link.md").unlink()
    (docs / "link.md").symlink_to(outside)
    with unreadable(docs / "private"):
        again = subprocess.run(
            [*_as_plain_user(), *kb, "index", str(docs), *scope, "--reindex", "--json"],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert again.returncode == 1, again.stderr
    assert json.loads(again.stdout)["deleted_documents"] == 1  # link.md
    status = subprocess.run(
        [*kb, "status", *scope, "--json"], check=False, capture_output=True, text=True, timeout=120
    )
    problems = {p["document_path"]: p["reason"] for p in json.loads(status.stdout)["problems"]}
    assert problems.get("link.md") == "symlink outside its scope"
    assert problems.get("private/") == "cannot list: Permission denied"


def test_the_watcher_syncs_the_rest_of_a_scope_with_a_folder_it_cannot_read(
    tmp_path: Path,
) -> None:
    """Before, one unreadable folder froze the scope: no deletion anywhere in it was
    applied while the folder stayed unreadable."""
    root = tmp_path / "bucket"
    folder = root / "ops" / "one"
    write(folder / "keep.md", "# Keep\n\nokapi keep\n")
    write(folder / "gone.md", "# Gone\n\nokapi gone\n")
    write(folder / "private" / "secret.md", "# Secret\n\nokapi secret\n")
    with (
        (tmp_path / "serve.log").open("w") as log,
        running(kb_serve(root, tmp_path / "k.db", prefix=_as_plain_user(), stderr=log)) as process,
    ):
        url = served_url(process)
        wait_until(
            lambda: (
                search_paths(url, "ops", "one", "okapi")
                == ["gone.md", "keep.md", "private/secret.md"]
            ),
            "the start-up index is done",
        )
        with unreadable(folder / "private"):
            (folder / "gone.md").unlink()
            wait_until(
                lambda: (
                    search_paths(url, "ops", "one", "okapi") == ["keep.md", "private/secret.md"]
                ),
                "the deletion is applied and the unreadable folder's document kept",
            )
            wait_until(
                lambda: (
                    {"document_path": "private/", "reason": "cannot list: Permission denied"}
                    in request(url, "GET", "/v1/agents/ops/contexts/one/status")[1]["problems"]
                ),
                "the status says why the folder is not read",
            )


def test_an_agent_folder_that_cannot_be_read_empties_none_of_its_scopes(tmp_path: Path) -> None:
    """Each scope folder of an agent whose folder cannot be read looks absent (``stat``
    fails with permission denied): that is no reason to delete every document of
    every one of its scopes. The status says why; the documents stay searchable."""
    root = tmp_path / "bucket"
    write(root / "ops" / "one" / "a.md", "# A\n\nokapi one\n")
    write(root / "ops" / "two" / "b.md", "# B\n\nokapi two\n")
    with (
        (tmp_path / "serve.log").open("w") as log,
        running(kb_serve(root, tmp_path / "k.db", prefix=_as_plain_user(), stderr=log)) as process,
    ):
        url = served_url(process)
        wait_until(
            lambda: search_paths(url, "ops", "two", "okapi") == ["b.md"],
            "the start-up index is done",
        )
        with unreadable(root / "ops"):
            for context in ("one", "two"):
                wait_until(
                    lambda context=context: (
                        {"document_path": ".", "reason": "cannot list: Permission denied"}
                        in request(url, "GET", f"/v1/agents/ops/contexts/{context}/status")[1][
                            "problems"
                        ]
                    ),
                    f"the status of ops/{context} says why its folder is not read",
                )
            assert search_paths(url, "ops", "one", "okapi") == ["a.md"]
            assert search_paths(url, "ops", "two", "okapi") == ["b.md"]
