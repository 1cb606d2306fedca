"""The AWS path of repository sources end to end under moto, against a real Git server on
loopback: a registration through the repos function's route (the token's secret in moto's
Secrets Manager, referenced by ARN), the schedule's message (the template's own Input) ->
the repos function fans out -> one sync per repository mirrors into moto's bucket -> the
indexer function indexes the mirror's S3 notifications -> the index holds the tree."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from git_server import GitHttpServer, Workdir
from moto import mock_aws

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
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

from knowledge.aws.event_indexing import EventIndexer
from knowledge.aws.settings import LambdaSettings
from knowledge.core.model import IndexOptions
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.sources.s3 import S3DocumentSource
from knowledge.stores.memory import MemoryKnowledgeStore

pytestmark = pytest.mark.integration

SCOPE = KnowledgeScope("ops-bot", "runbooks")
REPO = Path(__file__).resolve().parents[2]


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
        keys = sorted(
            o["Key"]
            for o in aws["s3"]
            .list_objects_v2(Bucket=BUCKET, Prefix=SCOPE.key + "/")
            .get("Contents", [])
        )
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

        # The bucket's notifications -> the indexer function -> the index.
        store = MemoryKnowledgeStore()
        indexer = load_handler("indexer", monkeypatch)
        settings = LambdaSettings.from_env()
        indexer.container.settings = settings
        indexer.container.indexer = EventIndexer(
            store, S3DocumentSource(BUCKET, client=aws["s3"]), IndexOptions()
        )
        events = [
            s3_notification("ObjectCreated:Put", k.replace("@", "%40"), f"{i:04d}")
            for i, k in enumerate(keys)
        ]
        assert indexer.lambda_handler(sqs_event(*events), LambdaContext()) == {
            "batchItemFailures": []
        }
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


def test_ssh_is_refused_on_aws_with_the_reason(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    repos = load_handler("repos", monkeypatch)
    body = {
        "name": "r",
        "url": "ssh://git@github.com/o/r.git",
        "known_hosts": "github.com ssh-ed25519 AAAA",
    }
    answer = repos.lambda_handler(
        api_event("POST", "/v1/agents/ops-bot/contexts/runbooks/repos", body), LambdaContext()
    )
    assert answer["statusCode"] == 400
    assert json.loads(answer["body"])["field"] == "url"


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
