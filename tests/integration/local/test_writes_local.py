"""Document writes on ``kb serve --allow-writes`` through the real ``KnowledgeClient`` and
``kb put``/``kb rm``: put -> searchable -> overwrite -> delete, notes, the refusals, and
hostile paths that must never write outside the scope's folder."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

import pytest
from polling import wait_until

from knowledge.client import AccessDeniedError, KnowledgeClient
from knowledge.config import open_store
from knowledge.core.errors import NotFoundError, ValidationError
from knowledge.core.model import SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.local.cli import main
from knowledge.local.server import LocalServer

pytestmark = pytest.mark.integration

SCOPE = KnowledgeScope("ops-bot", "runbooks")


def serve(root: Path, db: Path, *, allow_writes: bool) -> Iterator[LocalServer]:
    with closing(open_store(db_path=db, embedder_name="hashing", environ={}, create=True)) as store:
        local = LocalServer(
            root, store, host="127.0.0.1", port=0, poll_interval=0.1, allow_writes=allow_writes
        )
        local.start()
        try:
            yield local
        finally:
            local.stop()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    bucket = tmp_path / "bucket"
    (bucket / "ops-bot" / "runbooks").mkdir(parents=True)
    (bucket / "ops-bot" / "runbooks" / "rollback.md").write_text("# Rollback\n\nhelm\n", "utf-8")
    (bucket / "_shared" / "playbooks").mkdir(parents=True)
    return bucket


@pytest.fixture
def server(root: Path, tmp_path: Path) -> Iterator[LocalServer]:
    yield from serve(root, tmp_path / "k.db", allow_writes=True)


def paths_for(client: KnowledgeClient, text: str) -> list[str]:
    hits = client.search(SCOPE, SearchQuery(text, mode=SearchMode.KEYWORD))
    return [h.document_path for h in hits]


def indexed_with(client: KnowledgeClient, path: str, content_hash: str) -> bool:
    found = client.get_document(SCOPE, path)
    return found is not None and found.indexed and found.content_hash == content_hash


def test_put_searchable_overwrite_delete(server: LocalServer, root: Path) -> None:
    client = KnowledgeClient(server.url, retries=0)
    first = client.put_document(
        SCOPE,
        "guides/canary.md",
        b"# Canary\n\nzebracanary rollout\n",
        content_type="text/markdown",
    )
    assert (first["path"], first["origin"]) == ("guides/canary.md", "upload")
    assert first["document"] == "/v1/agents/ops-bot/contexts/runbooks/documents/guides%2Fcanary.md"
    wait_until(lambda: indexed_with(client, "guides/canary.md", first["content_hash"]), "indexed")
    assert paths_for(client, "zebracanary") == ["guides/canary.md"]
    sidecar = root / "ops-bot" / "runbooks" / "guides" / "canary.md.metadata.json"
    assert json.loads(sidecar.read_text("utf-8")) == {"metadataAttributes": {"origin": "upload"}}

    second = client.put_document(SCOPE, "guides/canary.md", b"# Canary\n\nquokkarollout\n")
    assert second["content_hash"] != first["content_hash"]
    # The old version is searchable until the new one is indexed, then only the new one.
    wait_until(lambda: indexed_with(client, "guides/canary.md", second["content_hash"]), "new")
    assert paths_for(client, "quokkarollout") == ["guides/canary.md"]
    assert paths_for(client, "zebracanary") == []

    deleted = client.delete_document(SCOPE, "guides/canary.md")
    assert deleted["deleted"] is True
    wait_until(lambda: client.get_document(SCOPE, "guides/canary.md") is None, "removed")
    assert paths_for(client, "quokkarollout") == []
    with pytest.raises(NotFoundError):
        client.delete_document(SCOPE, "guides/canary.md")


def test_a_note_carries_origin_manual_and_metadata(server: LocalServer, root: Path) -> None:
    client = KnowledgeClient(server.url, retries=0)
    answer = client.put_document(
        SCOPE,
        "notes/oncall.md",
        "# On-call\n\nwombatpager 규칙\n".encode(),
        content_type="text/markdown; charset=utf-8",
        origin="manual",
        metadata={"team": "sre", "url": "https://wiki.example.com/oncall"},
    )
    assert answer["origin"] == "manual"
    sidecar = json.loads(
        (root / "ops-bot/runbooks/notes/oncall.md.metadata.json").read_text("utf-8")
    )
    assert sidecar == {
        "metadataAttributes": {
            "team": "sre",
            "url": "https://wiki.example.com/oncall",
            "origin": "manual",
        }
    }
    wait_until(lambda: indexed_with(client, "notes/oncall.md", answer["content_hash"]), "note")
    hit = client.search(SCOPE, SearchQuery("wombatpager", mode=SearchMode.KEYWORD))[0]
    assert (hit.origin, hit.url, hit.metadata["team"]) == (
        "manual",
        "https://wiki.example.com/oncall",
        "sre",
    )
    # Rewritten as a plain upload: the sidecar says so, the note's metadata is gone.
    plain = client.put_document(SCOPE, "notes/oncall.md", b"# On-call\n\nwombatpager\n")
    rewritten = (root / "ops-bot/runbooks/notes/oncall.md.metadata.json").read_text("utf-8")
    assert json.loads(rewritten) == {"metadataAttributes": {"origin": "upload"}}
    wait_until(lambda: indexed_with(client, "notes/oncall.md", plain["content_hash"]), "plain")
    assert client.get_document(SCOPE, "notes/oncall.md").origin == "upload"  # type: ignore[union-attr]


HOSTILE = [
    "../escape.md",
    "a/../../escape.md",
    "..%2Fescape.md",
    "%2E%2E/escape.md",
    "/etc/escape.md",
    "guides//x.md",
    "guides/./x.md",
    "x.md.metadata.json",
    # A folder named like a sidecar: x.md's sidecar could never be written after it.
    "x.md.metadata.json/inner.md",
    "guides/X.MD.Metadata.Json/deeper/inner.md",
    ".hidden.md",
    "guides/.git/config.md",
    "_repos/github/x.md",
    "_kb/x.md",
    # The same names on a case-insensitive file system (macOS, Windows): x.md's sidecar,
    # the Git mirror folder.
    "x.md.METADATA.JSON",
    "_REPOS/github/x.md",
    "_Kb/x.md",
    # Names a file system that drops trailing dots and spaces (Windows, SMB and exFAT
    # shares) stores as the reserved folder itself.
    "_repos /github/x.md",
    "_Kb./x.md",
    "_repos. ./x.md",
    "x.md.metadata.json./inner.md",
    "a\\..\\..\\escape.md",
    "program.exe",
    "nul\x00.md",
    # C1 controls: U+0085 is a line break to str.splitlines(), U+009B a terminal escape.
    "nel\x85.md",
    "guides/csi\x9b31m.md",
    "x" * 1100 + ".md",
]


@pytest.mark.parametrize("path", HOSTILE)
def test_hostile_paths_are_refused_and_write_nothing(
    server: LocalServer, root: Path, path: str
) -> None:
    client = KnowledgeClient(server.url, retries=0)
    before = sorted(p for p in root.parent.rglob("*") if ".db" not in p.name)
    with pytest.raises(ValidationError) as refused:
        client.put_document(SCOPE, path, b"# x\n")
    assert refused.value.field == "path", refused.value
    after = sorted(p for p in root.parent.rglob("*") if ".db" not in p.name)
    assert after == before


def test_a_link_inside_the_scope_is_not_followed(server: LocalServer, root: Path) -> None:
    outside = root.parent / "outside"
    outside.mkdir()
    (root / "ops-bot" / "runbooks" / "link").symlink_to(outside, target_is_directory=True)
    client = KnowledgeClient(server.url, retries=0)
    with pytest.raises(ValidationError):
        client.put_document(SCOPE, "link/x.md", b"# x\n")
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    ("path", "data", "content_type", "origin", "field"),
    [
        ("scan.md", b"%PDF-1.7 not markdown", "text/markdown", None, "body"),
        ("guide.md", b"# x", "application/pdf", None, "content-type"),
        ("note.txt", b"# x", "text/markdown", "manual", "path"),
        ("note.md", b"# x", "application/pdf", "manual", "content-type"),
        ("note.md", b"\xff\xfe", "text/markdown", "manual", "body"),
        ("note.md", b"# x", "text/markdown", "shared", "origin"),
        ("note.md", b"# x", "text/markdown", "repo", "origin"),
        ("empty.md", b"", "text/markdown", None, "body"),
        # White space beyond ASCII: the indexer strips it as it strips a blank, so the
        # document would have no text (and an overwrite would take the old one out).
        ("blank.md", "\u3000\u00a0\n\u2003".encode(), "text/markdown", None, "body"),
        ("blank.txt", "\ufeff\u3000 \u2029".encode(), "text/plain", None, "body"),
        ("blank.html", "\u00a0\r\n".encode("utf-16"), "text/html", None, "body"),
        ("note.md", "\u3000\u3000\n".encode(), "text/markdown", "manual", "body"),
    ],
)
def test_bad_writes_name_the_field(
    server: LocalServer,
    path: str,
    data: bytes,
    content_type: str,
    origin: str | None,
    field: str,
) -> None:
    client = KnowledgeClient(server.url, retries=0)
    with pytest.raises(ValidationError) as refused:
        client.put_document(SCOPE, path, data, content_type=content_type, origin=origin)
    assert refused.value.field == field, refused.value


def test_limits_metadata_uploads_and_the_shared_library(server: LocalServer) -> None:
    client = KnowledgeClient(server.url, retries=0)
    with pytest.raises(ValidationError) as too_large:
        client.put_document(SCOPE, "big.md", b"a" * (4 * 1024 * 1024 + 1))
    assert too_large.value.field == "body"
    with pytest.raises(ValidationError) as bad_url:
        client.put_document(SCOPE, "a.md", b"# a", metadata={"url": "javascript:alert(1)"})
    assert bad_url.value.field == "metadataAttributes.url"
    with pytest.raises(ValidationError) as origin_in_metadata:
        client.put_document(SCOPE, "a.md", b"# a", metadata={"origin": "shared"})
    assert origin_in_metadata.value.field == "metadata.origin"
    with pytest.raises(ValidationError) as no_uploads:
        client.create_upload(SCOPE, "big.pdf")
    assert no_uploads.value.field == "uploads"
    for owner in ("_shared", "_SHARED", "_Shared"):  # macOS: one folder, whatever the case
        shared = KnowledgeScope(owner, "playbooks")
        with pytest.raises(AccessDeniedError):
            client.put_document(shared, "a.md", b"# a")
        with pytest.raises(AccessDeniedError):
            client.delete_document(shared, "a.md")


def test_an_owner_named_like_the_shared_library_with_a_trailing_dot_or_space_is_refused(
    server: LocalServer, root: Path
) -> None:
    # On a file system that drops trailing dots and spaces, '_shared.' is the library's
    # own folder: a write there would land in the operator's read-only library.
    client = KnowledgeClient(server.url, retries=0)
    before = _tree(root)
    for owner in ("_shared.", "_SHARED..", "_Shared."):
        with pytest.raises(ValidationError) as refused:
            client.put_document(KnowledgeScope(owner, "playbooks"), "a.md", b"# a\n")
        assert refused.value.field == "agent", refused.value
        assert "_shared" in refused.value.message
    assert _tree(root) == before


def test_writes_are_off_without_the_flag(root: Path, tmp_path: Path) -> None:
    for local in serve(root, tmp_path / "off.db", allow_writes=False):
        client = KnowledgeClient(local.url, retries=0)
        with pytest.raises(AccessDeniedError, match="writes are off"):
            client.put_document(SCOPE, "a.md", b"# a")
        with pytest.raises(AccessDeniedError):
            client.delete_document(SCOPE, "rollback.md")
        with pytest.raises(AccessDeniedError):
            client.create_upload(SCOPE, "a.pdf")
        # Without the flag a PUT body over the JSON limit is not even read.
        request = urllib.request.Request(
            local.url + "/v1/agents/ops-bot/contexts/runbooks/documents/a.md",
            data=b"a" * (65 * 1024),
            method="PUT",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        refused.value.close()
        assert refused.value.code == 400
    assert (root / "ops-bot" / "runbooks" / "rollback.md").exists()
    assert not (root / "ops-bot" / "runbooks" / "a.md").exists()


def test_kb_put_and_rm(
    server: LocalServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    note = tmp_path / "standup.md"
    note.write_text("# Standup\n\nplatypusagenda\n", "utf-8")
    scope = ["--agent", "ops-bot", "--context", "runbooks", "--api-url", server.url]
    assert main(["put", str(note), "--note", "--meta", "team=sre", "--json", *scope]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["path"], answer["origin"]) == ("standup.md", "manual")
    client = KnowledgeClient(server.url, retries=0)
    wait_until(lambda: indexed_with(client, "standup.md", answer["content_hash"]), "kb put")
    assert main(["rm", "standup.md", *scope]) == 0
    assert "deleted standup.md" in capsys.readouterr().out
    assert main(["rm", "standup.md", *scope]) == 1  # gone: a 404


@pytest.mark.parametrize(
    "raw",
    [
        "..%2Fescape.md",
        "%2E%2E%2Fescape.md",
        "a%2F..%2F..%2Fescape.md",
        "%252E%252E%252Fescape.md",
        "..%5Cescape.md",
        "x.md%00.md",
        "..",
    ],
)
def test_raw_hostile_segments_are_refused(server: LocalServer, root: Path, raw: str) -> None:
    before = sorted(root.parent.rglob("*"))
    request = urllib.request.Request(
        f"{server.url}/v1/agents/ops-bot/contexts/runbooks/documents/{raw}",
        data=b"# x\n",
        method="PUT",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    refused.value.close()
    assert refused.value.code in (400, 404), raw
    assert sorted(root.parent.rglob("*")) == before


def test_the_server_refuses_a_body_over_the_limit(server: LocalServer) -> None:
    # The API's own check (the client refuses before sending; the HTTP layer does not read
    # a body over the limit): a 413 naming the body, nothing written.
    answer = server.api.put_document("ops-bot", "runbooks", "big.md", b"a" * (4 * 1024 * 1024 + 1))
    assert (answer.status, answer.body["field"]) == (413, "body")
    assert not (server.root / "ops-bot" / "runbooks" / "big.md").exists()


def test_a_put_over_the_servers_document_limit_is_a_413_naming_it(
    root: Path, tmp_path: Path
) -> None:
    # A server whose indexer skips documents over 1,000 bytes: a larger PUT answered 202
    # with a content_hash that was never indexed.
    from knowledge.core.model import IndexOptions

    with closing(
        open_store(db_path=tmp_path / "k.db", embedder_name="hashing", environ={}, create=True)
    ) as s:
        local = LocalServer(
            root,
            s,
            host="127.0.0.1",
            port=0,
            poll_interval=0.1,
            allow_writes=True,
            options=IndexOptions(max_document_bytes=1000),
        )
        local.start()
        try:
            client = KnowledgeClient(local.url, retries=0)
            with pytest.raises(ValidationError) as refused:
                client.put_document(SCOPE, "big.md", b"# big\n" + b"a" * 1000)
            assert refused.value.field == "body", refused.value
            assert "1000" in refused.value.message
            url = f"{local.url}/v1/agents/ops-bot/contexts/runbooks/documents/big.md"
            raw = urllib.request.Request(url, data=b"a" * 1001, method="PUT")
            with pytest.raises(urllib.error.HTTPError) as answer:
                urllib.request.urlopen(raw, timeout=10)
            with answer.value:
                assert answer.value.code == 413
                assert json.loads(answer.value.read())["field"] == "body"
            assert not (root / "ops-bot" / "runbooks" / "big.md").exists()
            fits = client.put_document(SCOPE, "fits.md", b"# fits\n" + b"a" * 900)
            wait_until(lambda: indexed_with(client, "fits.md", fits["content_hash"]), "indexed")
        finally:
            local.stop()


# -- the red team's probe (round 11): each of these answered 202 or 500 before ---------------


def _tree(root: Path) -> list[Path]:
    return sorted(p for p in root.parent.rglob("*") if ".db" not in p.name)


@pytest.mark.parametrize(
    ("agent", "context", "field"),
    [(".kb", "notes", "agent"), (".git", "hooks", "agent"), ("ops-bot", ".hidden", "context")],
)
def test_a_hidden_agent_or_context_is_not_writable(
    server: LocalServer, root: Path, agent: str, context: str, field: str
) -> None:
    # A dot folder is never indexed: the write would be a 202 that never becomes
    # searchable, into a folder the product (or git) keeps for itself.
    client = KnowledgeClient(server.url, retries=0)
    before = _tree(root)
    with pytest.raises(ValidationError) as refused:
        client.put_document(KnowledgeScope(agent, context), "a.md", b"# a\n")
    assert refused.value.field == field, refused.value
    assert _tree(root) == before


def test_a_path_through_a_file_or_onto_a_folder_is_a_400_and_writes_nothing(
    server: LocalServer, root: Path
) -> None:
    folder = root / "ops-bot" / "runbooks"
    (folder / "README").mkdir()
    (folder / "README" / "keep.md").write_text("# keep\n", "utf-8")
    before = _tree(root)
    for path in ("rollback.md/inner.md", "rollback.md/a/inner.md", "README"):
        answer = server.api.put_document("ops-bot", "runbooks", quote(path, safe=""), b"# x\n")
        assert (answer.status, answer.body["field"]) == (400, "path"), (path, answer.body)
        assert "Traceback" not in str(answer.body)
        assert str(root) not in str(answer.body)
    for path in ("README", "rollback.md/inner.md"):
        answer = server.api.delete_document("ops-bot", "runbooks", quote(path, safe=""))
        assert answer.status == 404, (path, answer.body)
    assert _tree(root) == before  # no sidecar left behind by a refused write


def test_a_folder_where_the_sidecar_goes_is_a_400_and_writes_nothing(
    server: LocalServer, root: Path
) -> None:
    # Made beside the API (a copy into the folder): renaming the sidecar over it was a 500
    # (IsADirectoryError) on every write of the document.
    folder = root / "ops-bot" / "runbooks"
    (folder / "x.md.metadata.json").mkdir()
    (folder / "x.md.metadata.json" / "inner.md").write_text("# inner\n", "utf-8")
    (folder / "rollback.md.metadata.json").mkdir()  # beside a document already there
    before = _tree(root)
    for path in ("x.md", "rollback.md"):
        answer = server.api.put_document("ops-bot", "runbooks", path, b"# x\n")
        assert (answer.status, answer.body["field"]) == (400, "path"), (path, answer.body)
        assert f"{path}.metadata.json" in answer.body["error"], answer.body
        assert str(root) not in answer.body["error"]
        assert _tree(root) == before
    assert (folder / "rollback.md").read_text("utf-8") == "# Rollback\n\nhelm\n"


def test_a_sidecar_over_its_limit_with_the_origin_is_refused_before_anything_is_written(
    server: LocalServer, root: Path
) -> None:
    # The metadata alone fits the sidecar's limit; with the origin added it does not. The
    # answer used to be a 400 raised after the document had been written.
    from knowledge.ingest.sources import MAX_SIDECAR_BYTES

    overhead = len(json.dumps({"metadataAttributes": {"k": ""}}))
    metadata = json.dumps({"k": "v" * (MAX_SIDECAR_BYTES - overhead - 2)})
    answer = server.api.put_document(
        "ops-bot", "runbooks", "big-meta.md", b"# x\n", query_string="metadata=" + quote(metadata)
    )
    assert answer.status == 400, answer.body
    assert not (root / "ops-bot" / "runbooks" / "big-meta.md").exists()


def test_metadata_cannot_claim_a_shared_library(server: LocalServer, root: Path) -> None:
    # shared_library is what a hit of a granted library carries; a document of the agent's
    # own claiming it would be shown as the library's ("library: playbooks").
    client = KnowledgeClient(server.url, retries=0)
    with pytest.raises(ValidationError) as refused:
        client.put_document(
            SCOPE, "forged.md", b"# x\n", metadata={"shared_library": "_shared/playbooks"}
        )
    assert refused.value.field == "metadataAttributes.shared_library", refused.value
    assert not (root / "ops-bot" / "runbooks" / "forged.md").exists()


def test_a_body_that_is_not_the_format_its_name_says_keeps_the_old_version_searchable(
    server: LocalServer, root: Path
) -> None:
    import document_files as files

    client = KnowledgeClient(server.url, retries=0)
    good = client.put_document(SCOPE, "manual.pdf", files.pdf(["Feed the wombatfeeder daily."]))
    wait_until(lambda: indexed_with(client, "manual.pdf", good["content_hash"]), "the pdf")
    refused_bodies = [
        ("manual.pdf", b"# just text, not a PDF\n", "application/pdf"),
        ("manual.pdf", b"", "application/octet-stream"),
        ("guide.docx", b"PK\x03\x04" + b"\x00" * 200, "application/octet-stream"),  # no zip
        ("deck.pptx", files.docx([("Title", "wrong")]), "application/octet-stream"),  # Word
        ("sheet.xlsx", b"name,value\n", "application/octet-stream"),
        ("old.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100, "application/msword"),
        ("notes.odt", b"PK\x03\x04", "application/octet-stream"),
    ]
    for path, data, content_type in refused_bodies:
        with pytest.raises(ValidationError) as refused:
            client.put_document(SCOPE, path, data, content_type=content_type)
        assert refused.value.field in ("body", "path"), (path, refused.value)
    with pytest.raises(ValidationError) as blank:
        client.put_document(SCOPE, "rollback.md", b"  \n\n", content_type="text/markdown")
    assert blank.value.field == "body"
    assert paths_for(client, "wombatfeeder") == ["manual.pdf"]
    assert paths_for(client, "helm") == ["rollback.md"]
    assert client.get_document(SCOPE, "manual.pdf").content_hash == good["content_hash"]  # type: ignore[union-attr]
    assert not (root / "ops-bot" / "runbooks" / "guide.docx").exists()


def test_concurrent_writes_of_one_path_leave_one_writes_document_and_sidecar(
    server: LocalServer, root: Path
) -> None:
    # Each write stores its sidecar, then its document: unserialised, eight writers left the
    # document of one with the sidecar of another (most runs), whose content_hash then
    # matched no 202 answer, so no writer ever saw its version indexed.
    folder = root / "ops-bot" / "runbooks"
    for trial in range(10):
        barrier = threading.Barrier(8)

        def put(writer: int, trial: int = trial, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            origin = "origin=manual&" if writer % 2 else ""
            metadata = quote(json.dumps({"writer": str(writer)}))
            answer = server.api.put_document(
                "ops-bot",
                "runbooks",
                "race.md",
                f"# Race {trial}\n\nwriter{writer}\n".encode(),
                content_type="text/markdown",
                query_string=f"{origin}metadata={metadata}",
            )
            assert answer.status == 202, answer.body

        threads = [threading.Thread(target=put, args=(w,)) for w in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        document = (folder / "race.md").read_text("utf-8")
        sidecar = json.loads((folder / "race.md.metadata.json").read_text("utf-8"))
        writer = int(document.rsplit("writer", 1)[1])
        assert sidecar["metadataAttributes"]["writer"] == str(writer), (trial, document, sidecar)
        assert not [p for p in folder.iterdir() if p.name.startswith(".kb-write-")]


@pytest.mark.parametrize(
    "path",
    ["a" * 250 + ".md", "b" * 300 + ".md", "한" * 90 + ".md", "c" * 300 + "/x.md"],
    ids=["sidecar-over-255", "document-over-255", "korean-over-255-bytes", "folder-over-255"],
)
def test_a_name_longer_than_the_file_system_takes_is_a_400(
    server: LocalServer, root: Path, path: str
) -> None:
    # Within the API's 1,024 characters, but over a file name's 255 bytes (the sidecar's
    # name 14 more): the write was a 500 from the file system.
    before = _tree(root)
    answer = server.api.put_document("ops-bot", "runbooks", quote(path, safe=""), b"# x\n")
    assert (answer.status, answer.body["field"]) == (400, "path"), answer.body
    assert _tree(root) == before
