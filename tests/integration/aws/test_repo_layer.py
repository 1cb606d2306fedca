"""The repos function's own layer (RepoLayer) holds everything an SSH sync needs.

``sam build`` builds the layer for arm64, whose native parts (cryptography, PyNaCl,
bcrypt) cannot load here; so the test builds the same layer with the same Makefile
target for this machine (``PLATFORMS=``, as bench/runs/coldstart.py does for the knowledge
layer), puts only that layer and the function's ``app.py`` on python3.12's path (no
site-packages: ``-S -s``), and runs the AWS sync path (``handle_sync_message``, the
network guard, paramiko, dulwich) against Debian's ``sshd`` on loopback. A package the
layer lacks fails the import or the sync.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from git_server import Workdir
from sam_cli import REPO_ROOT, find_python312_bin_dir
from ssh_server import SshServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_SYNC = """
import json, sys
import app  # the handler module, as Lambda imports it
from knowledge.ingest.repos.aws import handle_sync_message
from knowledge.ingest.repos.network import HostPolicy
from knowledge.ingest.repos.registration import CREDENTIAL_ARN, RepoRegistration
from knowledge.ingest.repos.state import RepoRegistry
from knowledge.ingest.repos.storage import FolderStorage
from knowledge.core.scope import KnowledgeScope

job = json.load(sys.stdin)
scope = KnowledgeScope("ops-bot", "runbooks")
registry = RepoRegistry(FolderStorage(job["bucket"]))
registration = RepoRegistration.from_request(job["registration"], credential_kinds=[CREDENTIAL_ARN])
registry.add(scope, registration)

class Queue:
    def sync(self, scope, name):
        raise AssertionError("no continuation expected")

reports = handle_sync_message(
    {"kb_repo_sync": {"agent": "ops-bot", "context": "runbooks", "name": "ops"}},
    registry,
    Queue(),
    read_secret=lambda arn: job["key"].encode(),
    remaining_seconds=lambda: 300.0,
    hosts=HostPolicy.public_only("127.0.0.0/8"),
)
heavy = ("openai", "opensearchpy", "lxml", "mecab", "pypdfium2", "PIL")
print(json.dumps({"report": reports[0].public(), "heavy": [m for m in heavy if m in sys.modules],
                  "paramiko": sys.modules["paramiko"].__file__}))
"""


@pytest.fixture(scope="module")
def host_repo_layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RepoLayer built by its Makefile target for this machine, beside the function."""
    built = tmp_path_factory.mktemp("repo-layer")
    python = find_python312_bin_dir() / "python3.12"
    subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(REPO_ROOT / "layers" / "knowledge"),
            "build-RepoLayer",
            f"ARTIFACTS_DIR={built / 'layer'}",
            f"PYTHON={python}",
            "PLATFORMS=",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=600,
    )
    (built / "function").mkdir()
    shutil.copy2(REPO_ROOT / "functions" / "repos" / "app.py", built / "function" / "app.py")
    return built


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = SshServer.start(tmp_path_factory.mktemp("sshd"))
    yield server
    server.close()


def test_repo_layer_alone_syncs_a_repository_over_ssh(
    host_repo_layer: Path, sshd: SshServer, tmp_path: Path
) -> None:
    work = Workdir(sshd.root, "layer", tmp_path / "work")
    work.write("runbooks/rotate.md", "# Rotation\n\nRotate the keys.")
    commit = work.commit()
    job = {
        "bucket": str(tmp_path / "bucket"),
        "key": sshd.key.read_text(),  # on stdin: never in an environment variable
        "registration": {
            "name": "ops",
            "url": sshd.url(work.bare),
            "credential": "arn:aws:secretsmanager:us-east-1:123456789012:secret:kb-repo/ops-AbCdEf",
            "known_hosts": sshd.known_hosts,
        },
    }
    layer = host_repo_layer / "layer" / "python"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([str(host_repo_layer / "function"), str(layer)]),
        "AWS_REGION": "us-east-1",
        "POWERTOOLS_SERVICE_NAME": "knowledge-repos",
    }
    python = find_python312_bin_dir() / "python3.12"
    done = subprocess.run(
        [str(python), "-S", "-s", "-B", "-c", _SYNC],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["report"]["error"] is None, answer
    assert answer["report"]["commit"] == commit
    assert answer["heavy"] == []
    assert answer["paramiko"].startswith(str(layer))
    mirrored = tmp_path / "bucket" / "ops-bot/runbooks/_repos/ops/runbooks/rotate.md"
    assert mirrored.read_text() == "# Rotation\n\nRotate the keys."
