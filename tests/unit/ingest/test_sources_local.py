from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from knowledge.core.errors import NotFoundError
from knowledge.core.model import IndexOptions
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import DocumentSource, SourceDocument
from knowledge.ingest.sources import Listing
from knowledge.ingest.sources.folders import BucketFolderSource, LocalDirectorySource

SCOPE = KnowledgeScope("agent", "ctx")
ALL = IndexOptions(file_patterns=("*",))


def write(root: Path, rel: str, text: str = "text") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def listed(source: DocumentSource, options: IndexOptions = ALL) -> list[SourceDocument]:
    return list(source.documents(SCOPE, options))


def listing_of(
    source: LocalDirectorySource | BucketFolderSource, options: IndexOptions = ALL
) -> tuple[list[SourceDocument], Listing[SourceDocument]]:
    listing = source.documents(SCOPE, options)
    return list(listing), listing


def test_sources_satisfy_the_protocol(tmp_path: Path) -> None:
    assert isinstance(LocalDirectorySource(tmp_path), DocumentSource)
    assert isinstance(BucketFolderSource(tmp_path), DocumentSource)


def test_lists_matching_files_recursively_sorted_by_path(tmp_path: Path) -> None:
    for rel in ("b.md", "a-z.md", "a/z.md", "a/b/c.txt", "image.png", "a/notes.txt"):
        write(tmp_path, rel)
    docs = listed(LocalDirectorySource(tmp_path), IndexOptions())
    assert [d.path for d in docs] == sorted(
        ["b.md", "a-z.md", "a/z.md", "a/b/c.txt", "a/notes.txt"]
    )
    assert all(d.version is None and d.source_key is None for d in docs)
    assert all(d.metadata == {} for d in docs)


def test_not_recursive_takes_the_top_folder_only(tmp_path: Path) -> None:
    write(tmp_path, "top.md")
    write(tmp_path, "sub/deep.md")
    docs = listed(LocalDirectorySource(tmp_path), IndexOptions(recursive=False))
    assert [d.path for d in docs] == ["top.md"]


def test_patterns_match_the_relative_posix_path(tmp_path: Path) -> None:
    write(tmp_path, "runbooks/deploy.md")
    write(tmp_path, "guides/deploy.md")
    docs = listed(LocalDirectorySource(tmp_path), IndexOptions(file_patterns=("runbooks/*",)))
    assert [d.path for d in docs] == ["runbooks/deploy.md"]


def test_hidden_files_and_folders_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, "visible.md")
    write(tmp_path, ".hidden.md")
    write(tmp_path, ".git/config.md")
    write(tmp_path, "sub/.secret/inner.md")
    write(tmp_path, "sub/.draft.md")
    docs, listing = listing_of(LocalDirectorySource(tmp_path))
    assert [d.path for d in docs] == ["visible.md"]
    assert listing.skipped == []


def test_read_is_lazy_and_returns_the_bytes(tmp_path: Path) -> None:
    path = write(tmp_path, "doc.md", "first")
    (doc,) = listed(LocalDirectorySource(tmp_path))
    assert doc.size == len("first")
    path.write_text("second version", encoding="utf-8")
    assert doc.read() == b"second version"
    path.unlink()
    with pytest.raises(FileNotFoundError):
        doc.read()


def test_sidecar_metadata_is_attached_and_the_sidecar_is_no_document(tmp_path: Path) -> None:
    write(tmp_path, "doc.md")
    write(tmp_path, "doc.md.metadata.json", json.dumps({"metadataAttributes": {"team": "sre"}}))
    write(tmp_path, "orphan.md.metadata.json", json.dumps({"metadataAttributes": {"x": "y"}}))
    write(tmp_path, "other.md")
    docs, listing = listing_of(LocalDirectorySource(tmp_path))
    assert [(d.path, dict(d.metadata)) for d in docs] == [
        ("doc.md", {"team": "sre"}),
        ("other.md", {}),
    ]
    assert listing.errors == []


def test_an_invalid_sidecar_is_an_error_and_its_document_is_listed_without_it(
    tmp_path: Path,
) -> None:
    write(tmp_path, "doc.md")
    write(tmp_path, "doc.md.metadata.json", "{broken")
    write(tmp_path, "ok.md")
    docs, listing = listing_of(LocalDirectorySource(tmp_path))
    assert [(d.path, dict(d.metadata)) for d in docs] == [("doc.md", {}), ("ok.md", {})]
    assert [p.path for p in listing.errors] == ["doc.md.metadata.json"]
    assert "invalid metadata sidecar" in listing.errors[0].reason


