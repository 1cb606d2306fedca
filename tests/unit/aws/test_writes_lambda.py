"""The write routes through functions/search/app.py with API Gateway HTTP API (v2) events,
moto's S3 as the documents bucket and the memory store: what an attacker sends is refused
with a 4xx naming the field, nothing lands in the bucket, and no answer carries a trace,
a bucket name, a URL or an ARN. (The put -> index -> search round trip on a real
OpenSearch node is tests/integration/aws/test_writes_aws.py.)"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any
from urllib.parse import quote

import boto3
import document_files as files  # tests/support/document_files.py
import pytest
from lambda_support import BUCKET, LambdaContext, api_event, load_handler, use_fake_aws
from moto import mock_aws

from knowledge.aws.bucket_writes import S3Storage
from knowledge.service.api import KnowledgeApi
from knowledge.stores.memory import MemoryKnowledgeStore

SCOPE_PATH = "/v1/agents/ops-bot/contexts/runbooks"


class Writes:
    def __init__(self, module: ModuleType, s3: Any) -> None:
        self.module, self.s3 = module, s3

    def invoke(self, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = self.module.lambda_handler(event, LambdaContext())
        body: dict[str, Any] = json.loads(response["body"])
        return response["statusCode"], body

    def keys(self) -> list[str]:
        listed = self.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
        return sorted(item["Key"] for item in listed)


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Writes]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        module = load_handler("search", monkeypatch)
        module.container.api = KnowledgeApi(MemoryKnowledgeStore(), writes=S3Storage(BUCKET, s3))
        yield Writes(module, s3)


def leaks(body: dict[str, Any]) -> list[str]:
    text = json.dumps(body)
    words = ("Traceback", "arn:", BUCKET, "amazonaws.com", "/work/")
    return [word for word in words if word in text]


@pytest.mark.parametrize(
    ("raw_path", "field"),
    [
        ("/v1/agents/.kb/contexts/notes/documents/a.md", "agent"),
        ("/v1/agents/.git/contexts/hooks/documents/a.md", "agent"),
        ("/v1/agents/ops-bot/contexts/.hidden/documents/a.md", "context"),
    ],
)
def test_a_hidden_agent_or_context_is_refused_and_stores_nothing(
    writes: Writes, raw_path: str, field: str
) -> None:
    status, body = writes.invoke(api_event("PUT", raw_path, b"# a\n"))
    assert (status, body["field"]) == (400, field), body
    upload = raw_path.split("/documents/", maxsplit=1)[0] + "/uploads"
    status, body = writes.invoke(api_event("POST", upload, {"path": "a.pdf"}))
    assert (status, body["field"]) == (400, field), body
    assert writes.keys() == []


def test_metadata_claiming_a_shared_library_is_refused(writes: Writes) -> None:
    metadata = quote(json.dumps({"shared_library": "_shared/playbooks"}))
    event = api_event(
        "PUT", f"{SCOPE_PATH}/documents/forged.md", b"# x\n", query=f"metadata={metadata}"
    )
    status, body = writes.invoke(event)
    assert (status, body["field"]) == (400, "metadataAttributes.shared_library"), body
    assert writes.keys() == []


@pytest.mark.parametrize(
    ("path", "data", "content_type", "field"),
    [
        ("manual.pdf", b"# text, not a PDF\n", "application/pdf", "body"),
        ("blank.md", b"\xef\xbb\xbf \n\t\r\n", "text/markdown", "body"),
        ("blank.csv", b"\n\n", "text/csv", "body"),
        ("blank-unicode.md", "\u3000\u00a0\n".encode(), "text/markdown", "body"),
        ("guide.docx", b"PK\x03\x04" + b"\x00" * 64, "application/octet-stream", "body"),
        ("sheet.xlsx", files.docx([("Title", "Word")]), "application/octet-stream", "body"),
        (
            "old.doc",
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 64,
            "application/msword",
            "path",
        ),
    ],
)
def test_a_body_the_indexer_could_never_read_is_refused(
    writes: Writes, path: str, data: bytes, content_type: str, field: str
) -> None:
    event = api_event("PUT", f"{SCOPE_PATH}/documents/{path}", data, content_type=content_type)
    status, body = writes.invoke(event)
    assert (status, body["field"]) == (400, field), body
    assert writes.keys() == []


@pytest.mark.parametrize(
    ("agent", "path", "field"),
    [
        ("ops-bot", "x.md.metadata.json/inner.md", "path"),
        ("ops-bot", "nel\x85.md", "path"),
        ("ops-bot", "_repos /x.md", "path"),
        ("ops-bot", "_synonyms.txt.", "path"),
        ("_shared.", "a.md", "agent"),
    ],
)
def test_a_name_the_folder_rules_refuse_is_refused_on_aws_too(
    writes: Writes, agent: str, path: str, field: str
) -> None:
    # S3 keys have no folders to collide with, but a bucket is often copied to a kb serve
    # folder (and back), and the indexer reads both alike: one rule for every stack.
    raw_path = f"/v1/agents/{agent}/contexts/runbooks/documents/{quote(path, safe='')}"
    status, body = writes.invoke(api_event("PUT", raw_path, b"# a\n"))
    assert (status, body["field"]) == (400, field), body
    assert leaks(body) == [], body
    assert writes.keys() == []


def test_a_real_office_file_and_pdf_are_accepted(writes: Writes) -> None:
    for path, data in (
        ("manual.pdf", files.pdf(["Feed the wombat."])),
        ("guide.docx", files.docx([("Title", "Guide")])),
        ("sheet.xlsx", files.xlsx({"Sheet": [("name", "value"), ("a", 1)]})),
    ):
        status, body = writes.invoke(api_event("PUT", f"{SCOPE_PATH}/documents/{path}", data))
        assert status == 202, body
    assert len(writes.keys()) == 6


def test_an_upload_of_a_format_never_read_is_refused(writes: Writes) -> None:
    status, body = writes.invoke(api_event("POST", f"{SCOPE_PATH}/uploads", {"path": "a.odt"}))
    assert (status, body["field"]) == (400, "path"), body
    assert "save it as .docx" in body["error"]


def test_refusals_and_failures_name_no_bucket_arn_or_trace(writes: Writes) -> None:
    bad_base64 = api_event("PUT", f"{SCOPE_PATH}/documents/a.md", b"# a\n")
    bad_base64["body"] = "not base64!!"
    refused = [
        bad_base64,
        api_event("PUT", f"{SCOPE_PATH}/documents/..%2Fa.md", b"# a\n"),
        api_event("PUT", f"{SCOPE_PATH}/documents/a.md", b""),
        api_event("POST", f"{SCOPE_PATH}/uploads", {"path": ["a.pdf"]}),
        api_event("POST", f"{SCOPE_PATH}/uploads", {"path": "a.pdf", "size": 10**12}),
        api_event("POST", f"{SCOPE_PATH}/uploads", {"path": "a.pdf", "acl": "public-read"}),
        # metadata nested deeper than Python's parser goes (a RecursionError: a 500 before)
        api_event(
            "PUT",
            f"{SCOPE_PATH}/documents/a.md",
            b"# a\n",
            query="metadata=" + quote('{"a":' + "[" * 20_000 + "]" * 20_000 + "}"),
        ),
    ]
    for event in refused:
        status, body = writes.invoke(event)
        assert status == 400, body
        assert body["field"], body
        assert leaks(body) == [], body
    writes.s3.delete_bucket(Bucket=BUCKET)  # the bucket is gone: a 503, and nothing named
    status, body = writes.invoke(api_event("PUT", f"{SCOPE_PATH}/documents/a.md", b"# a\n"))
    assert status == 503, body
    assert leaks(body) == [], body


def test_a_path_too_long_for_an_s3_key_is_a_400_before_anything_is_stored(
    writes: Writes,
) -> None:
    # 1,024 characters pass the path rules, but S3 keys are at most 1,024 bytes of UTF-8
    # (with the scope's prefix and the sidecar's suffix); moto takes longer ones, S3 answers
    # KeyTooLongError, which became a 503. The longest path that fits is accepted.
    prefix = len("ops-bot/runbooks/") + len(".metadata.json")
    fits = "a" * (1024 - prefix - 3) + ".md"
    for path in ("한" * 332 + ".md", "a" * (1024 - prefix - 2) + ".md"):
        event = api_event("PUT", f"{SCOPE_PATH}/documents/{quote(path, safe='')}", b"# x\n")
        status, body = writes.invoke(event)
        assert (status, body["field"]) == (400, "path"), body
        status, body = writes.invoke(
            api_event("POST", f"{SCOPE_PATH}/uploads", {"path": path[:-3] + ".pdf"})
        )
        assert (status, body["field"]) == (400, "path"), body
    assert writes.keys() == []
    event = api_event("PUT", f"{SCOPE_PATH}/documents/{fits}", b"# x\n")
    assert writes.invoke(event)[0] == 202
    # A document put straight into the bucket with no room for a sidecar's key can still
    # be deleted through the API (it has no sidecar).
    longest = "b" * (1024 - len("ops-bot/runbooks/") - 3) + ".md"
    writes.s3.put_object(Bucket=BUCKET, Key=f"ops-bot/runbooks/{longest}", Body=b"# b\n")
    event = api_event("DELETE", f"{SCOPE_PATH}/documents/{longest}")
    assert writes.invoke(event)[0] == 202
    stored = writes.keys()
    assert f"ops-bot/runbooks/{longest}" not in stored


def test_an_upload_grant_admits_no_more_than_the_indexer_indexes(writes: Writes) -> None:
    # The grant admitted 100 MiB whatever MaxDocumentMiB said (64 by default): a larger
    # upload could only become a "too large" problem, and take an earlier version out.
    limit = 64 * 1024 * 1024
    storage = S3Storage(BUCKET, writes.s3, max_upload_bytes=limit)
    writes.module.container.api = KnowledgeApi(MemoryKnowledgeStore(), writes=storage)
    status, grant = writes.invoke(api_event("POST", f"{SCOPE_PATH}/uploads", {"path": "a.pdf"}))
    assert (status, grant["max_bytes"]) == (200, limit), grant
    policy = json.loads(base64.b64decode(grant["fields"]["policy"]))
    assert ["content-length-range", 1, limit] in policy["conditions"]
    event = api_event("POST", f"{SCOPE_PATH}/uploads", {"path": "a.pdf", "size": limit + 1})
    status, body = writes.invoke(event)
    assert (status, body["field"]) == (400, "size"), body
    assert str(limit) in body["error"]


def test_a_put_over_the_indexers_document_limit_is_a_413_naming_it(writes: Writes) -> None:
    # MaxDocumentMiB below the 4 MiB a PUT takes: such a body answered 202 with a
    # content_hash the indexer never indexed (it skips the file as too large).
    limit = 1024 * 1024
    storage = S3Storage(BUCKET, writes.s3, max_upload_bytes=limit)
    writes.module.container.api = KnowledgeApi(MemoryKnowledgeStore(), writes=storage)
    over = api_event("PUT", f"{SCOPE_PATH}/documents/big.md", b"a" * (limit + 1))
    status, body = writes.invoke(over)
    assert (status, body["field"]) == (413, "body"), body
    assert str(limit) in body["error"], body
    assert leaks(body) == [], body
    assert writes.keys() == []
    at_limit = api_event("PUT", f"{SCOPE_PATH}/documents/big.md", b"a" * limit)
    assert writes.invoke(at_limit)[0] == 202


def test_a_put_over_the_fixed_body_limit_is_a_413_pointing_to_uploads(writes: Writes) -> None:
    over = api_event("PUT", f"{SCOPE_PATH}/documents/big.md", b"a" * (4 * 1024 * 1024 + 1))
    status, body = writes.invoke(over)
    assert (status, body["field"]) == (413, "body"), body
    assert str(4 * 1024 * 1024) in body["error"], body
    assert "uploads" in body["error"], body
    assert writes.keys() == []
