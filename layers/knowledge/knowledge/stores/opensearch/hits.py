"""What both sides read from an OpenSearch answer: its hits, a failed item's reason.

``Hit`` and ``parse_hits`` read the hits of a ``_search`` (the read side's searches, the
write side's reads of records and vectors); ``item_reason`` says in one line why a bulk
item, an ``_msearch`` answer or a delete-by-query failed; ``INCOMPLETE_HASH`` is the
hash a document whose stored records are not one complete write is reported with, by
the listing of stored documents and by a write's read of its record alike. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from knowledge.stores.opensearch.client import error_reason

__all__ = ["INCOMPLETE_HASH", "MATCHED", "Hit", "doc_values", "item_reason", "parse_hits"]


INCOMPLETE_HASH = ""
"""``content_hash`` reported for a document whose stored records are not one complete
write (chunks without the document record, or not as many as it declares): it never
equals a real hash, so the indexer writes the document again."""


@dataclass(slots=True)
class Hit:
    """One search hit: its id (unique in the index), raw engine score and stored fields.

    A value: never change one. Not ``frozen`` because a hybrid search parses 200 on the
    hot path and a frozen dataclass's ``__init__`` costs about five times a plain one's."""

    id: str
    score: float
    source: Mapping[str, Any]


def parse_hits(response: Mapping[str, Any]) -> list[Hit]:
    """The hits of a ``_search`` response (or of one ``_msearch`` response), in order;
    a hit without ``_source`` has its doc values (``fields``, one value each) instead,
    and a hit that matched named clauses (``queries.with_named``) lists them as
    ``MATCHED``, as a candidate does."""
    found: list[Hit] = []
    for h in response.get("hits", {}).get("hits", []):
        source = h["_source"] if "_source" in h else doc_values(h.get("fields", {}))
        if h.get("matched_queries"):
            source = {**source, MATCHED: tuple(h["matched_queries"])}
        found.append(Hit(id=str(h["_id"]), score=float(h.get("_score") or 0.0), source=source))
    return found


MATCHED = "_matched"
"""The fact of a candidate that lists the ``named`` clauses it matched
(``queries.with_named``)."""


def doc_values(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A hit's doc values (``fields``), one value each."""
    return {
        name: values[0] for name, values in fields.items() if isinstance(values, list) and values
    }


def item_reason(info: Mapping[str, Any]) -> str:
    """One line for a failed bulk item / ``_msearch`` answer / delete-by-query failure."""
    error = info.get("error", info.get("cause"))
    chunk = ""
    doc_id = info.get("_id") or info.get("id")
    if isinstance(doc_id, str) and doc_id.count(":") >= 1:
        chunk = f"chunk {doc_id.rsplit(':', 1)[1]}: "
    if isinstance(error, Mapping):
        caused = error.get("caused_by")
        reason = f"{error.get('type', 'error')}: {error.get('reason', '')}"
        if isinstance(caused, Mapping) and caused.get("reason"):
            reason += f" ({caused.get('reason')})"
        roots = error.get("root_cause")
        root = roots[0] if isinstance(roots, list) and roots else None
        # "all shards failed" says nothing; the shard's own reason does
        if isinstance(root, Mapping) and root.get("reason") and root is not error:
            reason += f" [{root.get('type', 'error')}: {root.get('reason')}]"
        return chunk + reason[:300]
    if isinstance(error, BaseException):
        return chunk + error_reason(error)
    if error is not None:
        return chunk + str(error)[:300]
    return chunk + f"status {info.get('status')}"