def test_a_hostile_sidecar_is_its_files_error_not_the_listings(tmp_path: Path) -> None:
    write(tmp_path, "doc.md")
    write(tmp_path, "doc.md.metadata.json", '{"metadataAttributes": {"n": ' + "9" * 5000 + "}}")
    write(tmp_path, "deep.md")
    write(tmp_path, "deep.md.metadata.json", '{"metadataAttributes": {"n": ' + "[" * 50_000 + "}}")
    write(tmp_path, "ok.md")
    docs, listing = listing_of(LocalDirectorySource(tmp_path))
    assert [d.path for d in docs] == ["deep.md", "doc.md", "ok.md"]
    assert sorted(p.path for p in listing.errors) == [
        "deep.md.metadata.json",
        "doc.md.metadata.json",
    ]


def test_a_link_out_of_the_folder_is_never_followed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    write(outside, "secret.md", "top secret")
    write(outside, "dir/inner.md", "top secret")
    write(root, "doc.md")
    (root / "link.md").symlink_to(outside / "secret.md")
    (root / "linkdir").symlink_to(outside / "dir")
    (root / "dotdot.md").symlink_to("../outside/secret.md")

    docs, listing = listing_of(LocalDirectorySource(root))
    assert [d.path for d in docs] == ["doc.md"]
    assert sorted(p.path for p in listing.skipped) == ["dotdot.md", "link.md", "linkdir"]
    assert all("outside" in p.reason for p in listing.skipped)


def test_links_inside_the_folder_are_followed_without_looping(tmp_path: Path) -> None:
    write(tmp_path, "real/doc.md", "real")
    (tmp_path / "alias.md").symlink_to(tmp_path / "real" / "doc.md")
    (tmp_path / "real" / "loop").symlink_to(tmp_path)
    docs = listed(LocalDirectorySource(tmp_path))
    assert [d.path for d in docs] == ["alias.md", "real/doc.md"]
    assert docs[0].read() == b"real"


