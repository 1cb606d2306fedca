"""knowledge.core.origin's rules and the sidecar keys they check; the unread-files counts."""

from __future__ import annotations

import json

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.model import (
    MAX_UNREAD_EXTENSIONS,
    NO_EXTENSION,
    OTHER_EXTENSIONS,
    IndexState,
    IndexStatus,
    capped_unread,
    unread_extension,
)
from knowledge.ingest.sources import parse_metadata_sidecar


def sidecar(**attributes: object) -> bytes:
    return json.dumps({"metadataAttributes": attributes}).encode()


@pytest.mark.parametrize(("given", "origin"), [("repo", "repo"), (" Manual ", "manual")])
def test_a_sidecar_may_set_a_writers_origin(given: str, origin: str) -> None:
    assert parse_metadata_sidecar(sidecar(origin=given))["origin"] == origin


@pytest.mark.parametrize("given", ["shared", "vault", "", ["repo"], 3])
def test_a_sidecar_may_not_set_another_origin(given: object) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_metadata_sidecar(sidecar(origin=given))
    assert caught.value.field == "metadataAttributes.origin"
    assert "upload, repo, manual" in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "data:text/html,x",
        "/relative/path.md",
        "https://",
        "https://host/a b",
        "https://host/" + "a" * 2048,
        "ftp://host/file",
    ],
)
def test_a_sidecar_url_must_be_an_absolute_http_url(url: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_metadata_sidecar(sidecar(url=url))
    assert caught.value.field == "metadataAttributes.url"


def test_a_good_url_is_kept() -> None:
    url = "https://git.example.com/team/docs/blob/0a1b/guide.md#install"
    assert parse_metadata_sidecar(sidecar(url=url))["url"] == url


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("img/a.PNG", ".png"),
        ("bin/run", NO_EXTENSION),
        ("archive.tar.gz", ".gz"),
        ("notes.final draft", NO_EXTENSION),
        ("trailing.", NO_EXTENSION),
        ("x." + "e" * 17, NO_EXTENSION),
    ],
)
def test_unread_extension(path: str, key: str) -> None:
    assert unread_extension(path) == key


def test_unread_counts_are_capped_and_summarised() -> None:
    counts = {f".e{i:03}": i + 1 for i in range(150)}
    capped = capped_unread(counts)
    assert len(capped) == MAX_UNREAD_EXTENSIONS
    assert sum(capped.values()) == sum(counts.values())  # nothing lost: the rest is summed
    assert capped[".e149"] == 150  # the most numerous are kept
    assert ".e000" not in capped
    assert capped[OTHER_EXTENSIONS] == sum(range(1, 52))
    assert capped_unread({".a": 0, ".b": 2}) == {".b": 2}
    status = IndexStatus(0, 0, None, IndexState.EMPTY, unread_files={".png": 30, ".exe": 1})
    assert status.unread_summary() == (
        "31 files not read (no pattern selects them): .png 30, .exe 1"
    )
    assert IndexStatus(0, 0, None, IndexState.EMPTY).unread_summary() is None
