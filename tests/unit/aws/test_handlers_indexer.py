"""functions/indexer/app.py with the sample events, moto's S3/SQS and the memory store.

These tests are about event handling (what gets indexed, retried, rejected), so the
store is the in-memory one injected into the handler's container; the same flows
against a real OpenSearch node are in tests/integration/aws/test_handlers_opensearch.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import boto3
import pytest
from lambda_support import (
    BUCKET,
    LambdaContext,
    emitted_metrics,
    load_event,
    load_handler,
    log_records,
    s3_notification,
    sqs_event,
    sqs_messages_as_event,
    use_fake_aws,
)
from moto import mock_aws

from knowledge.aws.event_indexing import EventIndexer
from knowledge.aws.events import reindex_message_body
from knowledge.aws.reindex_queue import ScopeReindexer
from knowledge.aws.settings import LambdaSettings
from knowledge.core.errors import StoreError
from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.sources.s3 import S3DocumentSource
from knowledge.stores.memory import MemoryKnowledgeStore

RUNBOOKS = KnowledgeScope("ops-bot", "runbooks")
MANUALS = KnowledgeScope("ops-bot", "manuals")


@dataclass
class Indexer:
    """The handler module with an injected memory store, and the moto bucket."""

    module: ModuleType
    store: MemoryKnowledgeStore
    s3: Any

    def put(self, key: str, text: str) -> None:
        self.s3.put_object(Bucket=BUCKET, Key=key, Body=text.encode("utf-8"))

    def remove(self, key: str) -> None:
        self.s3.delete_object(Bucket=BUCKET, Key=key)

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        response: dict[str, Any] = self.module.lambda_handler(event, LambdaContext())
        return response

    def paths(self, scope: KnowledgeScope = RUNBOOKS) -> list[str]:
        return sorted(self.store.stored_documents(scope))

    def hits(self, text: str, scope: KnowledgeScope = RUNBOOKS, **filters: Any) -> list[str]:
        query = SearchQuery(text, max_results=20, **filters)
        return [r.document_path for r in self.store.search(scope, query)]


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        yield client


def _harness(monkeypatch: pytest.MonkeyPatch, s3: Any, store: MemoryKnowledgeStore) -> Indexer:
    monkeypatch.setenv("DOCUMENTS_BUCKET", BUCKET)
    module = load_handler("indexer", monkeypatch)
    settings = LambdaSettings.from_env()
    module.container.settings = settings
    module.container.indexer = EventIndexer(
        store, S3DocumentSource(BUCKET, client=s3), settings.index_options
    )
    return Indexer(module, store, s3)


@pytest.fixture
def indexer(
    monkeypatch: pytest.MonkeyPatch, s3: Any, capsys: pytest.CaptureFixture[str]
) -> Indexer:
    return _harness(monkeypatch, s3, MemoryKnowledgeStore())


NO_FAILURES: dict[str, Any] = {"batchItemFailures": []}


def test_put_sample_indexes_the_object(indexer, capsys):
    indexer.put("ops-bot/runbooks/deploy.md", "# Deploy\n\nRoll back with `helm rollback`.")
    assert indexer.invoke(load_event("sqs_s3_put.json")) == NO_FAILURES
    assert indexer.hits("rollback") == ["deploy.md"]
    (stored,) = indexer.store.stored_documents(RUNBOOKS).values()
    assert stored.version == "0065F2A1B3C4D5E6F7"
    out = capsys.readouterr().out
    assert emitted_metrics(out)["DocumentsIndexed"] == 1
    (applied,) = [r for r in log_records(out) if r["message"] == "object event applied"]
    assert applied["agent"] == "ops-bot"
    assert applied["context"] == "runbooks"
    assert applied["path"] == "deploy.md"
    assert applied["status"] == "indexed"
    assert applied["event_name"] == "ObjectCreated:Put"


@pytest.mark.parametrize(
    ("sample", "key", "scope", "path"),
    [
        ("sqs_s3_post.json", "ops-bot/runbooks/rollback.md", RUNBOOKS, "rollback.md"),
        (
            "sqs_s3_multipart_upload.json",
            "ops-bot/manuals/large-guide.md",
            MANUALS,
            "large-guide.md",
        ),
        (
            "sqs_s3_copy.json",
            "ops-bot/runbooks/archive/deploy-2024.md",
            RUNBOOKS,
            "archive/deploy-2024.md",
        ),
    ],
)
def test_every_kind_of_create_is_indexed(indexer, sample, key, scope, path):
    indexer.put(key, "# Guide\n\nHow to drain a node before maintenance.")
    assert indexer.invoke(load_event(sample)) == NO_FAILURES
    assert indexer.hits("drain", scope) == [path]


def test_url_encoded_korean_key_with_spaces(indexer):
    key = "ops-bot/runbooks/장애 대응/배포 실패 대응.md"
    indexer.put(key, "# 배포 실패 대응\n\n배포가 실패하면 이전 버전으로 롤백한다.")
    assert indexer.invoke(load_event("sqs_s3_korean_key.json")) == NO_FAILURES
    assert indexer.paths() == ["장애 대응/배포 실패 대응.md"]
    assert indexer.hits("롤백") == ["장애 대응/배포 실패 대응.md"]
    (result,) = indexer.store.search(RUNBOOKS, SearchQuery("롤백"))
    assert result.metadata["source_key"] == key


@pytest.mark.parametrize("sample", ["sqs_s3_delete.json", "sqs_s3_delete_marker.json"])
def test_delete_events_remove_the_document(indexer, sample):
    indexer.put("ops-bot/runbooks/deploy.md", "# Deploy\n\nhelm rollback")
    indexer.invoke(load_event("sqs_s3_put.json"))
    assert indexer.paths() == ["deploy.md"]
    indexer.remove("ops-bot/runbooks/deploy.md")  # versioned bucket: a delete marker
    assert indexer.invoke(load_event(sample)) == NO_FAILURES
    assert indexer.paths() == []


def test_duplicate_delivery_changes_nothing(indexer, capsys):
    indexer.put("ops-bot/runbooks/deploy.md", "# Deploy\n\nhelm rollback")
    event = load_event("sqs_s3_put.json")
    indexer.invoke(event)
    before = indexer.store.status(RUNBOOKS)
    assert indexer.invoke(event) == NO_FAILURES
    after = indexer.store.status(RUNBOOKS)
    assert (after.document_count, after.chunk_count) == (before.document_count, before.chunk_count)
    assert emitted_metrics(capsys.readouterr().out)["DocumentsUnchanged"] == 1


def test_out_of_order_events_keep_the_newer_version(indexer, capsys):
    key = "ops-bot/runbooks/deploy.md"
    indexer.put(key, "# Deploy\n\nversion two: use argo rollbacks")
    newer = sqs_event(s3_notification("ObjectCreated:Put", key, "0065F2A1B3C4D5E800"))
    older = sqs_event(s3_notification("ObjectCreated:Put", key, "0065F2A1B3C4D5E6F7"))
    assert indexer.invoke(newer) == NO_FAILURES
    assert indexer.invoke(older) == NO_FAILURES
    (stored,) = indexer.store.stored_documents(RUNBOOKS).values()
    assert stored.version == "0065F2A1B3C4D5E800"
    assert emitted_metrics(capsys.readouterr().out)["StaleEvents"] == 1


def test_object_deleted_before_its_create_event_is_processed(indexer):
    indexer.put("ops-bot/runbooks/deploy.md", "# Deploy\n\nhelm rollback")
    indexer.remove("ops-bot/runbooks/deploy.md")
    assert indexer.invoke(load_event("sqs_s3_put.json")) == NO_FAILURES
    assert indexer.paths() == []


def test_delete_event_for_a_recreated_object_keeps_it(indexer):
    key = "ops-bot/runbooks/deploy.md"
    indexer.put(key, "# Deploy\n\nhelm rollback")
    indexer.invoke(load_event("sqs_s3_put.json"))
    # The object was deleted and uploaded again before the delete event arrives.
    assert indexer.invoke(load_event("sqs_s3_delete.json")) == NO_FAILURES
    assert indexer.paths() == ["deploy.md"]


def test_invalid_keys_are_rejected_logged_and_not_retried(indexer, capsys):
    assert indexer.invoke(load_event("sqs_s3_invalid_key.json")) == NO_FAILURES
    out = capsys.readouterr().out
    rejected = [r for r in log_records(out) if r["message"] == "object event rejected"]
    assert [(r["key"], r["field"]) for r in rejected] == [
        ("ops bot/runbooks/deploy.md", "agent"),
        ("README.md", "key"),
    ]
    assert all(r["level"] == "WARNING" and r["reason"] for r in rejected)
    assert emitted_metrics(out)["RejectedEvents"] == 2


@pytest.mark.parametrize("sample", ["sqs_s3_test_event.json", "sqs_s3_folder_placeholder.json"])
def test_test_event_and_folder_placeholder_are_ignored(indexer, capsys, sample):
    assert indexer.invoke(load_event(sample)) == NO_FAILURES
    assert indexer.paths() == []
    assert emitted_metrics(capsys.readouterr().out)["IgnoredEvents"] == 1


def test_sidecar_upload_adds_its_metadata_to_every_chunk(indexer):
    indexer.put(
        "ops-bot/runbooks/deploy.md", "# Deploy\n\nhelm rollback\n\n## Verify\n\nhelm status"
    )
    indexer.invoke(load_event("sqs_s3_put.json"))
    assert indexer.hits("helm", metadata={"team": "platform"}) == []
    indexer.put(
        "ops-bot/runbooks/deploy.md.metadata.json",
        json.dumps({"metadataAttributes": {"team": "platform", "reviewed": True}}),
    )
    assert indexer.invoke(load_event("sqs_s3_sidecar.json")) == NO_FAILURES
    results = indexer.store.search(RUNBOOKS, SearchQuery("helm", metadata={"team": "platform"}))
    assert {r.document_path for r in results} == {"deploy.md"}
    assert len(results) == indexer.store.status(RUNBOOKS).chunk_count
    assert all(r.metadata["reviewed"] == "true" for r in results)
    assert indexer.paths() == ["deploy.md"], "the sidecar is not a document"


def test_reindex_message_indexes_the_current_object(indexer):
    indexer.put("ops-bot/runbooks/deploy.md", "# Deploy\n\nhelm rollback")
    assert indexer.invoke(load_event("sqs_reindex.json")) == NO_FAILURES
    assert indexer.paths() == ["deploy.md"]


def test_event_from_another_bucket_is_rejected(indexer):
    event = sqs_event(
        s3_notification("ObjectCreated:Put", "ops-bot/runbooks/deploy.md", "01", bucket="other")
    )
    assert indexer.invoke(event) == NO_FAILURES
    assert indexer.paths() == []


def test_mixed_batch_sample(indexer):
    indexer.put("ops-bot/runbooks/deploy.md", "# Deploy\n\nhelm rollback")
    indexer.put("ops-bot/manuals/large-guide.md", "# Guide\n\ndrain nodes")
    indexer.put("ops-bot/runbooks/archive/deploy-2024.md", "# Old deploy\n\nkubectl apply")
    indexer.put("ops-bot/runbooks/장애 대응/배포 실패 대응.md", "# 배포 실패\n\n롤백")
    # old-checklist.md and retired.md were deleted before the batch: nothing to index.
    assert indexer.invoke(load_event("sqs_mixed_batch.json")) == NO_FAILURES
    assert indexer.paths() == ["archive/deploy-2024.md", "deploy.md", "장애 대응/배포 실패 대응.md"]
    assert indexer.paths(MANUALS) == ["large-guide.md"]


class PoisonStore(MemoryKnowledgeStore):
    """Fails every write of ``poison.md``, as a backend bug or a bad document would."""

    def stored_document(self, scope: KnowledgeScope, path: str) -> Any:
        if path == "poison.md":  # the pipeline's first read of a write
            raise StoreError("the index rejected poison.md")
        return super().stored_document(scope, path)


def test_poison_record_in_a_batch_is_the_only_failure(monkeypatch, s3, capsys):
    indexer = _harness(monkeypatch, s3, PoisonStore())
    for name in ("first", "poison", "last"):
        indexer.put(f"ops-bot/runbooks/{name}.md", f"# {name}\n\nrunbook {name}")
    event = sqs_event(
        s3_notification("ObjectCreated:Put", "ops-bot/runbooks/first.md", "01"),
        s3_notification("ObjectCreated:Put", "ops-bot/runbooks/poison.md", "02"),
        "this body is not JSON",  # malformed: rejected and acknowledged, not retried
        s3_notification("ObjectCreated:Put", "ops-bot/runbooks/last.md", "03"),
    )
    poison_id = event["Records"][1]["messageId"]
    assert indexer.invoke(event) == {"batchItemFailures": [{"itemIdentifier": poison_id}]}
    assert indexer.paths() == ["first.md", "last.md"]
    out = capsys.readouterr().out
    failed = [r for r in log_records(out) if r["message"].startswith("object event failed")]
    assert [r["path"] for r in failed] == ["poison.md"]
    assert failed[0]["level"] == "ERROR"
    metrics = emitted_metrics(out)
    assert metrics["FailedEvents"] == 1
    assert metrics["RejectedEvents"] == 1
    assert metrics["DocumentsIndexed"] == 2


def test_every_record_failing_is_reported_not_raised(monkeypatch, s3):
    indexer = _harness(monkeypatch, s3, PoisonStore())
    indexer.put("ops-bot/runbooks/poison.md", "# poison")
    event = sqs_event(s3_notification("ObjectCreated:Put", "ops-bot/runbooks/poison.md", "01"))
    response = indexer.invoke(event)
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}


def test_poison_message_ends_in_the_dead_letter_queue_and_the_rest_are_indexed(monkeypatch, s3):
    """What the SQS event source mapping does with the handler's partial-batch response:
    acknowledged records are deleted, failed ones come back until maxReceiveCount, then
    SQS moves them to the dead-letter queue (moto implements the redrive policy)."""
    monkeypatch.setenv("RETRY_BASE_SECONDS", "0")  # failed records come back at once
    monkeypatch.setenv("RETRY_MAX_SECONDS", "0")
    indexer = _harness(monkeypatch, s3, PoisonStore())
    sqs = boto3.client("sqs")
    dlq_url = sqs.create_queue(QueueName="documents-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    queue_url = sqs.create_queue(
        QueueName="documents",
        Attributes={
            "VisibilityTimeout": "0",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "3"}),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    for i, name in enumerate(("a", "poison", "b")):
        indexer.put(f"ops-bot/runbooks/{name}.md", f"# {name}\n\nrunbook {name}")
        body = s3_notification("ObjectCreated:Put", f"ops-bot/runbooks/{name}.md", f"0{i}")
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(body))

    for _ in range(6):  # the event source mapping polling
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
        if not messages:
            continue
        response = indexer.invoke(sqs_messages_as_event(messages, queue_arn))
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        for message in messages:
            if message["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])

    assert indexer.paths() == ["a.md", "b.md"]
    assert sqs.receive_message(QueueUrl=queue_url).get("Messages", []) == []
    (dead,) = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10)["Messages"]
    assert (
        json.loads(dead["Body"])["Records"][0]["s3"]["object"]["key"]
        == "ops-bot/runbooks/poison.md"
    )
    # The object is still in S3: after a fix, a redrive indexes it.
    assert s3.head_object(Bucket=BUCKET, Key="ops-bot/runbooks/poison.md")["ContentLength"] > 0


def test_store_is_created_once_per_container_and_unreachable_store_is_retried(monkeypatch, s3):
    monkeypatch.setenv("DOCUMENTS_BUCKET", BUCKET)
    monkeypatch.setenv("OPENSEARCH_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("OPENSEARCH_MAX_RETRIES", "0")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    module = load_handler("indexer", monkeypatch)
    s3.put_object(Bucket=BUCKET, Key="ops-bot/runbooks/deploy.md", Body=b"# Deploy")
    event = load_event("sqs_s3_put.json")
    assert module.container.indexer is None
    first = module.lambda_handler(event, LambdaContext())
    created = module.container.indexer
    second = module.lambda_handler(event, LambdaContext())
    assert created is not None
    assert module.container.indexer is created
    message_id = event["Records"][0]["messageId"]
    assert first == second == {"batchItemFailures": [{"itemIdentifier": message_id}]}


def test_keys_that_cannot_be_s3_keys_are_rejected_once_not_retried(indexer, capsys):
    """A lone surrogate (only a JSON escape can make one) or percent escapes that are not
    UTF-8: no S3 object can have such a key, so the record is acknowledged as rejected
    (logged with the reason, counted), never retried toward the dead-letter queue."""
    # json.dumps would refuse to write a lone surrogate: the bodies are written by hand.
    lone_surrogate = (
        '{"Records": [{"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": "BUCKET"}, '
        '"object": {"key": "ops-bot/runbooks/bad\\ud800.md", "sequencer": "01"}}}]}'
    ).replace("BUCKET", BUCKET)
    reindex_surrogate = (
        '{"type": "knowledge.reindex", "bucket": "BUCKET", "key": "ops-bot/runbooks/x\\udc80.md"}'
    ).replace("BUCKET", BUCKET)
    not_utf8 = s3_notification("ObjectCreated:Put", "ops-bot/runbooks/bad%ED%A0%80.md", "02")
    event = sqs_event(lone_surrogate, reindex_surrogate, not_utf8)
    assert indexer.invoke(event) == NO_FAILURES
    assert indexer.paths() == []
    out = capsys.readouterr().out
    rejected = [r for r in log_records(out) if r["message"] == "object event rejected"]
    assert [(r["field"], r["key"]) for r in rejected] == [
        ("key", "ops-bot/runbooks/bad\\ud800.md"),
        ("key", "ops-bot/runbooks/x\\udc80.md"),
        ("key", "ops-bot/runbooks/bad\\xed\\xa0\\x80.md"),
    ]
    assert "lone surrogate (U+D800)" in rejected[0]["reason"]
    assert "not UTF-8" in rejected[2]["reason"]
    assert emitted_metrics(out)["RejectedEvents"] == 3


def test_scope_reindex_sample_queues_a_message_per_key(monkeypatch, s3, capsys):
    sqs = boto3.client("sqs")
    queue_url = sqs.create_queue(QueueName="document-events")["QueueUrl"]
    indexer = _harness(monkeypatch, s3, MemoryKnowledgeStore())
    source = S3DocumentSource(BUCKET, client=s3)
    indexer.module.container.indexer = EventIndexer(
        indexer.store, source, expander=ScopeReindexer(queue_url, source, client=sqs)
    )
    indexer.put("ops-bot/runbooks/deploy.md", "# Deploy")
    indexer.put("ops-bot/runbooks/scale.md", "# Scale")
    assert indexer.invoke(load_event("sqs_reindex_scope.json")) == NO_FAILURES
    bodies = [
        json.loads(m["Body"])
        for m in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    ]
    assert sorted(b["key"] for b in bodies) == [
        "ops-bot/runbooks/deploy.md",
        "ops-bot/runbooks/scale.md",
    ]
    out = capsys.readouterr().out
    (line,) = [r for r in log_records(out) if r["message"] == "object event applied"]
    assert (line["status"], line["phase"]) == ("expanded", "objects")
    assert emitted_metrics(out)["ReindexMessagesQueued"] == 2


# --- real documents through the Lambda path -------------------------------------------------


def test_pdf_upload_is_indexed_with_page_citations_and_a_bad_one_is_a_problem(indexer):
    import document_files as files

    from knowledge.agent_tools.tool import format_search_results

    handbook = files.pdf(["Cover", "To roll back, run the quokka job."], title="Handbook")
    indexer.s3.put_object(Bucket=BUCKET, Key="ops-bot/runbooks/handbook.pdf", Body=handbook)
    locked = files.pdf(["secret"], password="pw")
    indexer.s3.put_object(Bucket=BUCKET, Key="ops-bot/runbooks/locked.pdf", Body=locked)
    event = sqs_event(
        s3_notification("ObjectCreated:Put", "ops-bot/runbooks/handbook.pdf", "0A"),
        s3_notification("ObjectCreated:Put", "ops-bot/runbooks/locked.pdf", "0B"),
    )
    # A problem is a result, not a failure to retry: the file stays a problem until fixed.
    assert indexer.invoke(event) == NO_FAILURES
    results = indexer.store.search(RUNBOOKS, SearchQuery("quokka"))
    assert [r.document_path for r in results] == ["handbook.pdf"]
    metadata = results[0].metadata
    assert (metadata["format"], metadata["page"], metadata["page_end"]) == ("pdf", 1, 2)
    assert metadata["content_type"] == "application/pdf"
    assert (
        format_search_results("quokka", results)
        .splitlines()[2]
        .startswith(
            f"[1] handbook.pdf pp. 1-2 (score: {results[0].score:.2f}, chunk: 0, origin: upload)"
        )
    )
    problems = indexer.store.status(RUNBOOKS).problems
    assert [(p.path, p.reason) for p in problems] == [("locked.pdf", "encrypted PDF")]


def test_an_edit_reports_embedded_and_reused_chunks_as_metrics(monkeypatch, s3, tmp_path, capsys):
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    store = EmbeddedKnowledgeStore(tmp_path / "kb.db", embedder=HashingEmbedder(64))
    try:
        harness = _harness(monkeypatch, s3, store)  # type: ignore[arg-type]
        key = "ops-bot/runbooks/deploy.md"
        parts = [f"## Step {i}\n\nrun step {i} of the deployment" for i in range(6)]
        harness.put(key, "\n\n".join(parts))
        assert harness.invoke(sqs_event(s3_notification("ObjectCreated:Put", key, "01"))) == (
            NO_FAILURES
        )
        first = emitted_metrics(capsys.readouterr().out)
        assert (first["ChunksEmbedded"], first.get("ChunksReused", 0)) == (6, 0)
        parts[2] = "## Step 2\n\nrun step 2 twice, then check the rollout"
        harness.put(key, "\n\n".join(parts))
        assert harness.invoke(sqs_event(s3_notification("ObjectCreated:Put", key, "02"))) == (
            NO_FAILURES
        )
        out = capsys.readouterr().out
        second = emitted_metrics(out)
        assert (second["ChunksEmbedded"], second["ChunksReused"]) == (1, 5)
        (applied,) = [r for r in log_records(out) if r["message"] == "object event applied"]
        assert (applied["embedded_chunks"], applied["reused_chunks"]) == (1, 5)
    finally:
        store.close()


def test_real_world_files_through_the_lambda_path(indexer):
    """Upper-case extensions are documents, a page in a legacy encoding is read, a damaged
    or empty Office file is a problem: one batch, nothing retried, nothing crashed."""
    import document_files as files
    from test_document_damage import deck_without_its_slide, empty_docx

    page = (
        '<html><head><meta charset="euc-kr"></head><body><p>서울 리전 복구 절차</p></body></html>'
    )
    uploads = {
        "Scan.PDF": files.pdf(["The walrus procedure restores the primary."]),
        "Guide.Docx": files.docx([("Heading 1", "Guide"), ("p", "Narwhal rotation weekly.")]),
        "legacy.html": page.encode("cp949"),
        "broken.pptx": deck_without_its_slide(),
        "empty.docx": empty_docx(),
    }
    for name, body in uploads.items():
        indexer.s3.put_object(Bucket=BUCKET, Key=f"ops-bot/runbooks/{name}", Body=body)
    event = sqs_event(
        *(
            s3_notification("ObjectCreated:Put", f"ops-bot/runbooks/{name}", f"0{n}")
            for n, name in enumerate(uploads)
        )
    )
    assert indexer.invoke(event) == NO_FAILURES
    assert indexer.paths() == ["Guide.Docx", "Scan.PDF", "legacy.html"]
    (walrus,) = indexer.store.search(RUNBOOKS, SearchQuery("walrus"))
    assert (walrus.document_path, walrus.metadata["format"]) == ("Scan.PDF", "pdf")
    assert indexer.hits("narwhal", metadata={"format": "docx"}) == ["Guide.Docx"]
    assert indexer.hits("서울 리전") == ["legacy.html"]
    reasons = {p.path: p.reason for p in indexer.store.status(RUNBOOKS).problems}
    assert sorted(reasons) == ["broken.pptx", "empty.docx"]
    assert reasons["broken.pptx"].startswith("corrupt file: the pptx reader failed")
    assert reasons["empty.docx"].startswith("no text: ")


def test_an_archived_object_is_a_problem_until_its_restore_completes(indexer, capsys):
    """An object in an archive storage class (Glacier Flexible Retrieval / Deep Archive, an
    Intelligent-Tiering archive tier) cannot be read: its create event is not retried into
    the dead-letter queue (retrying cannot read it); the object is reported as a problem,
    and the event S3 sends when a restore completes indexes it."""
    key = "ops-bot/runbooks/archived.md"
    indexer.s3.put_object(
        Bucket=BUCKET, Key=key, Body=b"# Archived\n\nfrozen runbook words", StorageClass="GLACIER"
    )
    put = sqs_event(s3_notification("ObjectCreated:Put", key, "0065F2A1B3C4D5E6F7"))
    assert indexer.invoke(put) == NO_FAILURES
    assert indexer.hits("frozen runbook") == []
    (problem,) = indexer.store.status(RUNBOOKS).problems
    assert problem.path == "archived.md"
    assert "storage class" in problem.reason
    capsys.readouterr()

    indexer.s3.restore_object(Bucket=BUCKET, Key=key, RestoreRequest={"Days": 1})
    restored = sqs_event(s3_notification("ObjectRestore:Completed", key, "0065F2A1B3C4D5E6F9"))
    assert indexer.invoke(restored) == NO_FAILURES
    assert indexer.hits("frozen runbook") == ["archived.md"]
    assert indexer.store.status(RUNBOOKS).problems == ()


def test_an_indexed_document_whose_object_is_archived_stays_searchable(indexer):
    """A reindex (or a late event) that finds the object archived keeps what is indexed of
    it: the object is still in the bucket, only unreadable until restored."""
    key = "ops-bot/runbooks/old.md"
    text = b"# Old\n\nlong kept runbook words"
    indexer.s3.put_object(Bucket=BUCKET, Key=key, Body=text)
    put = sqs_event(s3_notification("ObjectCreated:Put", key, "0065F2A1B3C4D5E6F7"))
    assert indexer.invoke(put) == NO_FAILURES
    indexer.s3.copy_object(
        Bucket=BUCKET,
        Key=key,
        CopySource={"Bucket": BUCKET, "Key": key},
        StorageClass="DEEP_ARCHIVE",
        MetadataDirective="COPY",
    )
    again = sqs_event(reindex_message_body(BUCKET, key))
    assert indexer.invoke(again) == NO_FAILURES
    assert indexer.hits("long kept runbook") == ["old.md"]
    (problem,) = indexer.store.status(RUNBOOKS).problems
    assert "DEEP_ARCHIVE" in problem.reason


def test_an_archived_metadata_sidecar_is_a_problem_not_a_retry(indexer):
    """A lifecycle rule may archive a document's sidecar too: its metadata cannot be read
    until it is restored, so the document is a problem (what is indexed stays), not a
    record retried into the dead-letter queue, nor indexed without its metadata."""
    key = "ops-bot/runbooks/tagged.md"
    indexer.put(key, "# Tagged\n\nsidecar described runbook words")
    sidecar = {"metadataAttributes": {"team": "platform"}}
    indexer.s3.put_object(
        Bucket=BUCKET,
        Key=key + ".metadata.json",
        Body=json.dumps(sidecar).encode(),
        StorageClass="GLACIER",
    )
    put = sqs_event(s3_notification("ObjectCreated:Put", key, "0065F2A1B3C4D5E6F7"))
    assert indexer.invoke(put) == NO_FAILURES
    assert indexer.hits("sidecar described runbook") == []
    (problem,) = indexer.store.status(RUNBOOKS).problems
    assert problem.path == "tagged.md"
    assert "sidecar" in problem.reason
    assert "GLACIER" in problem.reason


def test_the_synonyms_file_event_stores_the_scopes_synonyms_and_a_bad_one_is_a_problem(
    indexer, capsys
):
    """``_synonyms.txt`` is config (ranking.synonym_expansion): its events store the scope's set,
    never a document; a bad file is a status problem, not retried, the last set kept.
    (``min_score`` 0: a hit through a synonym alone covers part of the query, whatever
    the default floor; what the synonyms find is the subject.)"""
    key = "ops-bot/runbooks/_synonyms.txt"
    indexer.put("ops-bot/runbooks/kube.md", "# Cluster\n\nThe kubernetes upgrade notes.")
    indexer.invoke(
        sqs_event(s3_notification("ObjectCreated:Put", "ops-bot/runbooks/kube.md", "01"))
    )
    assert indexer.hits("k8s") == []
    indexer.put(key, "k8s, kubernetes\n")
    created = sqs_event(
        s3_notification("ObjectCreated:Put", "ops-bot/runbooks/_synonyms.txt", "02")
    )
    assert indexer.invoke(created) == NO_FAILURES
    assert indexer.hits("k8s") == ["kube.md"]
    assert indexer.paths() == ["kube.md"]  # not a document
    indexer.put(key, "k8s => kubernetes => containers\n")
    assert indexer.invoke(created) == NO_FAILURES  # not retried: the file is wrong
    problems = {p.path: p.reason for p in indexer.store.status(RUNBOOKS).problems}
    assert "'=>' more than once" in problems["_synonyms.txt"]
    assert indexer.hits("k8s") == ["kube.md"]  # the last good set stays
    indexer.remove(key)
    removed = sqs_event(
        s3_notification("ObjectRemoved:Delete", "ops-bot/runbooks/_synonyms.txt", "03")
    )
    assert indexer.invoke(removed) == NO_FAILURES
    assert indexer.hits("k8s") == []
    assert "_synonyms.txt" not in {p.path for p in indexer.store.status(RUNBOOKS).problems}
    applied = [r for r in log_records(capsys.readouterr().out) if r.get("path") == "_synonyms.txt"]
    assert [r["status"] for r in applied] == ["indexed", "skipped", "deleted"]


@pytest.mark.parametrize("bad", ["encrypted", "bomb", "corrupt"])
def test_a_new_object_version_that_cannot_be_indexed_keeps_the_old_one_searchable(indexer, bad):
    """A failed write never removes what was searchable before: the new version is a
    problem (not a retry) naming its sequencer, the old version stays searchable and
    ``stale``; a delete of the object still removes the document."""
    import document_files as files

    key = "ops-bot/runbooks/handbook.docx" if bad != "encrypted" else "ops-bot/runbooks/h.pdf"
    path = key.rsplit("/", 1)[1]
    good = (
        files.pdf(["To roll back, run the quokka job."])
        if bad == "encrypted"
        else files.docx([("p", "To roll back, run the quokka job.")])
    )
    broken = {
        "encrypted": lambda: files.pdf(["secret"], password="pw"),
        "bomb": lambda: files.zip_bomb("word/document.xml", 260),
        "corrupt": lambda: b"PK\x03\x04 damaged",
    }[bad]()
    indexer.s3.put_object(Bucket=BUCKET, Key=key, Body=good)
    assert indexer.invoke(sqs_event(s3_notification("ObjectCreated:Put", key, "0A"))) == (
        NO_FAILURES
    )
    indexer.s3.put_object(Bucket=BUCKET, Key=key, Body=broken)
    assert indexer.invoke(sqs_event(s3_notification("ObjectCreated:Put", key, "0B"))) == (
        NO_FAILURES
    )
    assert indexer.hits("quokka") == [path]
    (problem,) = indexer.store.status(RUNBOOKS).problems
    assert "version 0B is not indexed" in problem.reason
    assert "the previously indexed version is still searched (version 0A)" in problem.reason
    record = indexer.store.get_document(RUNBOOKS, path)
    assert record is not None
    assert record.to_dict()["stale"] is True
    assert record.version == "0A"

    indexer.s3.delete_object(Bucket=BUCKET, Key=key)
    removed = sqs_event(s3_notification("ObjectRemoved:DeleteMarkerCreated", key, "0C"))
    assert indexer.invoke(removed) == NO_FAILURES
    assert indexer.hits("quokka") == []
    assert indexer.store.get_document(RUNBOOKS, path) is None
