"""knowledge.ingest.sources.s3.S3DocumentSource against moto's S3 (no network)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import BotoCoreError, ClientError
from lambda_support import silent_endpoint, use_fake_aws
from moto import mock_aws

from knowledge.core.errors import (
    ArchivedObjectError,
    ConfigurationError,
    KnowledgeError,
    NotFoundError,
)
from knowledge.core.model import IndexOptions
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import DocumentSource
from knowledge.ingest.sources import Listing
from knowledge.ingest.sources.s3 import S3DocumentSource

BUCKET = "kb-test-documents"
SCOPE = KnowledgeScope("ops-bot", "runbooks")


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        yield client


def put(s3: Any, key: str, data: bytes | str) -> None:
    s3.put_object(Bucket=BUCKET, Key=key, Body=data.encode() if isinstance(data, str) else data)


def sidecar(attributes: dict[str, Any]) -> str:
    return json.dumps({"metadataAttributes": attributes})


def test_is_a_document_source_and_lists_nothing_for_an_empty_scope(s3):
    source = S3DocumentSource(BUCKET, client=s3)
    assert isinstance(source, DocumentSource)
    assert list(source.documents(SCOPE, IndexOptions())) == []


def test_construction_needs_a_bucket_and_does_no_io():
    with pytest.raises(ConfigurationError, match="DOCUMENTS_BUCKET"):
        S3DocumentSource(" ")
    # No client, no credentials, no mock: building it must not touch AWS.
    assert S3DocumentSource("any-bucket").bucket == "any-bucket"


def test_documents_are_listed_sorted_with_patterns_and_lazy_reads(s3):
    put(s3, "ops-bot/runbooks/z-last.md", "# Z\nlast")
    put(s3, "ops-bot/runbooks/a-first.md", "# A\nfirst")
    put(s3, "ops-bot/runbooks/deep/nested/guide.txt", "nested text")
    put(s3, "ops-bot/runbooks/image.png", b"\x89PNG\r\n")
    put(s3, "ops-bot/runbooks-old/other.md", "a sibling prefix, not this scope")
    put(s3, "ops-bot/manuals/manual.md", "another context")
    put(s3, "other-bot/runbooks/x.md", "another agent")
    calls: list[str] = []
    original_get = s3.get_object

    def counting_get(**kwargs: Any) -> Any:
        calls.append(kwargs["Key"])
        return original_get(**kwargs)

    s3.get_object = counting_get
    source = S3DocumentSource(BUCKET, client=s3)
    documents = list(source.documents(SCOPE, IndexOptions()))
    assert [d.path for d in documents] == ["a-first.md", "deep/nested/guide.txt", "z-last.md"]
    assert [d.source_key for d in documents] == [
        "ops-bot/runbooks/a-first.md",
        "ops-bot/runbooks/deep/nested/guide.txt",
        "ops-bot/runbooks/z-last.md",
    ]
    assert calls == [], "listing must not download documents"
    assert documents[0].read() == b"# A\nfirst"
    assert documents[0].size == len(b"# A\nfirst")
    assert documents[0].version is None
    assert calls == ["ops-bot/runbooks/a-first.md"]


def test_non_recursive_listing_takes_only_the_top_folder(s3):
    put(s3, "ops-bot/runbooks/top.md", "top")
    put(s3, "ops-bot/runbooks/sub/inner.md", "inner")
    source = S3DocumentSource(BUCKET, client=s3)
    options = IndexOptions(recursive=False)
    assert [d.path for d in source.documents(SCOPE, options)] == ["top.md"]


def test_listing_is_paginated(s3):
    for i in range(7):
        put(s3, f"ops-bot/runbooks/doc-{i}.md", f"doc {i}")
    pages: list[int] = []
    paginator = s3.get_paginator("list_objects_v2")

    class SmallPages:
        def paginate(self, **kwargs: Any) -> Any:
            for page in paginator.paginate(**kwargs, PaginationConfig={"PageSize": 3}):
                pages.append(len(page.get("Contents", ())))
                yield page

    s3.get_paginator = lambda name: SmallPages()
    source = S3DocumentSource(BUCKET, client=s3)
    assert len(list(source.documents(SCOPE, IndexOptions()))) == 7
    assert pages == [3, 3, 1]


def test_hidden_files_placeholders_and_bad_keys_are_left_out(s3):
    put(s3, "ops-bot/runbooks/ok.md", "ok")
    put(s3, "ops-bot/runbooks/.DS_Store", "x")
    put(s3, "ops-bot/runbooks/.git/notes.md", "x")
    put(s3, "ops-bot/runbooks/drafts/", "")
    put(s3, "ops-bot/runbooks/odd//double-slash.md", "x")
    source = S3DocumentSource(BUCKET, client=s3)
    listing = source.documents(SCOPE, IndexOptions())
    assert isinstance(listing, Listing)
    assert [d.path for d in listing] == ["ok.md"]
    assert [p.path for p in listing.skipped] == ["ops-bot/runbooks/odd//double-slash.md"]


def test_sidecar_metadata_in_bedrock_form_is_attached_and_not_a_document(s3):
    put(s3, "ops-bot/runbooks/deploy.md", "# Deploy")
    put(
        s3,
        "ops-bot/runbooks/deploy.md.metadata.json",
        sidecar(
            {
                "team": "platform",
                "year": 2024,
                "tags": {"value": {"type": "STRING_LIST", "stringListValue": ["k8s", "ops"]}},
            }
        ),
    )
    source = S3DocumentSource(BUCKET, client=s3)
    (document,) = list(source.documents(SCOPE, IndexOptions()))
    assert document.path == "deploy.md"
    assert dict(document.metadata) == {"team": "platform", "year": "2024", "tags": ["k8s", "ops"]}


def test_invalid_sidecar_is_an_error_and_the_document_is_kept(s3):
    put(s3, "ops-bot/runbooks/deploy.md", "# Deploy")
    put(s3, "ops-bot/runbooks/deploy.md.metadata.json", "{not json")
    listing = S3DocumentSource(BUCKET, client=s3).documents(SCOPE, IndexOptions())
    (document,) = list(listing)
    assert dict(document.metadata) == {}
    assert [p.path for p in listing.errors] == ["deploy.md"]
    assert "sidecar" in listing.errors[0].reason


def test_get_document_reads_the_current_object_and_its_sidecar(s3):
    put(s3, "ops-bot/runbooks/장애 대응/배포 실패.md", "# 배포 실패\n롤백 절차")
    put(s3, "ops-bot/runbooks/장애 대응/배포 실패.md.metadata.json", sidecar({"lang": "ko"}))
    source = S3DocumentSource(BUCKET, client=s3)
    document = source.get_document(SCOPE, "장애 대응/배포 실패.md", version="00AB")
    assert document is not None
    assert document.version == "00AB"
    assert document.source_key == "ops-bot/runbooks/장애 대응/배포 실패.md"
    assert dict(document.metadata) == {"lang": "ko"}
    assert document.read().decode() == "# 배포 실패\n롤백 절차"


def test_get_document_with_an_invalid_sidecar_returns_it_without_metadata(s3, caplog):
    put(s3, "ops-bot/runbooks/deploy.md", "# Deploy")
    put(s3, "ops-bot/runbooks/deploy.md.metadata.json", json.dumps({"wrong": 1}))
    document = S3DocumentSource(BUCKET, client=s3).get_document(SCOPE, "deploy.md")
    assert document is not None
    assert dict(document.metadata) == {}
    assert "invalid metadata sidecar" in caplog.text


def test_get_document_of_a_missing_or_deleted_object_is_none(s3):
    source = S3DocumentSource(BUCKET, client=s3)
    assert source.get_document(SCOPE, "never-there.md") is None
    put(s3, "ops-bot/runbooks/gone.md", "soon gone")
    assert source.exists(SCOPE, "gone.md")
    s3.delete_object(Bucket=BUCKET, Key="ops-bot/runbooks/gone.md")  # a delete marker
    assert source.get_document(SCOPE, "gone.md") is None
    assert not source.exists(SCOPE, "gone.md")


def test_read_after_the_object_is_deleted_is_not_found(s3):
    put(s3, "ops-bot/runbooks/race.md", "x")
    source = S3DocumentSource(BUCKET, client=s3)
    document = source.get_document(SCOPE, "race.md")
    assert document is not None
    s3.delete_object(Bucket=BUCKET, Key="ops-bot/runbooks/race.md")
    with pytest.raises(NotFoundError, match="no longer exists"):
        document.read()


@pytest.mark.parametrize("how", ["event", "listing"])
def test_an_object_replaced_after_its_size_was_checked_is_not_read_whole(s3, how):
    # The indexer checks a document's size (max_document_bytes) before reading it. An
    # object replaced by a bigger one in between must not be read whole (memory): the
    # read takes only the version that was checked, and fails if it is gone.
    put(s3, "ops-bot/runbooks/report.csv", "a,b\n1,2\n")
    source = S3DocumentSource(BUCKET, client=s3)
    if how == "event":
        document = source.get_document(SCOPE, "report.csv")
    else:
        (document,) = source.documents(SCOPE, IndexOptions(file_patterns=("*.csv",)))
    assert document is not None
    assert document.size == 8
    put(s3, "ops-bot/runbooks/report.csv", "a,b\n" + "1,2\n" * 100_000)
    with pytest.raises(KnowledgeError, match="changed after it was listed") as raised:
        document.read()
    assert not isinstance(raised.value, NotFoundError)  # not a delete: nothing is removed
    assert BUCKET not in str(raised.value)


def test_object_keys_lists_documents_but_not_sidecars_or_hidden_files(s3):
    put(s3, "ops-bot/runbooks/b.md", "b")
    put(s3, "ops-bot/runbooks/a.txt", "a")
    put(s3, "ops-bot/runbooks/image.png", b"\x89PNG")
    put(s3, "ops-bot/runbooks/b.md.metadata.json", sidecar({"k": "v"}))
    put(s3, "ops-bot/runbooks/.hidden.md", "h")
    keys = [item.key for item in S3DocumentSource(BUCKET, client=s3).object_keys(SCOPE)]
    assert sorted(keys) == [
        "ops-bot/runbooks/a.txt",
        "ops-bot/runbooks/b.md",
        "ops-bot/runbooks/image.png",
    ]


def _client_error(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, operation)


class DenyingS3:
    """An S3 client whose calls are refused, as without the bucket permissions."""

    def __init__(self, code: str) -> None:
        self.code = code

    def head_object(self, **kwargs: Any) -> Any:
        raise _client_error(self.code, "HeadObject")

    def get_object(self, **kwargs: Any) -> Any:
        raise _client_error(self.code, "GetObject")

    def get_paginator(self, name: str) -> Any:
        code = self.code

        class Paginator:
            def paginate(self, **kwargs: Any) -> Any:
                raise _client_error(code, "ListObjectsV2")
                yield  # pragma: no cover - makes this a generator

        return Paginator()


@pytest.mark.parametrize("code", ["403", "AccessDenied", "NoSuchBucket"])
def test_access_problems_are_configuration_errors_naming_the_permission(code):
    source = S3DocumentSource(BUCKET, client=DenyingS3(code))
    with pytest.raises(ConfigurationError, match="s3:ListBucket"):
        source.get_document(SCOPE, "x.md")
    with pytest.raises(ConfigurationError, match="s3:ListBucket"):
        list(source.documents(SCOPE, IndexOptions()))


def test_other_s3_errors_propagate_for_the_caller_to_retry():
    source = S3DocumentSource(BUCKET, client=DenyingS3("SlowDown"))
    with pytest.raises(ClientError):
        source.get_document(SCOPE, "x.md")


def test_a_hung_s3_endpoint_fails_the_call_inside_the_indexers_reserve(monkeypatch):
    # botocore's defaults (60 s to connect and per read, five attempts) would hold one
    # head for up to five minutes: the whole invocation. The source's own client must
    # give up well inside TIME_RESERVE_SECONDS (30 s), so the record fails and the batch
    # answers in time (120 s: room for a loaded machine, far below botocore's defaults).
    use_fake_aws(monkeypatch)
    with silent_endpoint() as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", url)
        source = S3DocumentSource("kb-bucket")
        started = time.monotonic()
        with pytest.raises(BotoCoreError):
            source.get_document(KnowledgeScope("ops-bot", "runbooks"), "deploy.md")
        elapsed = time.monotonic() - started
    assert elapsed < 120.0


def test_archived_objects_and_sidecars_list_and_read_as_archived(s3):
    """A listing goes on past archived objects and sidecars; reading such a document says
    it is archived (``ArchivedObjectError``: not retried, the indexer skips it)."""
    s3.put_object(Bucket=BUCKET, Key="ops-bot/runbooks/a.md", Body=b"# A", StorageClass="GLACIER")
    put(s3, "ops-bot/runbooks/b.md", "# B")
    s3.put_object(
        Bucket=BUCKET,
        Key="ops-bot/runbooks/b.md.metadata.json",
        Body=sidecar({"team": "ops"}).encode(),
        StorageClass="DEEP_ARCHIVE",
    )
    put(s3, "ops-bot/runbooks/c.md", "# C")
    source = S3DocumentSource(BUCKET, client=s3)
    listed = list(source.documents(SCOPE, IndexOptions()))
    assert [d.path for d in listed] == ["a.md", "b.md", "c.md"]
    assert listed[2].read() == b"# C"
    for document, storage in zip(listed[:2], ("GLACIER", "DEEP_ARCHIVE"), strict=True):
        with pytest.raises(ArchivedObjectError, match=storage):
            document.read()
    looked_up = source.get_document(SCOPE, "b.md")
    assert looked_up is not None
    with pytest.raises(ArchivedObjectError, match="sidecar"):
        looked_up.read()


def test_the_synonyms_file_is_read_with_the_listing_and_is_not_a_document(s3):
    from knowledge.ingest.sources import SynonymsFile
    from knowledge.ranking.synonym_expansion import MAX_SYNONYMS_BYTES

    source = S3DocumentSource(BUCKET, client=s3)
    put(s3, "ops-bot/runbooks/doc.md", "# Doc\n\nk8s")
    put(s3, "ops-bot/runbooks/notes/_synonyms.txt", "only at the root is it the file")
    listing = source.documents(SCOPE, IndexOptions())
    assert [d.path for d in listing] == ["doc.md", "notes/_synonyms.txt"]
    assert listing.synonyms == SynonymsFile()  # the scope has none
    put(s3, "ops-bot/runbooks/_synonyms.txt", "k8s, kubernetes\n")
    listing = source.documents(SCOPE, IndexOptions())
    assert [d.path for d in listing] == ["doc.md", "notes/_synonyms.txt"]
    assert listing.synonyms == SynonymsFile(b"k8s, kubernetes\n")
    assert source.synonyms_file(SCOPE) == SynonymsFile(b"k8s, kubernetes\n")
    put(s3, "ops-bot/runbooks/_synonyms.txt", b"a, b\n" * (MAX_SYNONYMS_BYTES // 5 + 1))
    found = source.synonyms_file(SCOPE)  # too big: not read, the bound named
    assert found.data is None
    assert found.error is not None
    assert f"at most {MAX_SYNONYMS_BYTES}" in found.error
    s3.delete_object(Bucket=BUCKET, Key="ops-bot/runbooks/_synonyms.txt")
    assert source.synonyms_file(SCOPE) == SynonymsFile()


def test_an_uploaded_object_ignores_a_sidecar_no_newer_than_it(s3):
    """A presigned upload's object carries ``x-amz-meta-kb-upload: 1``: a sidecar written
    before it (an earlier note's) is not its metadata; one written after it is, and an
    object without the marker (a PUT note, a file dropped in) keeps its sidecar."""
    source = S3DocumentSource(BUCKET, client=s3)
    key = "ops-bot/runbooks/guide.md"
    put(s3, key + ".metadata.json", sidecar({"origin": "manual", "team": "sre"}))
    put(s3, key, "# Guide\n\nwritten as a note")
    noted = source.get_document(SCOPE, "guide.md")
    assert noted is not None
    assert noted.metadata == {"origin": "manual", "team": "sre"}

    s3.put_object(Bucket=BUCKET, Key=key, Body=b"# Guide\n\nuploaded", Metadata={"kb-upload": "1"})
    uploaded = source.get_document(SCOPE, "guide.md")
    assert uploaded is not None
    assert uploaded.metadata == {}
    assert uploaded.read() == b"# Guide\n\nuploaded"

    time.sleep(1.1)  # S3's Last-Modified counts whole seconds
    put(s3, key + ".metadata.json", sidecar({"team": "docs"}))
    later = source.get_document(SCOPE, "guide.md")
    assert later is not None
    assert later.metadata == {"team": "docs"}

    s3.put_object(Bucket=BUCKET, Key=key, Body=b"# Guide\n\nother", Metadata={"kb-upload": "0"})
    unmarked = source.get_document(SCOPE, "guide.md")
    assert unmarked is not None
    assert unmarked.metadata == {"team": "docs"}
