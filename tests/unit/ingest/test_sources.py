from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.model import FileProblem
from knowledge.ingest.sources import MAX_SIDECAR_BYTES, Listing, parse_metadata_sidecar


def sidecar(attributes: object) -> bytes:
    return json.dumps({"metadataAttributes": attributes}).encode()


def test_plain_values_become_strings_and_lists_of_strings() -> None:
    parsed = parse_metadata_sidecar(
        sidecar(
            {
                "team": "sre",
                "year": 2024,
                "score": 3.0,
                "ratio": 0.25,
                "public": True,
                "draft": False,
                "tags": ["ops", 7, True],
            }
        )
    )
    assert parsed == {
        "team": "sre",
        "year": "2024",
        "score": "3",
        "ratio": "0.25",
        "public": "true",
        "draft": "false",
        "tags": ["ops", "7", "true"],
    }


def test_bedrock_typed_values() -> None:
    parsed = parse_metadata_sidecar(
        sidecar(
            {
                "genre": {
                    "value": {"type": "STRING", "stringValue": "drama"},
                    "includeForEmbedding": True,
                },
                "year": {"value": {"type": "NUMBER", "numberValue": 1999}},
                "live": {"value": {"type": "BOOLEAN", "booleanValue": False}},
                "cast": {"value": {"type": "STRING_LIST", "stringListValue": ["a", "b"]}},
            }
        )
    )
    assert parsed == {"genre": "drama", "year": "1999", "live": "false", "cast": ["a", "b"]}


def test_empty_attributes_are_fine() -> None:
    assert parse_metadata_sidecar(sidecar({})) == {}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (b"{not json", "sidecar"),
        (b"\xff\xfe", "sidecar"),
        (b"[]", "metadataAttributes"),
        (b'{"attributes": {}}', "metadataAttributes"),
        (b'{"metadataAttributes": ["a"]}', "metadataAttributes"),
        (sidecar({"x": None}), "metadataAttributes.x"),
        (sidecar({"x": {"nested": 1}}), "metadataAttributes.x"),
        (sidecar({"x": [["nested"]]}), "metadataAttributes.x"),
        (sidecar({"x": float("inf")}), "metadataAttributes.x"),
        (
            sidecar({"x": {"value": {"type": "DATE", "stringValue": "2024"}}}),
            "metadataAttributes.x",
        ),
        (sidecar({"x": {"value": {"type": "STRING"}}}), "metadataAttributes.x"),
        (
            sidecar({"x": {"value": {"type": "STRING_LIST", "stringListValue": "a"}}}),
            "metadataAttributes.x",
        ),
        (sidecar({" ": "blank name"}), "metadataAttributes"),
        # JSON Python's parser refuses with other errors than JSONDecodeError: an integer
        # over its 4,300 digits (ValueError) and nesting over its recursion limit. They
        # escaped as unexpected errors and ended a whole `kb index` run.
        (b'{"metadataAttributes": {"n": ' + b"9" * 5000 + b"}}", "sidecar"),
        (b'{"metadataAttributes": {"n": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}", "sidecar"),
        (sidecar({"shared_library": "_shared/playbooks"}), "metadataAttributes.shared_library"),
    ],
)
def test_invalid_sidecars_name_the_field(data: bytes, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_metadata_sidecar(data)
    assert info.value.field == field


def test_oversized_sidecar_is_refused_before_parsing() -> None:
    data = b" " * (MAX_SIDECAR_BYTES + 1)
    with pytest.raises(ValidationError, match="larger than"):
        parse_metadata_sidecar(data)


def test_listing_is_lazy_and_collects_problems_while_iterating() -> None:
    started = []

    def produce(listing: Listing[int]) -> Iterator[int]:
        started.append(True)
        yield 1
        listing.skipped.append(FileProblem("a", "left out"))
        yield 2
        listing.errors.append(FileProblem("b", "broken"))

    listing = Listing(produce)
    assert started == []
    assert iter(listing) is listing
    assert next(listing) == 1
    assert listing.skipped == []
    assert list(listing) == [2]
    assert listing.skipped == [FileProblem("a", "left out")]
    assert listing.errors == [FileProblem("b", "broken")]
