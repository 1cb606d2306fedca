"""SSH transport options: the key and the known hosts as private temporary files.

The registration's ``known_hosts`` is written to a file the OpenSSH client checks with
``StrictHostKeyChecking=yes`` (an unknown or changed host key fails the sync); the key
(the resolved credential) to a ``0600`` file passed with ``IdentitiesOnly``. Both live
in a temporary folder removed when the fetch ends (``stack``). ``BatchMode`` makes a
prompt a failure, never a hang.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import tempfile
from typing import Any

from knowledge.repos.fetch import CONNECT_TIMEOUT, RepoSyncError
from knowledge.repos.registration import RepoRegistration

__all__ = ["ssh_options"]


def _private_file(folder: str, name: str, data: bytes) -> str:
    path = os.path.join(folder, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data if data.endswith(b"\n") else data + b"\n")
    return path


def ssh_options(
    registration: RepoRegistration, secret: bytes | None, stack: contextlib.ExitStack
) -> dict[str, Any]:
    if not registration.known_hosts:
        raise RepoSyncError("credentials", "an ssh:// repository needs known_hosts")
    folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="kb-ssh-"))
    known = _private_file(folder, "known_hosts", registration.known_hosts.encode("utf-8"))
    command = [
        "ssh",
        "-F",
        "none",
        "-o",
        f"UserKnownHostsFile={known}",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={int(CONNECT_TIMEOUT)}",
        "-o",
        "LogLevel=ERROR",
    ]
    if secret is not None:
        key = _private_file(folder, "key", secret)
        command += ["-o", "IdentitiesOnly=yes", "-i", key]
    return {"ssh_command": shlex.join(command)}
