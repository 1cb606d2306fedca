"""User metadata as key/value terms in two fixed fields, not one mapping field per key.

An index is shared by every agent and context, and OpenSearch caps the fields of its
mapping (``index.mapping.total_fields.limit``, 1,000 by default). Had each metadata key
its own field, one tenant's documents with a few hundred distinct keys would use up the
whole index's budget, and every other tenant's next new key would be a rejected write; a
key ``team`` (a string) in one scope and ``team.lead`` in another would also clash (the
first makes ``metadata.team`` a keyword, the second needs it to be an object). So since
schema 4 (``mapping.SCHEMA_VERSION``) the ``metadata`` object is kept in ``_source`` only
(not indexed), and each chunk carries its metadata as terms of two keyword fields:

- ``metadata_terms``: ``<key>\\x1f<text>`` for every element's text form
  (``search_filter.element_text``: strings as they are, numbers by their JSON spelling,
  booleans as ``true``/``false``), for the string comparisons;
- ``metadata_numbers``: ``<key>\\x1f<16 hex digits>`` for every element that is a number
  (``search_filter.element_number``), the digits ordering as the numbers do
  (``number_code``), for the numeric comparisons.

Keyword terms sort by code point, and every term of a key starts with ``<key>\\x1f``, so a
range of one key's values is a range between two terms of that prefix (``key_range``):
the text comparisons order text exactly as ``knowledge.core.filter_language`` defines. A key that
holds the separator (it can never be named by a filter: ``search_filter`` keys are
``[\\w.:@/-]+``) is left out. The number of fields is fixed whatever the tenants write.
An index made before schema 4 keeps its per-key fields (``filter_query`` reads them) until
it is reindexed into a new index.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Final

from knowledge.core.filter_language import element_number, element_text, metadata_elements

__all__ = [
    "METADATA_NUMBERS",
    "METADATA_TERMS",
    "SEPARATOR",
    "TERM_MAX_CHARS",
    "key_range",
    "metadata_terms",
    "number_code",
    "number_term",
    "text_term",
]

METADATA_TERMS: Final = "metadata_terms"
METADATA_NUMBERS: Final = "metadata_numbers"
SEPARATOR: Final = "\x1f"
_AFTER_SEPARATOR: Final = chr(ord(SEPARATOR) + 1)
TERM_MAX_CHARS: Final = 8191
"""``ignore_above`` of both fields: a longer term is not indexed (Lucene's limit on one
term is 32,766 UTF-8 bytes, 8,191 characters of four bytes)."""

_SIGN: Final = 1 << 63
_ALL: Final = (1 << 64) - 1


def number_code(number: float) -> str:
    """16 hex digits that sort (as text) the way the numbers do: the IEEE 754 bits of
    ``number`` with the sign bit flipped for positives and every bit for negatives. ``-0.0``
    is ``0.0`` (they compare equal)."""
    (bits,) = struct.unpack(">Q", struct.pack(">d", float(number) + 0.0))
    return f"{(bits ^ _ALL) if bits & _SIGN else (bits | _SIGN):016x}"


def text_term(key: str, text: str) -> str:
    return f"{key}{SEPARATOR}{text}"


def number_term(key: str, number: float) -> str:
    return f"{key}{SEPARATOR}{number_code(number)}"


def key_range(key: str) -> tuple[str, str]:
    """``(lowest, above)``: every term of ``key`` is ``>= lowest`` and ``< above``."""
    return f"{key}{SEPARATOR}", f"{key}{_AFTER_SEPARATOR}"


def metadata_terms(metadata: Mapping[str, Any]) -> dict[str, list[str]]:
    """The two term fields of a chunk whose metadata is ``metadata`` (module docstring);
    a field with no terms is left out."""
    texts: list[str] = []
    numbers: list[str] = []
    for key, value in metadata.items():
        if SEPARATOR in key:
            continue
        for element in metadata_elements(value):
            text = element_text(element)
            if text is not None:
                texts.append(text_term(key, text))
            number = element_number(element)
            if number is not None:
                numbers.append(number_term(key, number))
    fields: dict[str, list[str]] = {}
    if texts:
        fields[METADATA_TERMS] = texts
    if numbers:
        fields[METADATA_NUMBERS] = numbers
    return fields
