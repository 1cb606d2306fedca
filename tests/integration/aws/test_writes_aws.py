"""Document writes through the search function on the AWS harness: moto's S3 (with its
bucket notifications to moto's SQS) and a real OpenSearch node. A PUT is an S3 put that
the indexer makes searchable once it drains the queue; nothing lands outside the
scope's prefix whatever the path; JWT writes need the write claim."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from typing import Any
from urllib.parse import quote

import pytest
import urllib3
from lambda_support import BUCKET, LambdaContext, api_event, run_queue_through, s3_notification
from s3_post_policy import check_post, post_policy_endpoint
from test_handlers_opensearch import Stack, stack  # noqa: F401 - the harness fixture

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

SCOPE_PATH = "/v1/agents/ops-bot/contexts/runbooks"


def wire_notifications(stack: Stack) -> None:  # noqa: F811
    stack.s3.put_bucket_notification_configuration(
        Bucket=BUCKET,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "QueueArn": stack.queue_arn,
                    "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"],
                }
            ]
        },
    )


def invoke(stack: Stack, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:  # noqa: F811
    response = stack.search.lambda_handler(event, LambdaContext())
    return response["statusCode"], json.loads(response["body"])


def keys(stack: Stack) -> list[str]:  # noqa: F811
    listed = stack.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return sorted(item["Key"] for item in listed)


def drain(stack: Stack) -> None:  # noqa: F811
    responses = run_queue_through(stack.indexer, stack.sqs, stack.queue_url, stack.queue_arn)
    assert all(r == {"batchItemFailures": []} for r in responses), responses


def document(stack: Stack, path: str) -> tuple[int, dict[str, Any]]:  # noqa: F811
    return invoke(stack, api_event("GET", f"{SCOPE_PATH}/documents/{path}"))


def test_a_put_is_searchable_after_the_indexer_drains_the_queue(stack: Stack) -> None:  # noqa: F811
    wire_notifications(stack)
    drain(stack)  # moto's s3:TestEvent
    note = b"# On-call\n\nwombatpager escalation\n"
    status, accepted = invoke(
        stack,
        api_event(
            "PUT",
            f"{SCOPE_PATH}/documents/notes%2Foncall.md",
            note,
            content_type="text/markdown",
            query="origin=manual&metadata=%7B%22team%22%3A%22sre%22%7D",
        ),
    )
    assert status == 202, accepted
    assert keys(stack) == [
        "ops-bot/runbooks/notes/oncall.md",
        "ops-bot/runbooks/notes/oncall.md.metadata.json",
    ]
    assert document(stack, "notes%2Foncall.md")[0] == 404  # accepted, not yet indexed
    drain(stack)
    status, found = document(stack, "notes%2Foncall.md")
    assert (status, found["indexed"], found["origin"]) == (200, True, "manual")
    assert found["content_hash"] == accepted["content_hash"]
    status, body = stack.call("api_search.json", {"query": "wombatpager", "mode": "keyword"})
    assert status == 200
    [hit] = body["results"]
    assert (hit["document_path"], hit["origin"], hit["metadata"]["team"]) == (
        "notes/oncall.md",
        "manual",
        "sre",
    )

    # Overwrite: the old text is searched until the indexer commits the new one.
    status, second = invoke(
        stack,
        api_event(
            "PUT",
            f"{SCOPE_PATH}/documents/notes%2Foncall.md",
            b"# On-call\n\nquokkarota\n",
            content_type="text/markdown",
            query="origin=manual",
        ),
    )
    assert status == 202
    assert stack.search_paths("wombatpager") == ["notes/oncall.md"]
    drain(stack)
    assert stack.search_paths("wombatpager") == []
    assert stack.search_paths("quokkarota") == ["notes/oncall.md"]
    assert document(stack, "notes%2Foncall.md")[1]["content_hash"] == second["content_hash"]

    status, _ = invoke(stack, api_event("DELETE", f"{SCOPE_PATH}/documents/notes%2Foncall.md"))
    assert status == 202
    assert keys(stack) == []
    # moto sends no notification for a delete in a versioned bucket; S3 sends
    # ObjectRemoved:DeleteMarkerCreated for each key, in the order they were deleted.
    for key in ("notes/oncall.md", "notes/oncall.md.metadata.json"):
        encoded = "ops-bot/runbooks/" + quote(key)
        body = s3_notification("ObjectRemoved:DeleteMarkerCreated", encoded, "00FFFFFFFFFFFFFFFF")
        stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(body))
    drain(stack)
    assert stack.search_paths("quokkarota") == []
    assert document(stack, "notes%2Foncall.md")[0] == 404


HOSTILE = (
    "..%2F..%2Fother-bot%2Fx%2Fevil.md",
    "%2E%2E%2Fevil.md",
    "a%2F..%2F..%2F..%2Fevil.md",
    "%252E%252E%252Fevil.md",
    "_repos%2Fgithub%2Fevil.md",
    "evil.md.metadata.json",
    "..",
    "%2Fevil.md",
)


def test_hostile_paths_write_nothing_anywhere(stack: Stack) -> None:  # noqa: F811
    for raw in HOSTILE:  # one stack for all: each would otherwise build its own
        status, body = invoke(stack, api_event("PUT", f"{SCOPE_PATH}/documents/{raw}", b"# x\n"))
        assert status in (400, 404), (raw, body)
        status, body = invoke(stack, api_event("POST", f"{SCOPE_PATH}/uploads", {"path": raw}))
        assert status in (400, 404), (raw, body)
    assert keys(stack) == []


def test_jwt_writes_need_the_write_claim(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setattr(stack.search.container, "access", None)
    monkeypatch.setenv("API_AUTH", "jwt")
    readers = {"agents": "[ops-bot]"}
    writers = {"agents": "[ops-bot]", "agents_write": "[ops-bot]"}
    path = f"{SCOPE_PATH}/documents/a.md"
    for method, body in (("PUT", b"# a\n"), ("DELETE", None)):
        status, refused = invoke(stack, api_event(method, path, body, claims=readers))
        assert (status, refused["field"]) == (403, "operation"), refused
    status, refused = invoke(
        stack, api_event("POST", f"{SCOPE_PATH}/uploads", {"path": "a.pdf"}, claims=readers)
    )
    assert status == 403
    other = {"agents": "[support-bot]", "agents_write": "[ops-bot]"}
    assert invoke(stack, api_event("PUT", path, b"# a\n", claims=other))[0] == 403
    assert keys(stack) == []
    assert invoke(stack, api_event("PUT", path, b"# a\n", claims=writers))[0] == 202
    assert keys(stack) == ["ops-bot/runbooks/a.md", "ops-bot/runbooks/a.md.metadata.json"]
    shared = "/v1/agents/_shared/contexts/playbooks/documents/a.md"
    claims = {"agents": "[_shared]", "agents_write": "[_shared]"}
    assert invoke(stack, api_event("PUT", shared, b"# a\n", claims=claims))[0] == 403
    # Whatever the token grants, the library takes no delete and no presigned upload either.
    assert invoke(stack, api_event("DELETE", shared, claims=claims))[0] == 403
    uploads = "/v1/agents/_shared/contexts/playbooks/uploads"
    event = api_event("POST", uploads, {"path": "big.pdf", "size": 10}, claims=claims)
    status, refused = invoke(stack, event)
    assert status == 403, refused
    assert "url" not in refused
    assert "fields" not in refused
    assert keys(stack) == ["ops-bot/runbooks/a.md", "ops-bot/runbooks/a.md.metadata.json"]


def test_a_presigned_upload_is_bound_to_its_key_size_and_expiry(stack: Stack) -> None:  # noqa: F811
    status, grant = invoke(
        stack,
        api_event("POST", f"{SCOPE_PATH}/uploads", {"path": "manuals/big.pdf", "size": 1000}),
    )
    assert status == 200, grant
    assert (grant["method"], grant["max_bytes"], grant["expires_in"]) == ("POST", 1000, 900)
    assert grant["fields"]["key"] == "ops-bot/runbooks/manuals/big.pdf"
    assert grant["fields"]["x-amz-algorithm"] == "AWS4-HMAC-SHA256"  # SigV4, not SigV2
    assert grant["url"] == f"https://{BUCKET}.s3.amazonaws.com/"
    assert keys(stack) == []  # nothing is stored until the caller posts the file

    def post(url: str, key: str, data: bytes, **changed: str) -> tuple[int, str]:
        fields: dict[str, Any] = {**grant["fields"], "key": key, **changed}
        fields["file"] = ("big.pdf", data)  # S3 wants the file last
        response = urllib3.request("POST", url, fields=fields)
        return response.status, response.data.decode()

    # moto stores any POST (module docstring of s3_post_policy); S3's rules are checked here,
    # with the secret key the function signed with (mock_aws's own fake credentials).
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]
    with post_policy_endpoint(secret, bucket=BUCKET) as (url, stored):
        key = grant["fields"]["key"]
        assert post(url, "ops-bot/runbooks/manuals/other.pdf", b"%PDF-1.7")[0] == 403
        assert post(url, "other-bot/x/big.pdf", b"%PDF-1.7")[0] == 403
        assert post(url, key, b"%PDF-" + b"x" * 1000)[0] == 403  # over the range
        assert post(url, key, b"")[0] == 403  # under it
        forged = json.loads(base64.b64decode(grant["fields"]["policy"]))
        forged["conditions"] = [c for c in forged["conditions"] if "content-length-range" not in c]
        forged_policy = base64.b64encode(json.dumps(forged).encode()).decode()
        assert post(url, key, b"%PDF-" + b"x" * 1000, policy=forged_policy)[0] == 403
        assert stored == {}
        assert post(url, key, b"%PDF-1.7 small") == (204, "")
        assert stored == {key: b"%PDF-1.7 small"}
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=grant["expires_in"] + 1)
    fields = {**grant["fields"]}
    assert check_post(fields, 10, secret, later, BUCKET) == (
        "AccessDenied: Invalid according to Policy: Policy expired."
    )
    assert check_post(fields, 10, secret, dt.datetime.now(dt.UTC), BUCKET) is None


@pytest.mark.parametrize("per_agent", [False, True], ids=["shared-index", "index-per-agent"])
def test_the_shared_library_on_opensearch(
    stack: Stack,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    opensearch_url: str,
    request: pytest.FixtureRequest,
    per_agent: bool,
) -> None:
    monkeypatch.setenv("KB_SHARED_GRANTS", "ops-bot=playbooks")  # read on the first request
    monkeypatch.setenv("OPENSEARCH_INDEX_PER_AGENT", str(per_agent).lower())
    if per_agent:  # the fixture drops the shared index only
        index = f"{opensearch_url}/{stack.index}-*"
        request.addfinalizer(lambda: urllib3.request("DELETE", index).close())
    wire_notifications(stack)
    stack.put("_shared/playbooks/incident.md", "# Incident\n\nPage the incident commander.\n")
    stack.put("_shared/secret/x.md", "# Secret\n\nincident never granted\n")
    stack.put("ops-bot/runbooks/deploy.md", "# Deploy\n\nincident during deploy\n")
    stack.put("support-bot/faq/refunds.md", "# Refunds\n\nincident refunds\n")
    drain(stack)

    def search(path: str, **body: Any) -> tuple[int, dict[str, Any]]:
        event = api_event("POST", path, {"query": "incident", "mode": "keyword", **body})
        return invoke(stack, event)

    status, answer = search(f"{SCOPE_PATH}/search", max_results=10)
    assert status == 200, answer
    found = {
        (r["document_path"], r["origin"], r["metadata"].get("shared_library"))
        for r in answer["results"]
    }
    assert found == {("deploy.md", "upload", None), ("incident.md", "shared", "_shared/playbooks")}
    # One query, normalised once: one best hit, the next below it (N searches gave both
    # 1.0); the ranking's scores (rank_score), the absolute ones in [0, 1].
    scores = [r["rank_score"] for r in answer["results"]]
    assert scores[0] == pytest.approx(1.0)
    assert 0.0 <= scores[1] < scores[0]
    assert all(0.0 <= r["score"] <= 1.0 for r in answer["results"])
    pages = [search(f"{SCOPE_PATH}/search", max_results=1, offset=n)[1] for n in (0, 1)]
    assert [p["results"][0]["document_path"] for p in pages] == [
        r["document_path"] for r in answer["results"]
    ]
    status, answer = search(f"{SCOPE_PATH}/search", shared_libraries=["_shared/secret"])
    assert (status, answer["field"]) == (400, "shared_libraries")
    status, answer = search("/v1/agents/ops-bot/search", include_shared=False)
    assert [r["document_path"] for r in answer["results"]] == ["deploy.md"]
    status, answer = search("/v1/agents/support-bot/contexts/faq/search", max_results=10)
    assert [r["document_path"] for r in answer["results"]] == ["refunds.md"]
    status, answer = search("/v1/agents/support-bot/search", include_shared=True)
    assert (status, answer["field"]) == (400, "include_shared")

    # The prompt block is a search too: the library only for the granted agent.
    status, answer = search(f"{SCOPE_PATH}/context", max_tokens=2000)
    assert status == 200, answer
    assert {p["document_path"] for p in answer["passages"]} == {"deploy.md", "incident.md"}
    assert any("library: playbooks" in p["citation"] for p in answer["passages"])
    status, answer = search("/v1/agents/support-bot/contexts/faq/context", max_tokens=2000)
    assert [p["document_path"] for p in answer["passages"]] == ["refunds.md"]

    # The library the agent is not granted fills up with the query's term: with an index
    # per agent (and per library) the granted agent's scores do not move.
    before = search(f"{SCOPE_PATH}/search", max_results=10)[1]["results"]
    for n in range(15):
        stack.put(f"_shared/secret/more-{n}.md", "# More\n\nincident incident incident\n")
    drain(stack)
    after = search(f"{SCOPE_PATH}/search", max_results=10)[1]["results"]
    scores = [[(r["document_path"], r["keyword_score"]) for r in hits] for hits in (before, after)]
    if per_agent:
        assert scores[0] == scores[1]
        indexes = urllib3.request("GET", f"{opensearch_url}/_cat/indices/{stack.index}-*?h=index")
        assert {
            f"{stack.index}-agent-__shared_-playbooks",
            f"{stack.index}-agent-__shared_-secret",
        } <= (set(indexes.data.decode().split()))
    else:
        assert [p for p, _ in scores[0]] == [p for p, _ in scores[1]]
        assert scores[0] != scores[1]  # one shared index: the probe tells


def test_a_granted_agent_cannot_read_the_library_directly(
    stack: Stack,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """JWT mode: the grant puts the library into the agent's searches, never the agent onto
    the ``_shared`` routes (status, documents, search, context, reindex): 403 on each."""
    monkeypatch.setattr(stack.search.container, "access", None)
    monkeypatch.setenv("API_AUTH", "jwt")
    monkeypatch.setenv("KB_SHARED_GRANTS", "ops-bot=playbooks")
    wire_notifications(stack)
    stack.put("_shared/playbooks/incident.md", "# Incident\n\nPage the incident commander.\n")
    drain(stack)
    granted = {"agents": "[ops-bot]", "agents_write": "[ops-bot]"}
    library = "/v1/agents/_shared/contexts/playbooks"
    for method, path, body in (
        ("GET", f"{library}/status", None),
        ("GET", f"{library}/documents", None),
        ("GET", f"{library}/documents/incident.md", None),
        ("POST", f"{library}/search", {"query": "incident"}),
        ("POST", "/v1/agents/_shared/search", {"query": "incident"}),
        ("POST", f"{library}/context", {"query": "incident"}),
        ("POST", f"{library}/reindex", {}),
    ):
        status, refused = invoke(stack, api_event(method, path, body, claims=granted))
        assert status == 403, (path, refused)
    event = api_event("POST", f"{SCOPE_PATH}/search", {"query": "incident"}, claims=granted)
    status, answer = invoke(stack, event)
    assert status == 200, answer
    assert [r["metadata"].get("shared_library") for r in answer["results"]] == ["_shared/playbooks"]


def test_a_presigned_upload_over_a_note_is_indexed_as_an_upload_not_with_the_notes_sidecar(
    stack: Stack,  # noqa: F811
) -> None:
    """The note's sidecar stays in the bucket (the search function writes none for an
    upload), but the upload's object carries the marker its POST policy fixes, so the
    indexer ignores the older sidecar: origin ``upload``, none of the note's metadata."""
    wire_notifications(stack)
    drain(stack)
    path, route = "notes/oncall.md", f"{SCOPE_PATH}/documents/notes%2Foncall.md"
    status, _ = invoke(
        stack,
        api_event(
            "PUT",
            route,
            b"# On-call\n\nwombatpager\n",
            content_type="text/markdown",
            query="origin=manual&metadata=%7B%22team%22%3A%22sre%22%7D",
        ),
    )
    assert status == 202
    drain(stack)
    assert document(stack, "notes%2Foncall.md")[1]["origin"] == "manual"

    status, grant = invoke(stack, api_event("POST", f"{SCOPE_PATH}/uploads", {"path": path}))
    assert status == 200, grant
    assert grant["fields"]["x-amz-meta-kb-upload"] == "1"
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]
    now = dt.datetime.now(dt.UTC)
    without = {k: v for k, v in grant["fields"].items() if k != "x-amz-meta-kb-upload"}
    assert check_post(without, 10, secret, now, BUCKET) is not None  # the marker is required
    assert check_post({**grant["fields"], "x-amz-meta-kb-upload": "0"}, 10, secret, now, BUCKET)
    assert check_post(grant["fields"], 10, secret, now, BUCKET) is None
    # What S3 stores from that form: the file under the key, the x-amz-meta-* field as
    # its user metadata (moto accepts any POST, so the object is put as S3 would store it).
    stack.s3.put_object(
        Bucket=BUCKET,
        Key=grant["fields"]["key"],
        Body=b"# On-call\n\nquokkarota uploaded\n",
        Metadata={"kb-upload": "1"},
    )
    assert "ops-bot/runbooks/notes/oncall.md.metadata.json" in keys(stack)  # still there
    drain(stack)
    status, found = document(stack, "notes%2Foncall.md")
    assert (status, found["indexed"], found["origin"], found["stale"]) == (
        200,
        True,
        "upload",
        False,
    )
    status, body = stack.call("api_search.json", {"query": "quokkarota", "mode": "keyword"})
    [hit] = body["results"]
    assert (hit["origin"], "team" in hit["metadata"]) == ("upload", False)

    # A note written over the upload again has its own, newer sidecar and no marker.
    status, _ = invoke(
        stack,
        api_event(
            "PUT",
            route,
            b"# On-call\n\nokapinote\n",
            content_type="text/markdown",
            query="origin=manual",
        ),
    )
    assert status == 202
    drain(stack)
    assert document(stack, "notes%2Foncall.md")[1]["origin"] == "manual"
