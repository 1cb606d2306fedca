"""The OpenSearch test harness itself: health, lucene k-NN with an efficient filter."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]


def _call(method: str, url: str, body=None, *, ndjson: bool = False):
    data = None
    headers = {}
    if body is not None:
        if ndjson:
            data = "".join(json.dumps(line) + "\n" for line in body).encode("utf-8")
            headers["Content-Type"] = "application/x-ndjson"
        else:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode("utf-8") or "{}")


@pytest.fixture
def index(opensearch_url):
    name = f"kb-harness-{uuid.uuid4().hex[:12]}"
    status, body = _call(
        "PUT",
        f"{opensearch_url}/{name}",
        {
            "settings": {
                "index": {"knn": True, "number_of_shards": 1, "number_of_replicas": 0},
                "analysis": {
                    "analyzer": {
                        "cjk_text": {
                            "type": "custom",
                            "tokenizer": "standard",
                            "filter": ["cjk_width", "lowercase", "cjk_bigram"],
                        }
                    }
                },
            },
            "mappings": {
                "properties": {
                    "agent": {"type": "keyword"},
                    "context": {"type": "keyword"},
                    "content": {"type": "text", "analyzer": "cjk_text"},
                    "embedding": {
                        "type": "knn_vector",
                        "dimension": 3,
                        "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
                    },
                }
            },
        },
    )
    assert status == 200, body
    yield f"{opensearch_url}/{name}"
    _call("DELETE", f"{opensearch_url}/{name}")


def test_node_is_healthy(opensearch_url):
    status, health = _call("GET", f"{opensearch_url}/_cluster/health")
    assert status == 200
    assert health["status"] in ("green", "yellow")
    _, info = _call("GET", opensearch_url)
    assert info["version"]["number"].startswith("2.19")


def test_lucene_knn_with_filter_and_delete_by_query(index):
    docs = [
        ("1", "a1", "c1", [1.0, 0.0, 0.0], "서버리스 검색 엔진"),
        ("2", "a1", "c1", [0.0, 1.0, 0.0], "지식 저장소"),
        ("3", "a2", "c1", [1.0, 0.01, 0.0], "other agent, nearest vector"),
        ("4", "a1", "c2", [0.9, 0.1, 0.0], "other context"),
    ]
    lines = []
    for doc_id, agent, context, vector, content in docs:
        lines.append({"index": {"_id": doc_id}})
        lines.append({"agent": agent, "context": context, "embedding": vector, "content": content})
    status, bulk = _call("POST", f"{index}/_bulk?refresh=true", lines, ndjson=True)
    assert status == 200, bulk
    assert not bulk["errors"], bulk

    scope = {"bool": {"filter": [{"term": {"agent": "a1"}}, {"term": {"context": "c1"}}]}}
    status, res = _call(
        "POST",
        f"{index}/_search",
        {
            "size": 10,
            "query": {"knn": {"embedding": {"vector": [1.0, 0.0, 0.0], "k": 10, "filter": scope}}},
        },
    )
    assert status == 200, res
    hits = [h["_id"] for h in res["hits"]["hits"]]
    assert hits == ["1", "2"]  # doc 3 is nearer but outside the scope
    assert res["hits"]["hits"][0]["_score"] == pytest.approx(1.0)

    # CJK bigrams from analysis-common: "검색" matches inside "서버리스 검색 엔진".
    status, res = _call("POST", f"{index}/_search", {"query": {"match": {"content": "검색"}}})
    assert status == 200, res
    assert [h["_id"] for h in res["hits"]["hits"]] == ["1"]

    # _delete_by_query needs the reindex module.
    status, res = _call("POST", f"{index}/_delete_by_query?refresh=true", {"query": scope})
    assert status == 200, res
    assert res["deleted"] == 2
    _, count = _call("GET", f"{index}/_count")
    assert count["count"] == 2
