"""The AWS path of repository sources end to end under moto, against a real Git server on
loopback: a registration through the repos function's route (the token's secret in moto's
Secrets Manager, referenced by ARN), the schedule's message (the template's own Input) ->
the repos function fans out -> one sync per repository mirrors into moto's bucket -> the
indexer function indexes the mirror's S3 notifications -> the index holds the tree.

Over HTTPS (``git http-backend``) and over SSH (Debian's ``sshd``, the private key in
the secret, the host key checked against the registration's ``known_hosts``)."""

from __future__ import annotations

import contextlib
import copy
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from git_server import GitHttpServer, Workdir
from lambda_support import (
    BUCKET,
    LambdaContext,
    load_event,
    load_handler,
    s3_notification,
    sqs_event,
    sqs_messages_as_event,
    use_fake_aws,
)
from moto import mock_aws
from ssh_server import SshServer, keygen

from knowledge.aws.event_indexing import EventIndexer
from knowledge.aws.settings import LambdaSettings
from knowledge.core.model import IndexOptions, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.sources.s3 import S3DocumentSource
from knowledge.service.api import KnowledgeApi
from knowledge.stores.memory import MemoryKnowledgeStore

pytestmark = pytest.mark.integration

SCOPE = KnowledgeScope("ops-bot", "runbooks")
REPO = Path(__file__).resolve().parents[3]


class _CfnLoader(yaml.SafeLoader):
    pass


_CfnLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def schedule_input() -> str:
    template = yaml.load((REPO / "template.yaml").read_text("utf-8"), Loader=_CfnLoader)
    value: str = template["Resources"]["RepoSyncSchedule"]["Properties"]["Target"]["Input"]
    return value


