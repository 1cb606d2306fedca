"""On the real node a chunk's keyword field holds exactly
``knowledge.ranking.analysis.keyword_terms``
of its text and ``heading_terms`` of its title and headings (sent pre-analysed in
``content_terms``, analysis version 5), so both stores count the same terms in one field;
an index of another analysis is refused (never mixed)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from opensearch_index import http_json

from knowledge.core.errors import AnalysisMismatchError, RecordsMismatchError
from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import upsert_document
from knowledge.ranking.analysis import KOREAN_MORPHEMES, keyword_terms
from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore
from knowledge.stores.opensearch.mapping import index_body

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

SCOPE = KnowledgeScope("agent", "ctx")

# English prose, commands, identifiers, possessives, digits, accents; Korean with
# English, digits and Latin+Hangul words; Japanese.
SAMPLES = (
    "How do I configure the running processes? The installer detected two interfaces.",
    "Debian's packages: dpkg-reconfigure, apt_get, /etc/apt/sources.list and IPv6 (2001:db8::1)",
    "Généreusement configured caches; the daemon's PID-files were removed at boot-time.",
    "It isn't what they'd have wanted: don't, won't, shouldn't, we've, you'll.",
    "ext4 filesystems, x86_64 kernels, utf-8 locales, and 10,000 files per directory",
    "데비안은 자유 운영체제입니다. 패키지를 설치했습니다.",
    "배포실패 시 k8s배포 설정을 되돌린다 (rollback the deployments).",
    "리눅스 커널 2.6 버전에서 ext4 파일시스템을 지원하나요? 東京の設定",
)


@pytest.fixture
def index(opensearch_url: str) -> Iterator[str]:
    name = f"test_{uuid.uuid4().hex}"
    yield name
    http_json("DELETE", f"{opensearch_url}/{name}")


def _store(url: str, index: str) -> OpenSearchKnowledgeStore:
    config = OpenSearchConfig(url=url, index_name=index, number_of_shards=1, number_of_replicas=0)
    return OpenSearchKnowledgeStore(config, embedder=HashingEmbedder(16))


def _keyword_paths(opensearch_url: str, index: str, texts: dict[str, str], query: str) -> list[str]:
    """Index ``texts`` (path -> text) through the store, refresh, and return the paths a
    keyword search for ``query`` finds, best first."""
    store = _store(opensearch_url, index)
    try:
        for path, text in texts.items():
            data = text.encode("utf-8")
            document = SourceDocument(path=path, size=len(data), read=lambda data=data: data)
            assert upsert_document(store, SCOPE, document).indexed_documents == 1
        http_json("POST", f"{opensearch_url}/{index}/_refresh")
        return [r.document_path for r in store.search(SCOPE, SearchQuery(query, mode="keyword"))]
    finally:
        store.close()


def test_keyword_search_on_the_node_matches_other_inflections(
    opensearch_url: str, index: str
) -> None:
    texts = {
        "net.md": "The installer detected two network interfaces.",
        "bread.md": "Bread rises in a warm kitchen.",
    }
    found = _keyword_paths(opensearch_url, index, texts, "detecting an interface")
    assert found == ["net.md"]


def test_an_index_made_before_analyses_were_recorded_is_refused(
    opensearch_url: str, index: str
) -> None:
    # The mapping of the previous version: no "analysis" in _meta, the standard analyzer.
    body = index_body(vector_dimensions=16, embedding_model="hashing")
    del body["mappings"]["_meta"]["knowledge"]["analysis"]
    body["mappings"]["properties"]["content"]["analyzer"] = "standard"
    status, answer = http_json("PUT", f"{opensearch_url}/{index}", body)
    assert status == 200, answer
    store = _store(opensearch_url, index)
    try:
        with pytest.raises(AnalysisMismatchError, match="reindex into a fresh index"):
            store.search(SCOPE, SearchQuery("anything", mode="keyword"))
    finally:
        store.close()


def test_an_index_written_before_origins_is_refused_for_reads_and_writes(
    opensearch_url: str, index: str
) -> None:
    # The mapping of the previous version: no "records" in _meta (its chunks carry
    # source_type, no origin/format), so filters on origin or format would miss.
    body = index_body(vector_dimensions=16, embedding_model="hashing")
    del body["mappings"]["_meta"]["knowledge"]["records"]
    status, answer = http_json("PUT", f"{opensearch_url}/{index}", body)
    assert status == 200, answer
    store = _store(opensearch_url, index)
    try:
        with pytest.raises(RecordsMismatchError, match="origin and format"):
            store.search(SCOPE, SearchQuery("anything", mode="keyword"))
        data = b"# a\n\ntext"
        document = SourceDocument(path="a.md", size=len(data), read=lambda: data)
        with pytest.raises(RecordsMismatchError, match="reindex into a fresh index"):
            upsert_document(store, SCOPE, document)
    finally:
        store.close()
    status, answer = http_json("GET", f"{opensearch_url}/{index}/_count")
    assert (status, answer.get("count")) == (200, 0)  # nothing was written to it


def _chunk_terms(url: str, index: str, chunk_index: int = 0) -> Counter[str]:
    """The terms the node indexed in ``content_terms`` for one chunk, with their counts."""
    status, found = http_json(
        "POST", f"{url}/{index}/_search", {"query": {"term": {"chunk_index": chunk_index}}}
    )
    assert status == 200, found
    (hit,) = found["hits"]["hits"]
    status, vectors = http_json(
        "POST",
        f"{url}/{index}/_termvectors/{hit['_id']}",
        {"fields": ["content_terms"], "term_statistics": False, "field_statistics": False},
    )
    assert status == 200, vectors
    terms = vectors["term_vectors"].get("content_terms", {}).get("terms", {})
    return Counter({term: info["term_freq"] for term, info in terms.items()})


@pytest.mark.parametrize("text", SAMPLES)
def test_the_node_indexes_the_terms_of_keyword_terms(
    opensearch_url: str, index: str, text: str
) -> None:
    store = _store(opensearch_url, index)
    try:
        data = text.encode("utf-8")
        document = SourceDocument(path="t.txt", size=len(data), read=lambda: data)
        assert upsert_document(store, SCOPE, document).indexed_documents == 1
    finally:
        store.close()
    http_json("POST", f"{opensearch_url}/{index}/_refresh")
    # Term for term, as the embedded store's FTS5 row holds them (a .txt has no headings).
    assert _chunk_terms(opensearch_url, index) == Counter(keyword_terms(text))


def test_a_korean_query_finds_its_morphemes_on_the_node(opensearch_url: str, index: str) -> None:
    texts = {"debian.md": "데비안 패키지를 설치했습니다.", "box.md": "상자 안은 조용하다."}
    found = _keyword_paths(opensearch_url, index, texts, "데비안은 패키지 설치하는 법")
    assert found == ["debian.md"]


def test_an_index_of_the_bigram_analysis_is_refused(opensearch_url: str, index: str) -> None:
    # The mapping of the previous version: Hangul as bigrams, "english-snowball-v2".
    body = index_body(vector_dimensions=16, embedding_model="hashing")
    body["mappings"]["_meta"]["knowledge"]["analysis"] = "english-snowball-v2"
    body["mappings"]["properties"].pop("content_terms", None)
    status, answer = http_json("PUT", f"{opensearch_url}/{index}", body)
    assert status == 200, answer
    store = _store(opensearch_url, index)
    try:
        with pytest.raises(AnalysisMismatchError, match="english-snowball-v2") as caught:
            store.search(SCOPE, SearchQuery("데비안", mode="keyword"))
        assert "reindex into a fresh index" in str(caught.value)
    finally:
        store.close()


PREVIOUS_ANALYSIS = (
    "english-snowball-mecab-ko-v4" if KOREAN_MORPHEMES else "english-snowball-hangul-bigrams-v4"
)


def test_an_index_of_analysis_4_is_refused(opensearch_url: str, index: str) -> None:
    # The mapping of the previous version: content analysed by the node, Korean terms and
    # headings in fields of their own, no content_terms.
    body = index_body(vector_dimensions=16, embedding_model="hashing")
    body["mappings"]["_meta"]["knowledge"]["analysis"] = PREVIOUS_ANALYSIS
    properties = body["mappings"]["properties"]
    properties.pop("content_terms")
    properties["content"] = {"type": "text"}
    for field in ("content_ko", "headings", "headings_ko"):
        properties[field] = {"type": "text", "analyzer": "whitespace"}
    status, answer = http_json("PUT", f"{opensearch_url}/{index}", body)
    assert status == 200, answer
    store = _store(opensearch_url, index)
    try:
        with pytest.raises(AnalysisMismatchError, match=PREVIOUS_ANALYSIS) as caught:
            store.search(SCOPE, SearchQuery("payments", mode="keyword"))
        assert "reindex into a fresh index" in str(caught.value)
        data = b"# Payments\n\n## Disputes\n\nAnswer with the receipt."
        document = SourceDocument(path="pay.md", size=len(data), read=lambda: data)
        with pytest.raises(AnalysisMismatchError, match=PREVIOUS_ANALYSIS):
            upsert_document(store, SCOPE, document)
    finally:
        store.close()


def test_the_node_indexes_the_heading_terms_of_keyword_terms(
    opensearch_url: str, index: str
) -> None:
    # One chunk whose title and headings mix English, Korean and Japanese: its field holds
    # the text's terms and those of its "Title > Section" line, as the FTS5 row does.
    text = "# Rolling Deployments 배포했다\n\n## 東京 Configured\n\nbody"
    store = _store(opensearch_url, index)
    try:
        data = text.encode("utf-8")
        document = SourceDocument(path="h.md", size=len(data), read=lambda: data)
        assert upsert_document(store, SCOPE, document).indexed_documents == 1
        http_json("POST", f"{opensearch_url}/{index}/_refresh")
        status, found = http_json(
            "POST", f"{opensearch_url}/{index}/_search", {"query": {"term": {"chunk_index": 1}}}
        )
        assert status == 200, found
        (hit,) = found["hits"]["hits"]
        line = "Rolling Deployments 배포했다 > 東京 Configured"
        content = hit["_source"]["content"]
        expected = Counter(keyword_terms(content)) + Counter(keyword_terms(line))
        assert _chunk_terms(opensearch_url, index, chunk_index=1) == expected
    finally:
        store.close()
