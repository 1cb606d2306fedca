"""Start and stop a real single-node OpenSearch for integration tests.

The node is the Java harness in ``tools/opensearch-local`` (OpenSearch 2.19.1
in-process, with analysis-common, painless, reindex and the k-NN plugin;
lucene engine only). This module has no test-framework imports, so it can be
used from pytest fixtures, scripts or a REPL::

    from opensearch_node import OpenSearchNode

    with OpenSearchNode() as url:       # builds once, starts on a free port
        ...                             # url == "http://127.0.0.1:PORT"

Environment:

``KB_OPENSEARCH_URL``
    Use an already running node (for example ``make opensearch``) instead of
    starting one. Nothing is built, started or stopped.

``KB_SKIP_OPENSEARCH=1``
    Read by the pytest fixture (``conftest.py``), not here: skip the tests
    that need a node instead of failing them.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
HARNESS_DIR = REPO_ROOT / "tools" / "opensearch-local"
READY_RE = re.compile(r"OPENSEARCH_READY (http://[0-9.]+:\d+)")

BUILD_TIMEOUT_S = 900.0  # first build downloads ~60 MB of jars into ~/.m2
START_TIMEOUT_S = 180.0  # a cold JVM on two slow cores; usually 5-15 s
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 60

ENV_URL = "KB_OPENSEARCH_URL"


class OpenSearchNodeError(RuntimeError):
    """The harness could not be built or the node did not come up."""


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


_KEY_LINE_RE = re.compile(r"opensearch-local: failed|^Caused by:|^\S*(Exception|Error)\b")


def _key_lines(text: str, limit: int = 12) -> str:
    """The failure summary (exception and causes) that a long stack trace pushes out of the tail."""
    return "\n".join([ln for ln in text.splitlines() if _KEY_LINE_RE.search(ln)][:limit])


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cluster_health(url: str, timeout: float = 5.0) -> dict[str, Any]:
    """``GET /_cluster/health`` as a dict (raises on HTTP/connection errors)."""
    with urllib.request.urlopen(f"{url}/_cluster/health", timeout=timeout) as resp:
        health: dict[str, Any] = json.loads(resp.read().decode("utf-8"))
    return health


def build_harness(harness_dir: Path = HARNESS_DIR, timeout: float = BUILD_TIMEOUT_S) -> None:
    """Build the harness unless it is up to date (``run.sh --build-only``).

    ``run.sh`` fingerprints pom.xml and src/ and skips Maven when nothing
    changed, so calling this every session costs milliseconds.
    """
    run_sh = harness_dir / "run.sh"
    if not run_sh.is_file():
        raise OpenSearchNodeError(f"harness not found: {run_sh}")
    for tool in ("bash", "java", "mvn"):
        if shutil.which(tool) is None:
            raise OpenSearchNodeError(
                f"{tool!r} is not on PATH: the OpenSearch harness needs bash, "
                "a JDK 17+ and Maven 3.8+ (set KB_SKIP_OPENSEARCH=1 to skip the tests that need it)"
            )
    try:
        proc = subprocess.run(
            ["bash", str(run_sh), "--build-only"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        out = (e.output or b"").decode("utf-8", "replace")
        raise OpenSearchNodeError(
            f"building {harness_dir} timed out after {timeout:.0f}s:\n{_tail(out)}"
        ) from e
    if proc.returncode != 0:
        out = proc.stdout.decode("utf-8", "replace")
        raise OpenSearchNodeError(
            f"building {harness_dir} failed (exit {proc.returncode}):\n{_tail(out)}"
        )


class OpenSearchNode:
    """One OpenSearch node process, started on a free port with a temp data dir."""

    def __init__(
        self,
        harness_dir: Path = HARNESS_DIR,
        port: int = 0,
        start_timeout: float = START_TIMEOUT_S,
        build_timeout: float = BUILD_TIMEOUT_S,
    ) -> None:
        self.harness_dir = Path(harness_dir)
        self.port = port
        self.start_timeout = start_timeout
        self.build_timeout = build_timeout
        self.url: str | None = None
        self.external = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None

    # -- paths -----------------------------------------------------------
    @property
    def log_path(self) -> Path | None:
        """The node's stderr (JVM + OpenSearch logs); None when not started here."""
        return self._workdir / "node.log" if self._workdir else None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The failure summary (if any) and the last lines of the node's log."""
        if self.log_path is None:
            return ""
        text = _read(self.log_path)
        key = _key_lines(text)
        summary = f"--- errors ---\n{key}\n--- last {lines} lines ---\n" if key else ""
        return summary + _tail(text, lines)

    # -- lifecycle -------------------------------------------------------
    def start(self) -> str:
        """Build if needed, start the node, wait until it is healthy; return its URL."""
        if self.url is not None:
            return self.url
        external = os.environ.get(ENV_URL, "").strip().rstrip("/")
        if external:
            try:
                cluster_health(external)
            except (OSError, ValueError) as e:
                raise OpenSearchNodeError(
                    f"{ENV_URL}={external} does not answer /_cluster/health: {e}"
                ) from e
            self.external = True
            self.url = external
            return external

        build_harness(self.harness_dir, self.build_timeout)

        workdir = Path(tempfile.mkdtemp(prefix="kb-opensearch-"))
        self._workdir = workdir
        data_dir = workdir / "data"
        out_path = workdir / "node.out"
        with open(out_path, "wb") as out, open(workdir / "node.log", "wb") as err:
            self._proc = subprocess.Popen(
                [
                    "bash",
                    str(self.harness_dir / "run.sh"),
                    "--port",
                    str(self.port),
                    "--data",
                    str(data_dir),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
        atexit.register(self.stop)

        deadline = time.monotonic() + self.start_timeout
        url = None
        try:
            while url is None:
                match = READY_RE.search(_read(out_path))
                if match:
                    url = match.group(1)
                    break
                code = self._proc.poll()
                if code is not None:
                    raise OpenSearchNodeError(
                        f"OpenSearch exited with code {code} before it was ready"
                    )
                if time.monotonic() > deadline:
                    raise OpenSearchNodeError(
                        f"OpenSearch was not ready within {self.start_timeout:.0f}s"
                    )
                time.sleep(0.25)
            # The ready line is printed after a yellow health check; confirm over HTTP.
            while True:
                try:
                    status = cluster_health(url).get("status")
                    if status in ("green", "yellow"):
                        break
                except (OSError, ValueError):
                    status = "unreachable"
                if time.monotonic() > deadline:
                    raise OpenSearchNodeError(
                        f"{url}/_cluster/health is {status} after {self.start_timeout:.0f}s"
                    )
                time.sleep(0.5)
        except BaseException as e:
            tail = self.log_tail()
            self.stop()
            if isinstance(e, OpenSearchNodeError):
                raise OpenSearchNodeError(f"{e}. Last lines of the node's log:\n{tail}") from None
            raise
        self.url = url
        return url

    def stop(self) -> None:
        """Stop the node (SIGTERM, then SIGKILL) and remove its temp dir. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)
        workdir, self._workdir = self._workdir, None
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        self.url = None
        with contextlib.suppress(Exception):  # interpreter shutting down
            atexit.unregister(self.stop)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