def api_event(method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    event = copy.deepcopy(load_event("api_status.json"))
    event["rawPath"] = path
    event["routeKey"] = f"{method} {path}"
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["http"]["path"] = path
    event["body"] = None if body is None else json.dumps(body)
    event["isBase64Encoded"] = False
    return event


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        sqs = boto3.client("sqs")
        url = sqs.create_queue(QueueName="repo-syncs")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        monkeypatch.setenv("DOCUMENTS_BUCKET", BUCKET)
        monkeypatch.setenv("REPO_SYNC_QUEUE_URL", url)
        yield {
            "s3": s3,
            "sqs": sqs,
            "url": url,
            "arn": arn,
            "secrets": boto3.client("secretsmanager"),
        }


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = SshServer.start(tmp_path_factory.mktemp("sshd"))
    yield server
    server.close()


def scope_keys(aws: dict[str, Any]) -> list[str]:
    listed = aws["s3"].list_objects_v2(Bucket=BUCKET, Prefix=SCOPE.key + "/")
    return sorted(o["Key"] for o in listed.get("Contents", []))


def index_keys(
    aws: dict[str, Any], keys: list[str], monkeypatch: pytest.MonkeyPatch
) -> MemoryKnowledgeStore:
    """The bucket's notifications of ``keys`` -> the indexer function -> an index."""
    store = MemoryKnowledgeStore()
    indexer = load_handler("indexer", monkeypatch)
    indexer.container.settings = LambdaSettings.from_env()
    indexer.container.indexer = EventIndexer(
        store, S3DocumentSource(BUCKET, client=aws["s3"]), IndexOptions()
    )
    events = [
        s3_notification("ObjectCreated:Put", k.replace("@", "%40"), f"{i:04d}")
        for i, k in enumerate(keys)
    ]
    assert indexer.lambda_handler(sqs_event(*events), LambdaContext()) == {"batchItemFailures": []}
    return store


@contextlib.contextmanager
def http_gateway(function: Any) -> Iterator[str]:
    """The HTTP API in front of a function, on loopback: each request becomes the API
    Gateway v2 event the function gets, its answer the HTTP response (no authorizer:
    ``API_AUTH`` is iam in the samples, whose checks this event passes)."""

    class Gateway(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def _call(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            answer = function.lambda_handler(
                api_event(self.command, self.path.split("?", 1)[0], body), LambdaContext()
            )
            payload = answer["body"].encode()
            self.send_response(answer["statusCode"])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = _call

    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def drain(aws: dict[str, Any], repos: Any) -> list[dict[str, Any]]:
    """What the SQS event source does: hand the queued messages to the repos function."""
    answers = []
    while True:
        got = aws["sqs"].receive_message(QueueUrl=aws["url"], MaxNumberOfMessages=10)
        messages = got.get("Messages", [])
        if not messages:
            return answers
        answers.append(
            repos.lambda_handler(sqs_messages_as_event(messages, aws["arn"]), LambdaContext())
        )
        for message in messages:
            aws["sqs"].delete_message(QueueUrl=aws["url"], ReceiptHandle=message["ReceiptHandle"])


def test_schedule_to_sync_function_to_bucket_to_index(
    aws: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The test's Git server is on loopback: allowed as an operator allows a private network.
    monkeypatch.setenv("REPO_ALLOWED_NETWORKS", "127.0.0.0/8")
    server = GitHttpServer(tmp_path / "git")
    try:
        work = Workdir(server.root, "private/team", tmp_path / "work")
        work.write("runbooks/failover.md", "# Failover\n\nPromote the narwhal replica.")
        work.write("README.rst", "Team\n====\n\nRead me.")
        work.write("logo.png", b"\x89PNG\r\n")
        commit = work.commit()
        secret = aws["secrets"].create_secret(Name="kb-repo/team", SecretString=server.token)
        repos = load_handler("repos", monkeypatch)
        base = f"/v1/agents/{SCOPE.agent}/contexts/{SCOPE.context}/repos"

        # A secret outside the kb-repo/ prefix is refused: the function could not read it.
        other = aws["secrets"].create_secret(Name="elsewhere", SecretString="x")
        refused = repos.lambda_handler(
            api_event(
                "POST",
                base,
                {"name": "team", "url": server.url("private/team"), "credential": other["ARN"]},
            ),
            LambdaContext(),
        )
        assert refused["statusCode"] == 400
        assert json.loads(refused["body"])["field"] == "credential"

        added = repos.lambda_handler(
            api_event(
                "POST",
                base,
                {"name": "team", "url": server.url("private/team"), "credential": secret["ARN"]},
            ),
            LambdaContext(),
        )
        assert added["statusCode"] == 201, added["body"]
        assert secret["ARN"] not in added["body"]

        # The schedule's message, as EventBridge Scheduler puts it on the queue.
        aws["sqs"].send_message(QueueUrl=aws["url"], MessageBody=schedule_input())
        answers = drain(aws, repos)
        assert all(a == {"batchItemFailures": []} for a in answers)
        keys = scope_keys(aws)
        assert keys == [
            f"{SCOPE.key}/_repos/team/README.rst",
            f"{SCOPE.key}/_repos/team/README.rst.metadata.json",
            f"{SCOPE.key}/_repos/team/runbooks/failover.md",
            f"{SCOPE.key}/_repos/team/runbooks/failover.md.metadata.json",
        ]
        status = json.loads(
            repos.lambda_handler(api_event("GET", f"{base}/team"), LambdaContext())["body"]
        )["status"]
        assert status["commit"] == commit
        assert status["unread_files"] == {".png": 1}

        # The scope's status on the search function shows each repository's last sync, as
        # the local status does (the search function reads the sync summaries only).
        search = load_handler("search", monkeypatch)
        search.container.api = KnowledgeApi(
            MemoryKnowledgeStore(), repo_statuses=search.repo_statuses()
        )
        scope_status = f"/v1/agents/{SCOPE.agent}/contexts/{SCOPE.context}/status"
        answer = search.lambda_handler(api_event("GET", scope_status), LambdaContext())
        assert answer["statusCode"] == 200, answer["body"]
        (listed,) = json.loads(answer["body"])["repos"]
        assert (listed["name"], listed["commit"], listed["files"]) == ("team", commit, 2)
        assert listed["synced_at"] is not None
        assert (listed["error"], listed["problems"]) == (None, [])
        assert listed["unread_files"] == {".png": 1}
        assert secret["ARN"] not in answer["body"]

        # The bucket's notifications -> the indexer function -> the index.
        store = index_keys(aws, keys, monkeypatch)
        documents = {d.path: d.origin for d in store.list_documents(SCOPE).documents}
        assert documents == {
            "_repos/team/README.rst": "repo",
            "_repos/team/runbooks/failover.md": "repo",
        }

        # On demand: the route queues one sync (202); a delete in the repository is a
        # delete in the bucket.
        (work.path / "README.rst").unlink()
        work.commit("delete")
        accepted = repos.lambda_handler(api_event("POST", f"{base}/team/sync"), LambdaContext())
        assert accepted["statusCode"] == 202
        drain(aws, repos)
        remaining = [
            o["Key"]
            for o in aws["s3"].list_objects_v2(Bucket=BUCKET, Prefix=SCOPE.key + "/")["Contents"]
        ]
        assert f"{SCOPE.key}/_repos/team/README.rst" not in remaining

        # A failed sync: the status says so and keeps the last good commit.
        server.token = "rotated"
        repos.lambda_handler(api_event("POST", f"{base}/team/sync"), LambdaContext())
        drain(aws, repos)
        answer = search.lambda_handler(api_event("GET", scope_status), LambdaContext())
        (listed,) = json.loads(answer["body"])["repos"]
        assert listed["error"]["kind"] == "credentials"
        assert listed["commit"] != commit  # the delete's commit, the last good one
        assert listed["files"] == 1
    finally:
        server.close()


def test_jwt_mode_authorizes_the_repos_routes_per_agent_and_managing_apart(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("API_AUTH", "jwt")
    monkeypatch.setenv("JWT_REINDEX_SCOPE", "kb/reindex")
    repos = load_handler("repos", monkeypatch)
    authorizer = load_event("api_search_jwt.json")["requestContext"]["authorizer"]

    def call(method: str, agent: str, scopes: list[str], body: Any = None) -> int:
        event = api_event(method, f"/v1/agents/{agent}/contexts/runbooks/repos", body)
        event["requestContext"]["authorizer"] = copy.deepcopy(authorizer)
        event["requestContext"]["authorizer"]["jwt"]["scopes"] = scopes
        event["requestContext"]["authorizer"]["jwt"]["claims"]["scope"] = " ".join(scopes)
        status: int = repos.lambda_handler(event, LambdaContext())["statusCode"]
        return status

    body = {"name": "r", "url": "https://github.com/o/r.git"}
    assert call("GET", "ops-bot", ["kb/search"]) == 200
    assert call("GET", "billing-bot", ["kb/search"]) == 403  # not in the token's agents
    assert call("POST", "ops-bot", ["kb/search"], body) == 403  # managing needs its scope
    assert call("POST", "ops-bot", ["kb/search", "kb/reindex"], body) == 201


def test_ssh_repository_synced_by_the_repos_function_becomes_searchable(
    aws: dict[str, Any],
    sshd: SshServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``ssh://`` on AWS: the private key in a ``kb-repo/`` secret, the host key checked
    against the registration's ``known_hosts``, the sync connecting through the network
    guard (loopback allowed here as an operator allows a private network); the mirror
    indexed is searchable. The key never reaches an answer or a log line."""
    monkeypatch.setenv("REPO_ALLOWED_NETWORKS", "127.0.0.0/8")
    work = Workdir(sshd.root, "ops-ssh", tmp_path / "work")
    work.write("runbooks/rotate.md", "# Certificates\n\nRotate the pangolin certificates yearly.")
    work.write("notes.txt", "Ask the on-call lead first.")
    commit = work.commit()
    private_key = sshd.key.read_text()
    secret = aws["secrets"].create_secret(Name="kb-repo/ops-ssh", SecretString=private_key)
    repos = load_handler("repos", monkeypatch)
    base = f"/v1/agents/{SCOPE.agent}/contexts/{SCOPE.context}/repos"
    body = {"name": "ops", "url": sshd.url(work.bare), "credential": secret["ARN"]}

    # The host key is always checked: no known_hosts (and no secret to hold them), no
    # registration.
    keyless = {"name": "ops", "url": body["url"]}
    refused = repos.lambda_handler(api_event("POST", base, keyless), LambdaContext())
    assert refused["statusCode"] == 400
    assert json.loads(refused["body"])["field"] == "known_hosts"

    added = repos.lambda_handler(
        api_event("POST", base, {**body, "known_hosts": sshd.known_hosts}), LambdaContext()
    )
    assert added["statusCode"] == 201, added["body"]
    accepted = repos.lambda_handler(api_event("POST", f"{base}/ops/sync"), LambdaContext())
    assert accepted["statusCode"] == 202
    assert all(a == {"batchItemFailures": []} for a in drain(aws, repos))
    status = json.loads(
        repos.lambda_handler(api_event("GET", f"{base}/ops"), LambdaContext())["body"]
    )["status"]
    assert status["error"] is None, status
    assert status["commit"] == commit

    keys = scope_keys(aws)
    assert [k for k in keys if not k.endswith(".metadata.json")] == [
        f"{SCOPE.key}/_repos/ops/notes.txt",
        f"{SCOPE.key}/_repos/ops/runbooks/rotate.md",
    ]
    store = index_keys(aws, keys, monkeypatch)
    hits = store.search(SCOPE, SearchQuery("pangolin certificates", mode="keyword"))
    assert hits, "the synced file is not searchable"
    assert hits[0].document_path == "_repos/ops/runbooks/rotate.md"
    assert hits[0].origin == "repo"

    # The host keys pinned in the secret beside the key (JSON), none in the registration.
    pinned = aws["secrets"].create_secret(
        Name="kb-repo/pinned",
        SecretString=json.dumps({"private_key": private_key, "known_hosts": sshd.known_hosts}),
    )
    body_pinned = {"name": "pinned", "url": body["url"], "credential": pinned["ARN"]}
    added_pinned = repos.lambda_handler(api_event("POST", base, body_pinned), LambdaContext())
    assert added_pinned["statusCode"] == 201, added_pinned["body"]
    repos.lambda_handler(api_event("POST", f"{base}/pinned/sync"), LambdaContext())
    assert all(a == {"batchItemFailures": []} for a in drain(aws, repos))
    status = json.loads(
        repos.lambda_handler(api_event("GET", f"{base}/pinned"), LambdaContext())["body"]
    )["status"]
    assert (status["error"], status["commit"]) == (None, commit)

    # A host key that is not the server's: refused, nothing written for that repository.
    other = keygen(tmp_path / "impostor").split()
    wrong = {
        **body,
        "name": "impostor",
        "known_hosts": f"[127.0.0.1]:{sshd.port} {other[0]} {other[1]}\n",
    }
    impostor = repos.lambda_handler(api_event("POST", base, wrong), LambdaContext())
    assert impostor["statusCode"] == 201
    repos.lambda_handler(api_event("POST", f"{base}/impostor/sync"), LambdaContext())
    drain(aws, repos)
    status = json.loads(
        repos.lambda_handler(api_event("GET", f"{base}/impostor"), LambdaContext())["body"]
    )["status"]
    assert status["error"] == {
        "kind": "credentials",
        "message": "the SSH host key is not the one in known_hosts",
    }
    assert not [k for k in scope_keys(aws) if "/_repos/impostor/" in k]

    captured = capsys.readouterr()
    key_body = "".join(private_key.strip().splitlines()[1:-1])
    for line in private_key.strip().splitlines()[1:-1]:
        assert line not in captured.out + captured.err
    assert key_body[:40] not in added["body"] + accepted["body"]


def test_an_ssh_sync_never_reaches_a_private_address_the_operator_did_not_allow(
    aws: dict[str, Any], sshd: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The network guard covers ``ssh://`` as it covers HTTPS: the host is checked before
    paramiko connects, so a registration cannot make the function reach loopback."""
    monkeypatch.setenv("REPO_ALLOWED_NETWORKS", "")
    work = Workdir(sshd.root, "guarded", tmp_path / "work")
    work.write("guide.md", "# Guide\n\nRead me.")
    work.commit()
    secret = aws["secrets"].create_secret(Name="kb-repo/guarded", SecretString=sshd.key.read_text())
    repos = load_handler("repos", monkeypatch)
    base = f"/v1/agents/{SCOPE.agent}/contexts/{SCOPE.context}/repos"
    body = {
        "name": "guarded",
        "url": sshd.url(work.bare),
        "credential": secret["ARN"],
        "known_hosts": sshd.known_hosts,
    }
    assert repos.lambda_handler(api_event("POST", base, body), LambdaContext())["statusCode"] == 201
    repos.lambda_handler(api_event("POST", f"{base}/guarded/sync"), LambdaContext())
    assert all(a == {"batchItemFailures": []} for a in drain(aws, repos))
    status = json.loads(
        repos.lambda_handler(api_event("GET", f"{base}/guarded"), LambdaContext())["body"]
    )["status"]
    assert status["error"] is not None, "the sync reached a loopback SSH server"
    assert status["error"]["kind"] == "network"
    assert status["commit"] is None
    assert scope_keys(aws) == []


@pytest.mark.parametrize("allowed", ["", "127.0.0.2/32"])
def test_a_sync_never_reaches_a_private_address_the_operator_did_not_allow(
    aws: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allowed: str
) -> None:
    """A registration's URL is the caller's: on AWS a sync must not reach loopback (the
    Lambda runtime API), link-local metadata or a private network unless the operator
    allowed that network (REPO_ALLOWED_NETWORKS). Refused at connection time, so the
    sync fails as a whole, records why, and writes nothing."""
    monkeypatch.setenv("REPO_ALLOWED_NETWORKS", allowed)
    server = GitHttpServer(tmp_path / "git")
    try:
        work = Workdir(server.root, "public/team", tmp_path / "work")
        work.write("guide.md", "# Guide\n\nRead me.")
        work.commit()
        repos = load_handler("repos", monkeypatch)
        base = f"/v1/agents/{SCOPE.agent}/contexts/{SCOPE.context}/repos"
        added = repos.lambda_handler(
            api_event("POST", base, {"name": "team", "url": server.url("public/team")}),
            LambdaContext(),
        )
        assert added["statusCode"] == 201, added["body"]
        accepted = repos.lambda_handler(api_event("POST", f"{base}/team/sync"), LambdaContext())
        assert accepted["statusCode"] == 202
        assert all(a == {"batchItemFailures": []} for a in drain(aws, repos))
        assert server.requests == [], "the sync connected to a loopback Git server"
        listed = aws["s3"].list_objects_v2(Bucket=BUCKET, Prefix=SCOPE.key + "/")
        assert listed.get("Contents", []) == []
        status = json.loads(
            repos.lambda_handler(api_event("GET", f"{base}/team"), LambdaContext())["body"]
        )["status"]
        assert status["error"]["kind"] == "network"
        assert "REPO_ALLOWED_NETWORKS" in status["error"]["message"]
        assert "127.0.0.1" in status["error"]["message"]  # the host, as registered
    finally:
        server.close()


def test_kb_repo_talks_to_the_deployed_repos_function(
    aws: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``kb repo ... --api-url``: registered through the repos function, a sync queued
    (202: "sync queued"), synced by the queue's consumer, listed with its commit."""
    from knowledge.local.cli import main

    monkeypatch.setenv("REPO_ALLOWED_NETWORKS", "127.0.0.0/8")
    server = GitHttpServer(tmp_path / "git")
    try:
        work = Workdir(server.root, "public/cli", tmp_path / "work")
        work.write("guide.md", "# Guide\n\nThe axolotl steps.")
        commit = work.commit()
        repos = load_handler("repos", monkeypatch)
        with http_gateway(repos) as url:
            api = ["--agent", SCOPE.agent, "--context", SCOPE.context, "--api-url", url]
            add = ["repo", "add", *api, "--name", "cli", "--url", server.url("public/cli")]
            assert main(add) == 0
            assert "cli: " in capsys.readouterr().out
            assert main(["repo", "sync", *api]) == 0
            printed = capsys.readouterr().out.splitlines()  # and the function's log lines
            assert "cli: sync queued (kb repo list shows its result)" in printed
            drain(aws, repos)
            assert main(["repo", "list", *api]) == 0
            assert f"at {commit[:12]}, 1 files" in capsys.readouterr().out
        assert scope_keys(aws) == [
            f"{SCOPE.key}/_repos/cli/guide.md",
            f"{SCOPE.key}/_repos/cli/guide.md.metadata.json",
        ]
    finally:
        server.close()
