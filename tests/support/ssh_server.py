"""A real SSH server on loopback for the repository-source tests: Debian's ``sshd``
(tools/sshd/install.sh installs it; ``make test`` runs that) on a free port, with its own
host key, config and ``authorized_keys`` holding the test's client key. Git runs over it
as over any SSH host (``git-upload-pack`` of the test's bare repositories); the code under
test speaks SSH with paramiko.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SSHD", "SshServer", "keygen", "login_name"]

SSHD = "/usr/sbin/sshd"


def keygen(path: Path) -> str:
    """A new ed25519 key pair at ``path``; returns the public key line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return Path(f"{path}.pub").read_text().strip()


def login_name() -> str:
    """The user sshd runs as (and so the one it lets in with the test's key)."""
    return (
        os.environ.get("USER")
        or subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class SshServer:
    port: int
    known_hosts: str  # the OpenSSH known_hosts line of its host key
    key: Path  # the client's private key (its public half is authorized)
    root: Path  # where the test's bare repositories go
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, base: Path) -> SshServer:
        if not os.access(SSHD, os.X_OK):
            raise RuntimeError("sshd is missing: run tools/sshd/install.sh (make test does)")
        host_key = base / "host_key"
        host_pub = keygen(host_key)
        client_key = base / "client_key"
        authorized = base / "authorized_keys"
        authorized.write_text(keygen(client_key) + "\n")
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
        known_hosts = f"[127.0.0.1]:{port} {key_type} {key_data}\n"
        return cls(port, known_hosts, client_key, base / "repos", process)

    def url(self, bare: Path) -> str:
        return f"ssh://{login_name()}@127.0.0.1:{self.port}{bare}"

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)
