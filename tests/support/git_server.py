"""A real Git smart-HTTP server on loopback for the repository-source tests.

Debian's ``git http-backend`` (a CGI program) behind a small ``ThreadingHTTPServer``:
every request runs the backend with the CGI environment, so clients speak the real
protocol (``info/refs``, ``git-upload-pack``). Repositories under ``private/`` need
HTTP Basic auth whose password is ``token``. ``Workdir`` makes commits with the ``git``
binary and pushes them to the served bare repository (the test's side only: the code
under test fetches over HTTP with dulwich).
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_SYSTEM": "/dev/null",
    "HOME": "/nonexistent",
}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


class GitHttpServer:
    def __init__(self, root: Path, token: str = "s3cret-token") -> None:
        self.root = root
        self.token = token
        self.requests: list[str] = []
        self.sent: list[tuple[str, int]] = []  # (path, response bytes)
        self.authorizations: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._cgi()

            def do_POST(self) -> None:
                self._cgi()

            def _cgi(self) -> None:
                parts = urlsplit(self.path)
                server.requests.append(parts.path)
                header = self.headers.get("Authorization", "")
                server.authorizations.append(header)
                if parts.path.startswith("/private/"):
                    expected = (
                        "Basic "
                        + base64.b64encode(f"x-access-token:{server.token}".encode()).decode()
                    )
                    if header != expected:
                        self.send_response(401)
                        self.send_header("WWW-Authenticate", 'Basic realm="git"')
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                env = {
                    "GIT_PROJECT_ROOT": str(server.root),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "PATH_INFO": parts.path,
                    "QUERY_STRING": parts.query,
                    "REQUEST_METHOD": self.command,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)),
                    "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                    "REMOTE_ADDR": "127.0.0.1",
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                }
                if self.headers.get("Content-Encoding"):
                    env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
                done = subprocess.run(
                    [HTTP_BACKEND], input=body, env=env, capture_output=True, check=False
                )
                head, _, payload = done.stdout.partition(b"\r\n\r\n")
                status = 200
                headers: list[tuple[str, str]] = []
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "status":
                        status = int(value.strip().split()[0])
                    elif name:
                        headers.append((name, value.strip()))
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                server.sent.append((parts.path, len(payload)))

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}.git"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class Workdir:
    """A working clone whose commits are pushed to ``<root>/<name>.git``."""

    def __init__(self, root: Path, name: str, work: Path, branch: str = "main") -> None:
        self.bare = root / f"{name}.git"
        self.bare.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["git", "init", "--bare", "-q", "-b", branch, str(self.bare)],
            check=True,
            env={**os.environ, **GIT_ENV},
        )
        self.path = work
        self.branch = branch
        work.mkdir(parents=True)
        git(work, "init", "-q", "-b", branch)
        git(work, "remote", "add", "origin", str(self.bare))

    def allow_filter(self) -> None:
        """Let clients ask for a filtered pack (protocol v2 ``filter``, ``blob:limit``)."""
        git(self.bare, "config", "uploadpack.allowFilter", "true")

    def write(self, rel: str, data: str | bytes) -> None:
        path = self.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)

    def commit(self, message: str = "change", *, force: bool = False) -> str:
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "--allow-empty", "-m", message)
        git(self.path, "push", "-q", *(["--force"] if force else []), "origin", self.branch)
        return git(self.path, "rev-parse", "HEAD")

    def tree(self) -> dict[str, bytes]:
        """The files of HEAD: path -> bytes."""
        names = git(self.path, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
        return {n: (self.path / n).read_bytes() for n in names}
