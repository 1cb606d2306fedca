"""The index layout: field names, the index body, chunk documents, and mapping checks.

One shared index holds every scope (docs/architecture.md, "One shared index"). It holds
two kinds of records (``record``):

- ``chunk``: one per chunk, searchable; it carries its scope (``agent``, ``context`` as
  ``keyword``) and the facts of its whole document (path, base name, content hash,
  version, indexed time);
- ``document``: one per document, written *after* all its chunks (a commit record): the
  document's facts and its chunk count, and no text or vector, so no search matches it.
  A document with no chunks (an empty file) exists only as this record.

So ``stored_documents`` and ``status`` are answered from the index alone, and a document
whose chunks do not agree with its record (a write that died half-way) is detectable.

**One term stream, as in the embedded store** (analysis version 5). The writer analyses
each chunk with ``knowledge.ranking.analysis.keyword_terms`` (English Snowball stems without stop
words, Korean MeCab-ko morphemes, Han and Kana bigrams) and sends the terms space-joined
in ``content_terms``, a ``whitespace``-analysed field that indexes them as they are; a
keyword query sends its own ``keyword_terms`` to it. So the node indexes term for term
what the embedded store indexes *in one field*, and BM25 counts a chunk's length as the
embedded store does. Before (versions 3-4) English went to ``content`` through an
analyzer of our own, CJK bigrams to ``content.cjk`` and Korean morphemes to
``content_ko``, three BM25 clauses summed: a mostly-English chunk's few Korean words
made a very short ``content_ko``, which BM25 ranked above the Korean pages a Korean
query was after (Korean help pages: keyword MRR@10 0.530 on the node vs 0.744 in the
embedded store, ``docs/korean.md``). No plugin is needed: the nori plugin is optional
on Amazon OpenSearch Service and not published on Maven Central for the local node's
version. ``content`` is kept in ``_source`` for results and not indexed. (The
``whitespace`` tokenizer cuts a term at 255 characters; the embedded store keeps it
whole: only a run of letters that long, a blob, can differ.)

A chunk's title and heading path (``headings.heading_context``, "Title > Section",
``knowledge.ranking.headings.heading_terms``) is part of the same stream (analysis version 4 put
it in fields of its own): one field can only count a term once, so the node counts
heading terms as text terms, as the embedded store does at its default column weight of
1.0. A separate, short headings field over-rewarded heading matches (Korean help pages
0.731 without headings, 0.683 with a ``headings`` field at boost 0.5, 0.734 in the one
stream). ``OpenSearchConfig.headings_weight`` 0 leaves them out of chunks written from
then on; any other value includes them (``knowledge.ranking.headings``). The returned
``content`` is never changed.

User metadata makes no mapping field: the ``metadata`` object is kept in ``_source`` only
and filters read its key/value terms (``metadata_terms``, ``metadata_numbers``; schema 4,
``metadata_pairs``), so what tenants write never grows the shared index's mapping. An
index of schema 3 or older keeps one dynamic field per key (``SCHEMA3_METADATA_TEMPLATES``),
which its filters still read (``IndexLayout.metadata_pairs``).

The vector field is ``knn_vector`` with an explicit method (HNSW, cosine similarity) on
an engine that filters inside the knn clause (``lucene``; ``faiss`` on Serverless), and
explicit HNSW parameters ``m`` and ``ef_construction`` (``OpenSearchConfig.hnsw_m``,
``hnsw_ef_construction``; the defaults and why are in ``docs/sizing.md``). They are
fixed when the index is created; ``IndexLayout`` reads them back (an index built with
others still works: they change recall and memory, not results' meaning).
The index's ``_meta`` records the keyword analysis (``knowledge.ranking.analysis.ANALYSIS``): an
index built with another one (or before analyses were recorded) is refused with
``AnalysisMismatchError``, since its keyword side would silently miss; reindex it into a
new index. It records the record fields too (``records``, ``knowledge.core.origin.RECORDS``):
an index written before chunks and document records carried ``origin`` and ``format`` is
refused with ``RecordsMismatchError`` (its filters on them would miss), the same way.
It also records the embedding model, so a different provider or dimension
is refused (``EmbeddingMismatchError``) instead of silently mixing vectors.

Embedding reuse reads a chunk's ``embedding_key`` and vector back from ``_source``
(``records.stored_vectors_body``): ``knn_vector`` fields have no doc values to read them
from otherwise, so ``_source.excludes`` would cost every edit a full re-embedding (and,
measured in ``bench/runs/scale.py``, saves nothing while the node keeps a recovery copy of
the full source). ``derived_source=True`` (``OpenSearchConfig.vector_derived_source``)
sets the k-NN plugin's ``index.knn.derived_source.enabled`` (2.19+): the vector is not
stored in ``_source`` but rebuilt from the vector index on every read, so reuse keeps
working and a chunk took 0.71x the bytes in ``bench/runs/scale.py`` (``docs/sizing.md``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from knowledge.core.errors import (
    AnalysisMismatchError,
    EmbeddingMismatchError,
    RecordsMismatchError,
)
from knowledge.core.filter_language import MAX_COMPARED_TEXT_UNITS, NUMBER_SUBFIELD
from knowledge.core.origin import RECORDS
from knowledge.ranking.analysis import ANALYSIS
from knowledge.stores.opensearch.metadata_pairs import (
    METADATA_NUMBERS,
    METADATA_TERMS,
    TERM_MAX_CHARS,
)

__all__ = [
    "AGENT",
    "CHUNK_COUNT",
    "CHUNK_INDEX",
    "CONTENT",
    "CONTENT_HASH",
    "CONTENT_TERMS",
    "CONTEXT",
    "DOCUMENT_ID",
    "DOCUMENT_NAME",
    "DOCUMENT_PATH",
    "EMBEDDED_CHUNKS",
    "EMBEDDING",
    "EMBEDDING_KEY",
    "FORMAT",
    "GENERATION",
    "INDEXED_AT",
    "METADATA",
    "META_KEY",
    "NUMBER_SUBFIELD",
    "ORIGIN",
    "PAGE_TERMS",
    "PROBLEM",
    "PROBLEM_AT",
    "RECORD",
    "RECORD_CHUNK",
    "RECORD_DOCUMENT",
    "RECORD_PROPERTIES",
    "RECORD_SYNONYMS",
    "RECORD_UNREAD",
    "REPLACES",
    "REUSED_CHUNKS",
    "SCHEMA3_METADATA_TEMPLATES",
    "SCHEMA_VERSION",
    "SIZE",
    "SOURCE_FIELDS",
    "SYNONYMS",
    "UNREAD_FILES",
    "VERSION",
    "IndexLayout",
    "check_layout",
    "index_body",
    "is_zero_vector",
    "layout_of",
]

AGENT = "agent"
CONTEXT = "context"
DOCUMENT_ID = "document_id"
DOCUMENT_PATH = "document_path"
DOCUMENT_NAME = "document_name"
CHUNK_INDEX = "chunk_index"
CHUNK_COUNT = "chunk_count"
CONTENT = "content"
# The chunk's keyword_terms and heading_terms, space-joined (analysis version 5).
CONTENT_TERMS = "content_terms"
# A document record's page row: its chunks' keyword_terms, space-joined (analysis
# version 6, knowledge.ranking.page_signal).
PAGE_TERMS = "page_terms"
EMBEDDING = "embedding"
EMBEDDING_KEY = "embedding_key"
CONTENT_HASH = "content_hash"
VERSION = "version"
INDEXED_AT = "indexed_at"
GENERATION = "generation"
# A document record's previous generation, when its last write replaced one: until that
# generation's chunks are gone from searches, the record reads as not indexed yet
# (``listing``), so a version the API reports is the only one searches show.
REPLACES = "replaces"
FORMAT = "format"  # the document's format (knowledge.core.origin; ``source_type`` before origins)
ORIGIN = "origin"  # where the document came from (knowledge.core.origin.ORIGINS)
SIZE = "size"
PROBLEM = "problem"
EMBEDDED_CHUNKS = "embedded_chunks"
REUSED_CHUNKS = "reused_chunks"
PROBLEM_AT = "problem_at"
METADATA = "metadata"
RECORD = "record"
RECORD_CHUNK = "chunk"
RECORD_DOCUMENT = "document"
RECORD_UNREAD = "unread"  # one per scope: IndexStatus.unread_files, in UNREAD_FILES
UNREAD_FILES = "unread_files"
RECORD_SYNONYMS = "synonyms"  # one per scope: its synonyms (ranking.synonym_expansion), in SYNONYMS
SYNONYMS = "synonyms"

META_KEY = "knowledge"
SCHEMA_VERSION = 4

SOURCE_FIELDS: tuple[str, ...] = (
    AGENT,
    CONTEXT,
    DOCUMENT_PATH,
    CHUNK_INDEX,
    CONTENT,
    METADATA,
    DOCUMENT_ID,
    GENERATION,
)
"""What a search hit returns (never the vector: it is large and not part of a result)."""

# NUMBER_SUBFIELD (knowledge.core.filter_language): the ``double`` sub-field of every metadata
# field, for numeric filters; a search never names it as a key (check_metadata_key).

# How an index of schema 3 or older maps metadata (one dynamic field per key; since
# schema 4 keys are terms of two fixed fields, ``metadata_pairs``): every scalar under
# ``metadata`` a keyword (numbers and booleans by their JSON spelling), with a ``double``
# sub-field (``metadata.<key>.number``) holding the value as a number when it is one or a
# string spelling one, for the numeric comparisons (``filter_query`` still reads them).
SCHEMA3_METADATA_TEMPLATES: list[dict[str, Any]] = [
    {
        f"metadata_{kind}_as_keyword": {
            "path_match": f"{METADATA}.*",
            "match_mapping_type": kind,
            "mapping": {
                "type": "keyword",
                "ignore_above": MAX_COMPARED_TEXT_UNITS,
                "fields": {NUMBER_SUBFIELD: {"type": "double", "ignore_malformed": True}},
            },
        }
    }
    for kind in ("string", "long", "double", "boolean")
]


RECORD_PROPERTIES: dict[str, Any] = {
    GENERATION: {"type": "keyword"},
    REPLACES: {"type": "keyword", "index": False, "doc_values": False},
    FORMAT: {"type": "keyword"},
    ORIGIN: {"type": "keyword"},
    SIZE: {"type": "long"},
    PROBLEM: {"type": "keyword", "index": False, "doc_values": False},
    PROBLEM_AT: {"type": "date_nanos"},
    # Schema 3: what a chunk's vector is reused by (``identity.embedding_key``); read
    # from ``_source`` only, so neither indexed nor in doc values.
    EMBEDDING_KEY: {"type": "keyword", "index": False, "doc_values": False},
    # A document record's chunks sent to the embedder / that kept their vector at its last
    # write, summed by the status (``IndexStatus.embedded_chunks`` / ``reused_chunks``).
    EMBEDDED_CHUNKS: {"type": "integer"},
    REUSED_CHUNKS: {"type": "integer"},
    # The scope's unread-files record (RECORD_UNREAD): extension -> count, _source only.
    UNREAD_FILES: {"type": "object", "enabled": False},
    # The scope's synonyms record (RECORD_SYNONYMS): {"rules": the file's text}, _source only.
    SYNONYMS: {"type": "object", "enabled": False},
}
"""Fields added after schema 1 (schema 2: generations, per-document records, problems;
schema 3: ``embedding_key``; later, within schema 4: the embedded and reused counts): put
into the mapping of an older index when it is opened for writing."""


@dataclass(frozen=True, slots=True)
class IndexLayout:
    """What an existing index was built with, read back from its mapping."""

    vector_dimensions: int | None
    embedding_model: str | None
    vector_engine: str | None
    space_type: str | None
    has_generations: bool = True
    """Whether the mapping has every field of ``RECORD_PROPERTIES`` (else they are added)."""
    analysis: str | None = None
    hnsw_m: int | None = None
    """The HNSW ``m`` of the vector field (None: not recorded, the engine's default 16)."""
    hnsw_ef_construction: int | None = None
    metadata_pairs: bool = True
    """Whether metadata is held as key/value terms (schema 4, ``metadata_pairs``); an
    older index has one dynamic field per key, which its filters then read."""
    records: str | None = RECORDS
    """The record fields the index was built with (``knowledge.core.origin.RECORDS``; None:
    before they were recorded, so its chunks carry no ``origin``/``format``)."""


_FIELDS: dict[str, Any] = {
    RECORD: {"type": "keyword"},
    AGENT: {"type": "keyword"},
    CONTEXT: {"type": "keyword"},
    DOCUMENT_ID: {"type": "keyword"},
    DOCUMENT_PATH: {"type": "keyword"},
    DOCUMENT_NAME: {"type": "keyword"},
    CHUNK_INDEX: {"type": "integer"},
    CHUNK_COUNT: {"type": "integer"},
    # Returned, never searched: the keyword side reads content_terms.
    CONTENT: {"type": "text", "index": False},
    # The terms of knowledge.ranking.analysis, computed by the writer (never in results).
    CONTENT_TERMS: {"type": "text", "analyzer": "whitespace"},
    # The document record's terms (knowledge.ranking.page_signal), the same analyzer.
    # Matched, never phrase-searched: term frequencies without positions.
    PAGE_TERMS: {"type": "text", "analyzer": "whitespace", "index_options": "freqs"},
    CONTENT_HASH: {"type": "keyword"},
    VERSION: {"type": "keyword"},
    INDEXED_AT: {"type": "date"},
    **RECORD_PROPERTIES,
    # In _source only; filters read the key/value terms (metadata_pairs, schema 4).
    METADATA: {"type": "object", "enabled": False},
    METADATA_TERMS: {"type": "keyword", "ignore_above": TERM_MAX_CHARS},
    METADATA_NUMBERS: {"type": "keyword", "ignore_above": TERM_MAX_CHARS},
}
"""Every field of a new index but the vector (``index_body``)."""


def index_body(
    *,
    vector_dimensions: int | None,
    embedding_model: str | None,
    vector_engine: str = "lucene",
    serverless: bool = False,
    number_of_shards: int | None = None,
    number_of_replicas: int | None = None,
    refresh_interval: str | None = None,
    hnsw_m: int | None = None,
    hnsw_ef_construction: int | None = None,
    derived_source: bool = False,
) -> dict[str, Any]:
    """The ``PUT <index>`` body. No vector field when ``vector_dimensions`` is None;
    ``hnsw_m``/``hnsw_ef_construction`` None leave that parameter to the engine.

    Serverless manages shards, replicas and refreshes itself, so they are never sent there.
    """
    index_settings: dict[str, Any] = {"knn": True}
    if derived_source and vector_dimensions is not None and not serverless:
        index_settings["knn.derived_source.enabled"] = True
    if not serverless:
        index_settings.update(
            (name, value)
            for name, value in (
                ("refresh_interval", refresh_interval),
                ("number_of_shards", number_of_shards),
                ("number_of_replicas", number_of_replicas),
            )
            if value is not None
        )
    properties = copy.deepcopy(_FIELDS)
    meta: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "analysis": ANALYSIS,
        "records": RECORDS,
    }
    if vector_dimensions is not None:
        properties[EMBEDDING] = _vector_field(
            vector_dimensions, vector_engine, m=hnsw_m, ef_construction=hnsw_ef_construction
        )
        meta["embedding_model"] = embedding_model
        meta["embedding_dimensions"] = vector_dimensions
    return {
        "settings": {"index": index_settings},
        "mappings": {
            # Unknown top-level fields are a bug here, not data to guess a type for. No
            # field is ever made from data: metadata keys are terms (metadata_pairs).
            "dynamic": "strict",
            "_meta": {META_KEY: meta},
            "properties": properties,
        },
    }