def test_a_file_swapped_for_an_outside_link_after_listing_is_not_read(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(tmp_path, "outside/secret.md", "top secret")
    path = write(root, "doc.md")
    (doc,) = listed(LocalDirectorySource(root))
    path.unlink()
    path.symlink_to(tmp_path / "outside" / "secret.md")
    with pytest.raises(PermissionError, match="symlink outside its scope") as raised:
        doc.read()
    assert str(tmp_path) not in str(raised.value)


def test_a_file_name_that_is_not_utf8_is_skipped(tmp_path: Path) -> None:
    write(tmp_path, "good.md")
    with open(os.path.join(os.fsencode(tmp_path), b"bad-\xff.md"), "wb") as handle:
        handle.write(b"text")
    docs, listing = listing_of(LocalDirectorySource(tmp_path))
    assert [d.path for d in docs] == ["good.md"]
    assert [p.reason for p in listing.skipped] == ["file name is not UTF-8"]
    listing.skipped[0].path.encode("utf-8")  # printable in a report


def test_a_file_whose_path_the_api_cannot_name_is_skipped_with_the_reason(
    tmp_path: Path,
) -> None:
    """A control character in a name (a tab, a newline) or a path longer than a document
    path may be (1,024 characters, S3's key limit) would be indexed but could never be
    fetched by the documents route, which refuses such a path."""
    from knowledge.core.documents import validate_document_path

    write(tmp_path, "good.md")
    write(tmp_path, "tab\there.md")
    write(tmp_path, "new\nline.md")
    write(tmp_path, "next\x85line.md")  # U+0085: a line break to str.splitlines()
    deep = "/".join(["d" * 200] * 6) + "/long.md"
    write(tmp_path, deep)
    docs, listing = listing_of(LocalDirectorySource(tmp_path))
    assert [d.path for d in docs] == ["good.md"]
    skipped = {p.path: p.reason for p in listing.skipped}
    assert set(skipped) == {"tab\there.md", "new\nline.md", "next\x85line.md", deep}
    assert skipped["tab\there.md"] == "path not indexed: must not contain control characters"
    assert skipped["next\x85line.md"] == skipped["tab\there.md"]
    too_long = f"path not indexed: must be at most 1024 characters, got {len(deep)}"
    assert skipped[deep] == too_long
    for doc in docs:
        validate_document_path(doc.path)


def test_a_missing_folder_is_an_error_not_an_empty_source(tmp_path: Path) -> None:
    source = LocalDirectorySource(tmp_path / "nope")
    listing = source.documents(SCOPE, ALL)  # lazy: nothing raised yet
    with pytest.raises(NotFoundError, match="nope"):
        list(listing)


# --- BucketFolderSource -----------------------------------------------------------------------


def test_bucket_documents_come_from_the_scope_folder(tmp_path: Path) -> None:
    write(tmp_path, "agent/ctx/runbooks/deploy.md")
    write(tmp_path, "agent/ctx/notes.txt")
    write(tmp_path, "agent/other/elsewhere.md")
    write(tmp_path, "agent2/ctx/foreign.md")
    docs = listed(BucketFolderSource(tmp_path), IndexOptions())
    assert [(d.path, d.source_key) for d in docs] == [
        ("notes.txt", "agent/ctx/notes.txt"),
        ("runbooks/deploy.md", "agent/ctx/runbooks/deploy.md"),
    ]


def test_a_missing_scope_folder_has_no_documents(tmp_path: Path) -> None:
    assert listed(BucketFolderSource(tmp_path)) == []
    assert listed(BucketFolderSource(tmp_path / "no-bucket")) == []


def test_a_link_into_another_scope_is_not_followed(tmp_path: Path) -> None:
    write(tmp_path, "other/ctx/secret.md", "other agent's")
    write(tmp_path, "agent/ctx/own.md")
    (tmp_path / "agent/ctx/stolen.md").symlink_to(tmp_path / "other/ctx/secret.md")
    docs, listing = listing_of(BucketFolderSource(tmp_path))
    assert [d.path for d in docs] == ["own.md"]
    assert [p.path for p in listing.skipped] == ["stolen.md"]


def test_a_scope_folder_linked_out_of_the_bucket_is_not_read(tmp_path: Path) -> None:
    bucket = tmp_path / "bucket"
    write(tmp_path, "elsewhere/doc.md")
    (bucket / "agent").mkdir(parents=True)
    (bucket / "agent" / "ctx").symlink_to(tmp_path / "elsewhere")
    docs, listing = listing_of(BucketFolderSource(bucket))
    assert docs == []
    assert [(p.path, p.reason) for p in listing.skipped] == [(".", "symlink outside its scope")]


def test_iter_scopes_lists_valid_scope_folders_and_reports_the_rest(tmp_path: Path) -> None:
    write(tmp_path, "ops-bot/runbooks/a.md")
    write(tmp_path, "ops-bot/faq/b.md")
    (tmp_path / "ops-bot" / "empty-ctx").mkdir()
    write(tmp_path, "zeta/ctx/c.md")
    write(tmp_path, "bad agent/ctx/d.md")
    write(tmp_path, "ops-bot/bad ctx/e.md")
    write(tmp_path, "README.md")
    write(tmp_path, "ops-bot/stray.md")
    write(tmp_path, ".kb/local.db")
    listing = BucketFolderSource(tmp_path).iter_scopes()
    scopes = list(listing)
    assert [s.key for s in scopes] == [
        "ops-bot/empty-ctx",
        "ops-bot/faq",
        "ops-bot/runbooks",
        "zeta/ctx",
    ]
    reasons = {p.path: p.reason for p in listing.skipped}
    assert set(reasons) == {"bad agent", "ops-bot/bad ctx", "README.md", "ops-bot/stray.md"}
    assert "letters, digits" in reasons["bad agent"]
    assert "not inside" in reasons["README.md"]


def test_iter_scopes_of_a_missing_bucket_is_empty(tmp_path: Path) -> None:
    assert list(BucketFolderSource(tmp_path / "none").iter_scopes()) == []


# --- links between scopes and agents (issue 9, item 2) -----------------------------------------

OUTSIDE = "symlink outside its scope"


def secret_bucket(tmp_path: Path) -> Path:
    bucket = tmp_path / "bucket"
    write(bucket, "agent-b/ctx1/secret.md", "agent-b's secret")
    write(bucket, "agent-a/own/mine.md", "agent-a's own")
    return bucket


def scope_docs(
    bucket: Path, agent: str, context: str
) -> tuple[list[SourceDocument], Listing[SourceDocument]]:
    listing = BucketFolderSource(bucket).documents(KnowledgeScope(agent, context), ALL)
    return list(listing), listing


def test_a_scope_folder_linked_to_another_agents_scope_is_not_followed(tmp_path: Path) -> None:
    bucket = secret_bucket(tmp_path)
    (bucket / "agent-a" / "stolen").symlink_to("../agent-b/ctx1")
    docs, listing = scope_docs(bucket, "agent-a", "stolen")
    assert docs == []
    assert [(p.path, p.reason) for p in listing.skipped] == [(".", OUTSIDE)]
    scopes = BucketFolderSource(bucket).iter_scopes()
    assert [s.key for s in scopes] == ["agent-a/own", "agent-b/ctx1"]
    assert [(p.path, p.reason) for p in scopes.skipped] == [("agent-a/stolen", OUTSIDE)]


def test_an_agent_folder_linked_to_another_agent_is_not_followed(tmp_path: Path) -> None:
    bucket = secret_bucket(tmp_path)
    (bucket / "agent-c").symlink_to("agent-b")
    docs, listing = scope_docs(bucket, "agent-c", "ctx1")
    assert docs == []
    assert [(p.path, p.reason) for p in listing.skipped] == [(".", OUTSIDE)]
    scopes = BucketFolderSource(bucket).iter_scopes()
    assert [s.key for s in scopes] == ["agent-a/own", "agent-b/ctx1"]
    assert [(p.path, p.reason) for p in scopes.skipped] == [("agent-c", OUTSIDE)]


def test_links_out_of_the_scope_at_every_level_are_reported(tmp_path: Path) -> None:
    bucket = secret_bucket(tmp_path)
    own = bucket / "agent-a" / "own"
    (own / "file-link.md").symlink_to(bucket / "agent-b" / "ctx1" / "secret.md")
    (own / "sub").mkdir()
    (own / "sub" / "dir-link").symlink_to("../../../agent-b/ctx1")
    (own / "sibling").symlink_to("../../agent-a")  # the agent folder: outside the scope
    write(own, "sub/inner.md", "inner")
    (own / "inner-link.md").symlink_to("sub/inner.md")  # inside the scope: followed
    docs, listing = scope_docs(bucket, "agent-a", "own")
    assert [d.path for d in docs] == ["inner-link.md", "mine.md", "sub/inner.md"]
    assert sorted((p.path, p.reason) for p in listing.skipped) == [
        ("file-link.md", OUTSIDE),
        ("sibling", OUTSIDE),
        ("sub/dir-link", OUTSIDE),
    ]
    assert all(b"secret" not in d.read() for d in docs)


# --- FIFOs and other non-regular files (issue 9, item 4) ---------------------------------------


def finishes(action: Callable[[], object], fifo: Path) -> BaseException | None:
    """Run ``action`` on a thread; fail if it blocks (then unblock it through ``fifo``)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            action()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30.0)
    if thread.is_alive():
        with open(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "wb"):
            pass  # a writer that closes at once lets the blocked reader finish
        thread.join(30.0)
        pytest.fail("reading blocked on a FIFO")
    return outcome[0]


def test_a_fifo_is_not_listed(tmp_path: Path) -> None:
    write(tmp_path, "doc.md")
    os.mkfifo(tmp_path / "pipe.md")
    docs, _ = listing_of(LocalDirectorySource(tmp_path))
    assert [d.path for d in docs] == ["doc.md"]


def test_a_fifo_swapped_in_after_listing_is_refused_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, "doc.md")
    (doc,) = listed(LocalDirectorySource(tmp_path))
    path.unlink()
    os.mkfifo(path)
    error = finishes(doc.read, path)
    assert isinstance(error, OSError)
    assert "FIFO, not a regular file" in str(error)
    assert str(tmp_path) not in str(error)


def test_a_sidecar_swapped_for_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    write(tmp_path, "a.md")
    write(tmp_path, "b.md")
    sidecar = write(tmp_path, "b.md.metadata.json", '{"metadataAttributes": {"k": "v"}}')
    listing = LocalDirectorySource(tmp_path).documents(SCOPE, ALL)
    first = next(listing)  # the folder is scanned now; b.md's sidecar is read later
    assert first.path == "a.md"
    sidecar.unlink()
    os.mkfifo(sidecar)
    rest: list[SourceDocument] = []
    assert finishes(lambda: rest.extend(listing), sidecar) is None
    assert [(d.path, dict(d.metadata)) for d in rest] == [("b.md", {})]
    assert [p.path for p in listing.errors] == ["b.md.metadata.json"]
    assert "FIFO" in listing.errors[0].reason
