"""A private repository over SSH with a key: Debian's ``sshd`` on a loopback port, started
by the test with its own host key and config (tools/sshd/install.sh installs it), the
test's key in ``authorized_keys``; the host key is checked against the registration's
``known_hosts`` (paramiko, as in Lambda), so a wrong one fails the sync and keeps the last
good one."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from git_server import Workdir

from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.repos.registration import RepoRegistration
from knowledge.ingest.repos.state import RepoRegistry
from knowledge.ingest.repos.storage import FolderStorage
from knowledge.ingest.repos.sync import sync_repository

pytestmark = pytest.mark.integration

SSHD = "/usr/sbin/sshd"
SCOPE = KnowledgeScope("ops-bot", "runbooks")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _keygen(path: Path) -> str:
    """A new ed25519 key pair at ``path``; returns the public key line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return Path(f"{path}.pub").read_text().strip()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    if not os.access(SSHD, os.X_OK):
        pytest.fail("sshd is missing: run tools/sshd/install.sh (make test does)")
    base = tmp_path_factory.mktemp("sshd")
    host_key = base / "host_key"
    host_pub = _keygen(host_key)
    client_key = base / "client_key"
    client_pub = _keygen(client_key)
    authorized = base / "authorized_keys"
    authorized.write_text(client_pub + "\n")
    authorized.chmod(0o600)
    port = _free_port()
    config = base / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                f"AuthorizedKeysFile {authorized}",
                f"PidFile {base / 'sshd.pid'}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",
                "UsePAM no",
                "StrictModes no",
                "",
            ]
        )
    )
    if os.geteuid() == 0:  # sshd run as root wants its privilege-separation folder
        Path("/run/sshd").mkdir(exist_ok=True)
    process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("sshd did not start") from None
            time.sleep(0.05)
    key_type, key_data = host_pub.split()[:2]
    yield {
        "port": port,
        "known_hosts": f"[127.0.0.1]:{port} {key_type} {key_data}\n",
        "key": client_key,
        "root": base / "repos",
    }
    process.terminate()
    process.wait(10)


def test_private_repository_over_ssh_with_a_key_and_host_key_checking(
    sshd: dict[str, object], tmp_path: Path
) -> None:
    root = sshd["root"]
    assert isinstance(root, Path)
    work = Workdir(root, "secret", tmp_path / "work")
    work.write("ops/page.md", "# Paging\n\nThe platypus rotation.")
    commit = work.commit()
    user = (
        os.environ.get("USER")
        or subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    )
    url = f"ssh://{user}@127.0.0.1:{sshd['port']}{work.bare}"
    registry = RepoRegistry(FolderStorage(tmp_path / "bucket"))
    registration = RepoRegistration.from_request(
        {
            "name": "ssh",
            "url": url,
            "credential": f"file:{sshd['key']}",
            "known_hosts": str(sshd["known_hosts"]),
        }
    )
    report = sync_repository(registry, SCOPE, registration)
    assert report.ok, report.error
    assert report.commit == commit
    mirrored = tmp_path / "bucket" / SCOPE.key / "_repos/ssh/ops/page.md"
    assert mirrored.read_text() == "# Paging\n\nThe platypus rotation."

    # A host key that is not the server's: refused, the last sync kept.
    other = tmp_path / "other_host"
    other_pub = _keygen(other).split()
    wrong = RepoRegistration.from_request(
        {
            **registration.to_dict(),
            "known_hosts": f"[127.0.0.1]:{sshd['port']} {other_pub[0]} {other_pub[1]}\n",
        }
    )
    report = sync_repository(registry, SCOPE, wrong)
    assert report.error == {
        "kind": "credentials",
        "message": "the SSH host key is not the one in known_hosts",
    }
    assert registry.state(SCOPE, "ssh").commit == commit
    assert mirrored.is_file()
    # No known host at all for this port, and no key: both refused.
    unknown = RepoRegistration.from_request(
        {**registration.to_dict(), "known_hosts": f"other.example {other_pub[0]} {other_pub[1]}\n"}
    )
    assert sync_repository(registry, SCOPE, unknown).error == {
        "kind": "credentials",
        "message": "the SSH host key is not in known_hosts",
    }
    keyless = RepoRegistration.from_request(
        {"name": "ssh", "url": url, "known_hosts": str(sshd["known_hosts"])}
    )
    error = sync_repository(registry, SCOPE, keyless).error
    assert error is not None
    assert error["kind"] == "credentials"
    assert registry.state(SCOPE, "ssh").commit == commit