def _vector_field(
    dimensions: int, engine: str, *, m: int | None, ef_construction: int | None
) -> dict[str, Any]:
    """The ``knn_vector`` field: HNSW with cosine on ``engine``; ``m`` and
    ``ef_construction`` only when set (else the engine's)."""
    method: dict[str, Any] = {"name": "hnsw", "engine": engine, "space_type": "cosinesimil"}
    parameters = {
        name: value
        for name, value in (("m", m), ("ef_construction", ef_construction))
        if value is not None
    }
    if parameters:
        method["parameters"] = parameters
    return {"type": "knn_vector", "dimension": dimensions, "method": method}


def layout_of(mapping_response: Mapping[str, Any], index_name: str) -> IndexLayout:
    """Read an ``IndexLayout`` from a ``GET <index>/_mapping`` response.

    The response is keyed by the concrete index name (which differs when
    ``index_name`` is an alias), so the single entry is taken whatever its key.
    """
    entry = mapping_response.get(index_name)
    if entry is None and len(mapping_response) == 1:
        entry = next(iter(mapping_response.values()))
    mappings: Mapping[str, Any] = (entry or {}).get("mappings", {})
    properties = mappings.get("properties", {})
    vector = properties.get(EMBEDDING)
    meta = mappings.get("_meta", {}).get(META_KEY, {})
    generations = all(name in properties for name in RECORD_PROPERTIES)
    analysis = meta.get("analysis")
    pairs = METADATA_TERMS in properties
    recorded = meta.get("records")
    record_fields = recorded if isinstance(recorded, str) else None
    if not isinstance(vector, Mapping):
        return IndexLayout(
            None,
            meta.get("embedding_model"),
            None,
            None,
            generations,
            analysis,
            metadata_pairs=pairs,
            records=record_fields,
        )
    method = vector.get("method", {})
    dimension = vector.get("dimension")
    parameters = method.get("parameters") or {}
    m, ef_construction = parameters.get("m"), parameters.get("ef_construction")
    return IndexLayout(
        vector_dimensions=int(dimension) if dimension is not None else None,
        embedding_model=meta.get("embedding_model"),
        vector_engine=method.get("engine"),
        space_type=method.get("space_type"),
        has_generations=generations,
        analysis=analysis,
        hnsw_m=int(m) if m is not None else None,
        hnsw_ef_construction=int(ef_construction) if ef_construction is not None else None,
        metadata_pairs=pairs,
        records=record_fields,
    )


