"""A private repository over SSH with a key: Debian's ``sshd`` on a loopback port, started
by the test with its own host key and config (tools/sshd/install.sh installs it), the
test's key in ``authorized_keys``; the host key is checked against the registration's
``known_hosts`` (paramiko, as in Lambda), so a wrong one fails the sync and keeps the last
good one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from git_server import Workdir
from ssh_server import SshServer, keygen

from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.repos.registration import RepoRegistration
from knowledge.ingest.repos.state import RepoRegistry
from knowledge.ingest.repos.storage import FolderStorage
from knowledge.ingest.repos.sync import sync_repository

pytestmark = pytest.mark.integration

SCOPE = KnowledgeScope("ops-bot", "runbooks")


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = SshServer.start(tmp_path_factory.mktemp("sshd"))
    yield server
    server.close()


def test_private_repository_over_ssh_with_a_key_and_host_key_checking(
    sshd: SshServer, tmp_path: Path
) -> None:
    work = Workdir(sshd.root, "secret", tmp_path / "work")
    work.write("ops/page.md", "# Paging\n\nThe platypus rotation.")
    commit = work.commit()
    url = sshd.url(work.bare)
    registry = RepoRegistry(FolderStorage(tmp_path / "bucket"))
    registration = RepoRegistration.from_request(
        {
            "name": "ssh",
            "url": url,
            "credential": f"file:{sshd.key}",
            "known_hosts": sshd.known_hosts,
        }
    )
    report = sync_repository(registry, SCOPE, registration)
    assert report.ok, report.error
    assert report.commit == commit
    mirrored = tmp_path / "bucket" / SCOPE.key / "_repos/ssh/ops/page.md"
    assert mirrored.read_text() == "# Paging\n\nThe platypus rotation."

    # The next sync over SSH (protocol v0 through paramiko) fetches only what changed.
    work.write("ops/page.md", "# Paging\n\nThe platypus rotation, weekly.")
    work.write("ops/new.md", "# New")
    changed = work.commit()
    report = sync_repository(registry, SCOPE, registration)
    assert report.ok, report.error
    assert (report.commit, report.written, report.incremental) == (changed, 2, True)
    assert mirrored.read_text() == "# Paging\n\nThe platypus rotation, weekly."

    # A host key that is not the server's: refused, the last sync kept.
    other = tmp_path / "other_host"
    other_pub = keygen(other).split()
    wrong = RepoRegistration.from_request(
        {
            **registration.to_dict(),
            "known_hosts": f"[127.0.0.1]:{sshd.port} {other_pub[0]} {other_pub[1]}\n",
        }
    )
    report = sync_repository(registry, SCOPE, wrong)
    assert report.error == {
        "kind": "credentials",
        "message": "the SSH host key is not the one in known_hosts",
    }
    assert registry.state(SCOPE, "ssh").commit == changed
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
        {"name": "ssh", "url": url, "known_hosts": sshd.known_hosts}
    )
    error = sync_repository(registry, SCOPE, keyless).error
    assert error is not None
    assert error["kind"] == "credentials"
    assert registry.state(SCOPE, "ssh").commit == changed
