"""Origin, format and url on every store: on hits, in filters, in the documents listing;
and the files no pattern selects, counted per extension in the status.

Files go through the whole pipeline from a bucket folder, sidecars and all
(``knowledge.core.origin``, ``knowledge.ingest.sources.parse_metadata_sidecar``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source, reindex_source
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.stores.protocol import KnowledgeStore

SCOPE = KnowledgeScope("docs-bot", "team")
URL = "https://git.example.com/team/docs/blob/abc123/guides/deploy.md"


def put(bucket: Path, rel: str, data: bytes, attributes: dict[str, object] | None = None) -> None:
    path = bucket / SCOPE.agent / SCOPE.context / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if attributes is not None:
        sidecar = path.with_name(path.name + ".metadata.json")
        sidecar.write_text(json.dumps({"metadataAttributes": attributes}))


def origins_bucket(bucket: Path) -> None:
    put(bucket, "upload.md", b"# Upload\n\nThe quokka rota is on the wiki.")
    put(
        bucket,
        "guides/deploy.md",
        b"# Deploy\n\nThe quokka deploy runs at noon.",
        {"origin": "repo", "url": URL},
    )
    put(bucket, "note.txt", b"A manual note: quokka drills on Friday.", {"origin": "manual"})


def search(store: KnowledgeStore, mode: SearchMode, **fields: object) -> dict[str, object]:
    results = store.search(SCOPE, SearchQuery("quokka", mode=mode, max_results=20, **fields))
    return {r.document_path: r for r in results if "quokka" in r.content}


def test_hits_carry_origin_format_and_url(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    origins_bucket(bucket)
    result = index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert (result.errors, result.indexed_documents) == ((), 3)
    hits = search(store, mode)
    shown = {
        path: (hit.origin, hit.format, hit.url)  # type: ignore[attr-defined]
        for path, hit in hits.items()
    }
    assert shown == {
        "upload.md": ("upload", "markdown", None),
        "guides/deploy.md": ("repo", "markdown", URL),
        "note.txt": ("manual", "text", None),
    }
    as_json = hits["guides/deploy.md"].to_dict()  # type: ignore[attr-defined]
    assert (as_json["origin"], as_json["format"], as_json["url"]) == ("repo", "markdown", URL)
    assert as_json["metadata"]["origin"] == "repo"
    assert "source_type" not in as_json["metadata"]


def test_origin_and_format_filter_in_every_store(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    origins_bucket(bucket)
    index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert set(search(store, mode, metadata={"origin": "repo"})) == {"guides/deploy.md"}
    assert set(search(store, mode, metadata={"format": "text"})) == {"note.txt"}
    by_filter = search(
        store, mode, filter={"field": "origin", "op": "in", "value": ["upload", "manual"]}
    )
    assert set(by_filter) == {"upload.md", "note.txt"}
    not_upload = search(store, mode, filter={"field": "origin", "op": "ne", "value": "upload"})
    assert set(not_upload) == {"guides/deploy.md", "note.txt"}
    assert search(store, mode, metadata={"origin": "shared"}) == {}


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"metadata": {"origin": "uploads"}}, "metadata.origin"),
        ({"filter": {"field": "origin", "op": "eq", "value": "vault"}}, "filter.value"),
        ({"filter": {"field": "origin", "op": "in", "value": ["repo", "git"]}}, "filter.value"),
        # source_type is the design's name for the origin: a format there is refused too.
        ({"metadata": {"source_type": "pdf"}}, "metadata.source_type"),
        ({"filter": {"field": "source_type", "op": "eq", "value": "pdf"}}, "filter.value"),
    ],
)
def test_a_filter_that_would_silently_match_nothing_is_refused(
    fields: dict[str, object], where: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        SearchQuery("quokka", **fields)  # type: ignore[arg-type]
    assert caught.value.field.startswith(where)
    assert "origin" in str(caught.value)


def test_documents_listing_shows_origin_and_format(store: KnowledgeStore, bucket: Path) -> None:
    origins_bucket(bucket)
    index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    listed = {d.path: (d.origin, d.format) for d in store.list_documents(SCOPE).documents}
    assert listed == {
        "upload.md": ("upload", "markdown"),
        "guides/deploy.md": ("repo", "markdown"),
        "note.txt": ("manual", "text"),
    }
    one = store.get_document(SCOPE, "guides/deploy.md")
    assert one is not None
    assert (one.to_dict()["origin"], one.to_dict()["format"]) == ("repo", "markdown")


def test_a_sidecar_cannot_claim_the_shared_library(store: KnowledgeStore, bucket: Path) -> None:
    put(bucket, "claim.md", b"# Claim\n\nquokka", {"origin": "shared", "team": "x"})
    put(bucket, "bad-url.md", b"# Link\n\nquokka", {"url": "javascript:alert(1)"})
    result = index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    # Indexed without the sidecar, and the sidecar's problem is listed (never silent).
    assert result.indexed_documents == 2
    reasons = {p.path: p.reason for p in result.errors}
    assert "metadataAttributes.origin" in reasons["claim.md.metadata.json"]
    assert "upload, repo, manual" in reasons["claim.md.metadata.json"]
    assert "metadataAttributes.url" in reasons["bad-url.md.metadata.json"]
    hits = search(store, SearchMode.KEYWORD)
    assert {p: h.origin for p, h in hits.items()} == {  # type: ignore[attr-defined]
        "claim.md": "upload",
        "bad-url.md": "upload",
    }
    assert hits["bad-url.md"].url is None  # type: ignore[attr-defined]
    problems = {p.path for p in store.status(SCOPE).problems}
    assert {"claim.md.metadata.json", "bad-url.md.metadata.json"} <= problems


def test_unread_files_are_counted_by_extension_in_the_status(
    store: KnowledgeStore, bucket: Path
) -> None:
    put(bucket, "guide.md", b"# Guide\n\nquokka")
    put(bucket, "docs/intro.rst", b"Intro\n=====\n\nThe quokka intro.")
    put(bucket, "pyproject.toml", b'[project]\nname = "quokka"\n')
    put(bucket, "manual.adoc", b"= Manual\n\nquokka manual")
    for i in range(30):
        put(bucket, f"img/shot{i}.PNG", b"\x89PNG\r\n\x1a\n")
    put(bucket, "bin/tool.exe", b"MZ\x00\x00")
    put(bucket, "bin/run", b"#!/bin/sh\n")
    result = index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert result.errors == ()
    assert result.indexed_documents == 4  # .rst, .toml and .adoc are read as text
    expected = {".png": 30, ".exe": 1, "(none)": 1}
    assert dict(result.unread_files) == expected
    status = store.status(SCOPE)
    assert dict(status.unread_files) == expected
    assert status.to_dict()["unread_files"] == {"(none)": 1, ".exe": 1, ".png": 30}
    assert status.problems == ()  # a count, not 32 problems
    formats = {r.document_path: r.format for r in store.search(SCOPE, SearchQuery("quokka"))}
    assert formats["docs/intro.rst"] == "rst"
    assert formats["manual.adoc"] == "asciidoc"
    assert formats["pyproject.toml"] == "text"
    # The count follows the folder: a later run that finds fewer replaces it.
    for i in range(30):
        (bucket / SCOPE.agent / SCOPE.context / f"img/shot{i}.PNG").unlink()
    index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert dict(store.status(SCOPE).unread_files) == {".exe": 1, "(none)": 1}
    reindex_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert dict(store.status(SCOPE).unread_files) == {".exe": 1, "(none)": 1}
    other = KnowledgeScope("docs-bot", "other")
    assert dict(store.status(other).unread_files) == {}
