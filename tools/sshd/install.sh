#!/usr/bin/env bash
# Debian's OpenSSH server for the SSH repository-source test
# (tests/integration/ingest/test_repo_ssh.py starts its own sshd on a loopback port, with its own
# host key and config). Does nothing when sshd is present.
set -euo pipefail
if [[ -x /usr/sbin/sshd && -x /usr/bin/ssh-keygen ]]; then
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    SUDO=sudo
else
    SUDO=
fi
echo "installing Debian openssh-server for the SSH repository test ..." >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# The package's own service is never started here (no init in CI containers); the test
# runs its own sshd.
# openssh-client: ssh-keygen makes the test's keys (the product speaks SSH with paramiko).
$SUDO apt-get install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null
test -x /usr/sbin/sshd
