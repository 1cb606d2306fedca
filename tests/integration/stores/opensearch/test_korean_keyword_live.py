"""Korean keyword search in both stores, the embedded one and the real OpenSearch node:
the same ranking (analysis version 5: one field of ``keyword_terms`` in each), and text
that mixes Hangul with Latin, digits, Hanja and code found by its parts."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opensearch_index import http_json

from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import upsert_document
from knowledge.stores.embedded import EmbeddedKnowledgeStore
from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore
from knowledge.stores.protocol import KnowledgeStore

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

SCOPE = KnowledgeScope("agent", "ko")

# A partly translated manual: an English page naming two Korean UI words once, a Korean
# page, two other Korean pages. On analysis version 4 the node held each page's Korean
# terms in a field of their own (the English page's two made a very short one), and
# ranked these pages in another order than the embedded store.
MANUAL = {
    "en.txt": "The selection tools let you pick a part of the image. Click and drag on the "
    "canvas, then release the mouse button. Hold Shift to add to the current selection. "
    "참고: 선택 도구",
    "ko.txt": "선택 도구는 이미지의 일부분을 골라 작업할 수 있게 합니다. 영역을 만든 뒤 그 "
    "안에서만 필터와 색 조정이 적용됩니다. 사각형, 타원, 자유 모양이 있으며 옵션 대화 "
    "상자에서 모드와 경계 부드럽게 하기를 고를 수 있습니다. 바꾸려면 상자를 씁니다. "
    "레이어와 채널 대화 상자도 함께 씁니다.",
    "layers.txt": "레이어 대화 상자에서 새 레이어를 만들고 순서를 바꿉니다. 도구 상자와는 다른 "
    "창입니다.",
    "paths.txt": "경로 도구로 곡선을 그린 뒤 선택 영역으로 바꿀 수 있습니다.",
}

MIXED = {
    "k8s.md": "k8s배포 절차: kubectl apply로 새 버전을 올립니다.",
    "copy.md": "텍스트를 복사하려면 Ctrl+C를 누르고 붙여넣기는 Ctrl+V로 합니다.",
    "pg.md": "PostgreSQL의 설정 파일은 postgresql.conf이며 재시작하면 적용됩니다.",
    "hanja.md": "韓國語 문서와 漢字 표기를 함께 처리하는 방법입니다.",
    "code.md": "```\nsudo systemctl restart nginx\n```\n\n위 명령으로 웹 서버를 재시작합니다.",
    "other.md": "리눅스 커널을 새로 빌드하고 부트로더를 갱신하는 절차입니다.",
}


Opened = tuple[KnowledgeStore, Callable[[], object]]  # a store, and "make writes searchable"


def _open(kind: str, folder: Path, request: pytest.FixtureRequest) -> Iterator[Opened]:
    if kind == "embedded":
        store: KnowledgeStore = EmbeddedKnowledgeStore(
            folder / "kb.db", embedder=HashingEmbedder(16)
        )
        yield store, lambda: None
        store.close()
        return
    url = request.getfixturevalue("opensearch_url")
    name = f"test_{uuid.uuid4().hex}"
    config = OpenSearchConfig(url=url, index_name=name, number_of_shards=1, number_of_replicas=0)
    store = OpenSearchKnowledgeStore(config, embedder=HashingEmbedder(16))
    yield store, lambda: http_json("POST", f"{url}/{name}/_refresh")
    store.close()
    http_json("DELETE", f"{url}/{name}")


@pytest.fixture(scope="module", params=["embedded", "opensearch"])
def mixed_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KnowledgeStore]:
    """One store per kind holding ``MIXED``, shared by the mixed-script cases."""
    for store, refresh in _open(request.param, tmp_path_factory.mktemp("mixed"), request):
        _index(store, MIXED)
        refresh()
        yield store


def _index(store: KnowledgeStore, texts: dict[str, str]) -> None:
    for path, text in texts.items():
        data = text.encode("utf-8")
        document = SourceDocument(path=path, size=len(data), read=lambda data=data: data)
        assert upsert_document(store, SCOPE, document).indexed_documents == 1


def _found(store: KnowledgeStore, query: str) -> list[str]:
    hits = store.search(SCOPE, SearchQuery(query, mode="keyword"))
    return list(dict.fromkeys(hit.document_path for hit in hits))


def test_both_stores_rank_a_korean_query_alike(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    rankings = {}
    for kind in ("embedded", "opensearch"):
        (tmp_path / kind).mkdir()
        for store, refresh in _open(kind, tmp_path / kind, request):
            _index(store, MANUAL)
            refresh()
            rankings[kind] = _found(store, "선택 도구")
    assert rankings["embedded"] == ["paths.txt", "en.txt", "ko.txt", "layers.txt"]
    assert rankings["opensearch"] == rankings["embedded"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("k8s배포", "k8s.md"),  # Latin+digits glued to Hangul
        ("k8s 배포 절차", "k8s.md"),  # the same words written apart
        ("Ctrl+C로 복사", "copy.md"),  # a key chord with a particle
        ("PostgreSQL의 설정", "pg.md"),  # a product name with a particle
        ("postgresql 설정 파일", "pg.md"),
        ("韓國語", "hanja.md"),  # Hanja (bigrams)
        ("漢字 표기", "hanja.md"),
        ("systemctl restart nginx", "code.md"),  # code inside a Korean page
        ("nginx 재시작", "code.md"),
    ],
)
def test_mixed_script_text_is_found_by_its_parts(
    mixed_store: KnowledgeStore, query: str, expected: str
) -> None:
    assert _found(mixed_store, query)[0] == expected