def check_layout(
    layout: IndexLayout,
    index_name: str,
    *,
    vector_dimensions: int | None,
    embedding_model: str | None,
) -> None:
    """Raise ``AnalysisMismatchError`` if the index's keyword terms were analysed otherwise
    than ``knowledge.ranking.analysis.ANALYSIS``; ``EmbeddingMismatchError`` if it cannot hold this
    store's vectors.

    A keyword-only store (``vector_dimensions=None``) may use any index for reading;
    whether it may write to a vector index is decided by the caller (see
    ``check_writable``).
    """
    if layout.analysis != ANALYSIS:
        built = (
            f"the keyword analysis '{layout.analysis}'"
            if layout.analysis
            else "the standard analyzer of versions that recorded no analysis"
        )
        raise AnalysisMismatchError(
            f"index '{index_name}' was built with {built}; this version analyses text as "
            f"'{ANALYSIS}', so keyword searches would miss: reindex into a fresh index "
            "(another index name) and switch over to it"
        )
    if layout.records != RECORDS:
        raise RecordsMismatchError(
            f"index '{index_name}' was written before its records carried their origin and "
            f"format ({RECORDS}), so filters on them would miss: reindex into a fresh index "
            "(another index name) and switch over to it"
        )
    if vector_dimensions is None:
        return
    if layout.vector_dimensions is None:
        raise EmbeddingMismatchError(
            f"index '{index_name}' has no vector field (it was created without an embedder); "
            f"the embedder '{embedding_model}' cannot add {vector_dimensions}-dimension vectors "
            "to it: use another index name or reindex into a fresh index"
        )
    if layout.vector_dimensions != vector_dimensions:
        raise EmbeddingMismatchError(
            f"index '{index_name}' stores {layout.vector_dimensions}-dimension vectors"
            + (f" from '{layout.embedding_model}'" if layout.embedding_model else "")
            + f", but the embedder '{embedding_model}' produces {vector_dimensions}: "
            "use the same embedder, another index name, or reindex into a fresh index"
        )
    if layout.embedding_model and embedding_model and layout.embedding_model != embedding_model:
        raise EmbeddingMismatchError(
            f"index '{index_name}' was built with the embedder '{layout.embedding_model}', "
            f"not '{embedding_model}' (same dimension, different vectors): use the same "
            "embedder, another index name, or reindex into a fresh index"
        )
    if layout.space_type is not None and layout.space_type != "cosinesimil":
        raise EmbeddingMismatchError(
            f"index '{index_name}' compares vectors with '{layout.space_type}', not "
            "'cosinesimil': scores would not be in [0, 1]; use another index name"
        )


def is_zero_vector(vector: Sequence[float]) -> bool:
    """A vector with no direction (an embedding of text without terms).

    Cosine similarity is undefined for it and the k-NN plugin rejects it, so such a
    chunk is stored without a vector and such a query has no vector side.
    """
    return not any(math.isfinite(x) and x != 0.0 for x in vector)
