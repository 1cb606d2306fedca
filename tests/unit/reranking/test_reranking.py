"""knowledge.reranking (issue 11, step 7): the Bedrock ``Rerank`` client against a fake
endpoint on 127.0.0.1 (``fake_rerank``: boto3 signs and sends for real, the fake checks the
body), and the stage that reranks a search's top candidates or falls back to the search
order when the reranker fails or is late."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fake_rerank import FakeRerankServer, fake_rerank_server

from knowledge.core.deadline import time_budget
from knowledge.core.errors import ValidationError
from knowledge.core.model import SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import upsert_document
from knowledge.reranking import Reranker, RerankError, RerankingStage
from knowledge.reranking.bedrock import BedrockReranker, model_arn
from knowledge.service.api import KnowledgeApi
from knowledge.stores.memory import MemoryKnowledgeStore

REGION = "us-west-2"
MODEL = "amazon.rerank-v1:0"
ARN = f"arn:aws:bedrock:{REGION}::foundation-model/{MODEL}"
SCOPE = KnowledgeScope("ops-bot", "runbooks")
SEARCH = "/v1/agents/ops-bot/contexts/runbooks/search"

# Keyword order for "disk full" puts the short, repetitive pages first; the fake reranker
# (explicit scores below) prefers the page that answers the question.
DOCUMENTS = {
    "a.md": "disk disk disk full full",
    "b.md": "disk full alarm: how to free space on the volume and stop the disk filling up",
    "c.md": "the disk is full when df shows 100 percent; delete old logs",
    "d.md": "disk quota notes",
    "e.md": "full moon schedule",
}
RERANK_SCORES = {"c.md": 0.9, "b.md": 0.8, "a.md": 0.1, "d.md": 0.05, "e.md": 0.01}


def score_by_document(_query: str, text: str) -> float:
    for path, content in DOCUMENTS.items():
        if text == content:
            return RERANK_SCORES[path]
    raise AssertionError(f"unexpected passage {text!r}")


@pytest.fixture(autouse=True)
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret-example",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


@pytest.fixture
def store() -> Iterator[MemoryKnowledgeStore]:
    store = MemoryKnowledgeStore()
    for path, text in DOCUMENTS.items():
        data = text.encode()
        upsert_document(store, SCOPE, SourceDocument(path, len(data), lambda d=data: d))
    yield store
    store.close()


def keyword_order(store: MemoryKnowledgeStore, text: str = "disk full") -> list[str]:
    """Every candidate in the search's order (min_score 0: the weak ones too)."""
    query = SearchQuery(text, mode=SearchMode.KEYWORD, max_results=10, min_score=0.0)
    return [r.document_path for r in store.search(SCOPE, query)]


# --- BedrockReranker against the fake endpoint ---------------------------------------------


def test_is_a_reranker() -> None:
    assert isinstance(BedrockReranker(MODEL, region=REGION), Reranker)
    assert BedrockReranker(MODEL).name == "bedrock:amazon.rerank-v1:0"


def test_sends_a_signed_rerank_request_and_returns_scores_in_passage_order() -> None:
    passages = ["the cat sat", "a disk is full", "disk full alarm fires"]
    with fake_rerank_server(ARN) as fake:
        reranker = BedrockReranker(MODEL, region=REGION, endpoint_url=fake.url)
        scores = reranker.rerank("disk full alarm", passages)
    assert fake.problems == []
    # word_overlap of "disk full alarm": 0/3, 2/3, 3/3, back in the order sent
    assert scores == pytest.approx([0.0, 2 / 3, 1.0])
    (sent,) = fake.requests
    assert sent["queries"] == [{"type": "TEXT", "textQuery": {"text": "disk full alarm"}}]
    assert [s["inlineDocumentSource"]["textDocument"]["text"] for s in sent["sources"]] == passages


def test_cohere_model_and_a_full_arn_are_named_as_given() -> None:
    cohere = "arn:aws:bedrock:eu-central-1::foundation-model/cohere.rerank-v3-5:0"
    with fake_rerank_server(cohere) as fake:
        BedrockReranker(cohere, region=REGION, endpoint_url=fake.url).rerank("q", ["q"])
    assert fake.problems == []
    assert model_arn("cohere.rerank-v3-5:0", partition="aws-cn", region="cn-north-1") == (
        "arn:aws-cn:bedrock:cn-north-1::foundation-model/cohere.rerank-v3-5:0"
    )


def test_a_long_passage_is_cut_to_the_api_limit() -> None:
    with fake_rerank_server(ARN) as fake:
        BedrockReranker(MODEL, region=REGION, endpoint_url=fake.url).rerank("x", ["x" * 40_000])
    assert fake.problems == []
    sent = fake.requests[0]["sources"][0]["inlineDocumentSource"]["textDocument"]["text"]
    assert len(sent) == 32_000


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (429, "ThrottlingException"),
        (403, "AccessDeniedException"),
        (500, "InternalServerException"),
        (400, "ValidationException"),
    ],
)
def test_an_error_answer_is_a_rerank_error_after_one_call(status: int, error_type: str) -> None:
    with fake_rerank_server(ARN, fail_with=(status, error_type)) as fake:
        reranker = BedrockReranker(MODEL, region=REGION, endpoint_url=fake.url)
        with pytest.raises(RerankError, match=error_type):
            reranker.rerank("q", ["a", "b"])
    assert len(fake.requests) == 1  # no retries: a late reranker is skipped, not waited for


def test_a_result_missing_from_the_answer_is_a_rerank_error() -> None:
    with fake_rerank_server(ARN, drop_last=True) as fake:
        reranker = BedrockReranker(MODEL, region=REGION, endpoint_url=fake.url)
        with pytest.raises(RerankError, match="scored 1 of 2"):
            reranker.rerank("q", ["a", "b"])


def test_nothing_to_rerank_sends_nothing() -> None:
    with fake_rerank_server(ARN) as fake:
        assert BedrockReranker(MODEL, region=REGION, endpoint_url=fake.url).rerank("q", []) == []
    assert fake.requests == []


@pytest.mark.parametrize(
    ("options", "field"),
    [({"model_id": " "}, "rerank_model"), ({"timeout": 0}, "rerank_timeout")],
)
def test_bad_reranker_settings_name_the_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        BedrockReranker(**options)
    assert caught.value.field == field


# --- the stage through the API --------------------------------------------------------------


def api_with(fake: FakeRerankServer, store: MemoryKnowledgeStore, **stage: Any) -> KnowledgeApi:
    reranker = BedrockReranker(MODEL, region=REGION, endpoint_url=fake.url)
    return KnowledgeApi(store, reranking=RerankingStage(reranker, **stage))


def search(api: KnowledgeApi, **body: Any) -> dict[str, Any]:
    # min_score 0 unless given: every candidate, as keyword_order lists them.
    request = {"query": "disk full", "min_score": 0.0, **body}
    response = api.handle("POST", SEARCH, json.dumps(request))
    assert response.status == 200, response.body
    return response.body


def test_the_top_candidates_are_reranked_and_say_so(store: MemoryKnowledgeStore) -> None:
    before = keyword_order(store)
    assert before[:3] != ["c.md", "b.md", "a.md"]  # the reranker has something to change
    with fake_rerank_server(ARN, score_of=score_by_document) as fake:
        body = search(api_with(fake, store), mode="keyword", max_results=3)
    assert fake.problems == []
    results = body["results"]
    assert [r["document_path"] for r in results] == ["c.md", "b.md", "a.md"]
    assert [r["rank_score"] for r in results] == [0.9, 0.8, 0.1]
    assert [r["rerank_score"] for r in results] == [0.9, 0.8, 0.1]
    everything = SearchQuery("disk full", mode="keyword", max_results=10, min_score=0.0)
    plain = {r.document_path: r for r in store.search(SCOPE, everything)}
    for result in results:  # the search's own scores stay visible
        assert result["search_score"] == pytest.approx(plain[result["document_path"]].rank_score)
        # The absolute relevance is the search's: the reranker orders, it does not judge.
        assert result["score"] == pytest.approx(plain[result["document_path"]].score)
        assert result["keyword_score"] == pytest.approx(
            plain[result["document_path"]].keyword_score
        )
        assert result["vector_score"] is None
    rerank = body["rerank"]
    assert rerank["reranker"] == "bedrock:amazon.rerank-v1:0"
    assert (rerank["reranked"], rerank["candidates"], rerank["reason"]) == (True, len(before), None)


def test_only_the_top_n_are_sent_and_the_rest_follow_in_search_order(
    store: MemoryKnowledgeStore,
) -> None:
    before = keyword_order(store)
    with fake_rerank_server(ARN, score_of=score_by_document) as fake:
        body = search(api_with(fake, store, top_n=2), mode="keyword", max_results=10)
    (sent,) = fake.requests
    sent_texts = [s["inlineDocumentSource"]["textDocument"]["text"] for s in sent["sources"]]
    assert sent_texts == [DOCUMENTS[p] for p in before[:2]]
    results = body["results"]
    head = sorted(before[:2], key=lambda p: -RERANK_SCORES[p])
    assert [r["document_path"] for r in results] == head + before[2:]
    assert [r["rerank_score"] is None for r in results] == [False, False] + [True] * (
        len(before) - 2
    )
    scores = [r["rank_score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    lowest = min(RERANK_SCORES[p] for p in before[:2])
    assert all(r["rank_score"] <= lowest for r in results[2:])


def test_pages_are_slices_of_one_reranked_order(store: MemoryKnowledgeStore) -> None:
    with fake_rerank_server(ARN, score_of=score_by_document) as fake:
        api = api_with(fake, store)
        whole = [r["document_path"] for r in search(api, mode="keyword", max_results=4)["results"]]
        pages = [
            r["document_path"]
            for offset in (0, 2)
            for r in search(api, mode="keyword", max_results=2, offset=offset)["results"]
        ]
    assert pages == whole == ["c.md", "b.md", "a.md", "d.md"]


def test_min_score_applies_to_the_absolute_score_in_the_reranked_order(
    store: MemoryKnowledgeStore,
) -> None:
    with fake_rerank_server(ARN, score_of=score_by_document) as fake:
        api = api_with(fake, store)
        every = search(api, mode="keyword", max_results=10)["results"]
        assert [r["document_path"] for r in every] == ["c.md", "b.md", "a.md", "d.md", "e.md"]
        # a, b and c hold both terms, d and e one: a floor between the two keeps three,
        # although the reranker scores a.md below the floor (0.1).
        both = [r["score"] for r in every[:3]]
        one = [r["score"] for r in every[3:]]
        floor = (min(both) + max(one)) / 2
        assert max(one) < floor <= min(both)
        body = search(api, mode="keyword", max_results=10, min_score=floor)
    kept = body["results"]
    assert [r["document_path"] for r in kept] == ["c.md", "b.md", "a.md"]  # reranked order
    assert all(r["score"] >= floor for r in kept)
    assert kept[2]["rerank_score"] == 0.1


@pytest.mark.parametrize(
    "fail_with", [(500, "InternalServerException"), (403, "AccessDeniedException")]
)
def test_a_failing_reranker_leaves_the_search_order_and_is_logged(
    store: MemoryKnowledgeStore, fail_with: tuple[int, str], caplog: pytest.LogCaptureFixture
) -> None:
    before = keyword_order(store)
    with (
        caplog.at_level(logging.WARNING, logger="knowledge.reranking"),
        fake_rerank_server(ARN, fail_with=fail_with) as fake,
    ):
        body = search(api_with(fake, store), mode="keyword", max_results=10)
    assert [r["document_path"] for r in body["results"]] == before
    assert all("rerank_score" not in r for r in body["results"])
    assert body["rerank"]["reranked"] is False
    assert body["rerank"]["reason"] == "failed"
    assert fail_with[1] not in json.dumps(body)  # the details are logged, not answered
    assert any(fail_with[1] in r.getMessage() for r in caplog.records)


def _received(fake: FakeRerankServer, count: int) -> bool:
    """Wait (a condition, not a time) until the fake has received ``count`` requests."""
    deadline = time.monotonic() + 60
    while len(fake.requests) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return len(fake.requests) == count


def test_a_late_reranker_is_not_waited_for(store: MemoryKnowledgeStore) -> None:
    before = keyword_order(store)
    release = threading.Event()
    release.set()
    with fake_rerank_server(ARN, hold=release) as fake:
        reranker = BedrockReranker(MODEL, region=REGION, endpoint_url=fake.url)
        # A first search, in no hurry, makes the reranker's client (boto3 loading its
        # models can take longer than 0.3 s under load): the timed call is the request.
        unhurried = KnowledgeApi(store, reranking=RerankingStage(reranker, timeout=60))
        assert search(unhurried, mode="keyword", max_results=10)["rerank"]["reranked"]
        assert _received(fake, 1)
        release.clear()
        api = KnowledgeApi(store, reranking=RerankingStage(reranker, timeout=0.3))
        body = search(api, mode="keyword", max_results=10)
        # The search answered while the fake held its request; it reaches the fake, once.
        assert _received(fake, 2)
        release.set()  # only now may the fake answer: the search had given up already
    assert [r["document_path"] for r in body["results"]] == before
    assert (body["rerank"]["reranked"], body["rerank"]["reason"]) == (False, "timeout")
    assert len(fake.requests) == 2


def test_no_rerank_call_once_the_requests_deadline_has_passed(store: MemoryKnowledgeStore) -> None:
    before = keyword_order(store)
    with fake_rerank_server(ARN) as fake:
        api = api_with(fake, store)
        with time_budget(0.0):
            body = search(api, mode="keyword", max_results=10)
    assert [r["document_path"] for r in body["results"]] == before
    assert (body["rerank"]["reranked"], body["rerank"]["reason"]) == (False, "no time left")
    assert fake.requests == []


def test_no_match_sends_nothing(store: MemoryKnowledgeStore) -> None:
    with fake_rerank_server(ARN) as fake:
        body = search(api_with(fake, store), query="zebra", mode="keyword")
    assert body["results"] == []
    assert (body["rerank"]["reranked"], body["rerank"]["reason"]) == (False, "no candidates")
    assert fake.requests == []


def test_without_a_reranker_the_response_is_unchanged(store: MemoryKnowledgeStore) -> None:
    body = KnowledgeApi(store).handle("POST", SEARCH, json.dumps({"query": "disk full"})).body
    assert set(body) == {"query", "mode", "min_score", "evidence", "results", "took_ms"}
    assert all("rerank_score" not in r and "search_score" not in r for r in body["results"])


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"top_n": 0}, "rerank_top_n"),
        ({"top_n": 101}, "rerank_top_n"),
        ({"top_n": True}, "rerank_top_n"),
        ({"timeout": 0}, "rerank_timeout"),
        ({"timeout": float("nan")}, "rerank_timeout"),
    ],
)
def test_bad_stage_settings_name_the_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RerankingStage(BedrockReranker(MODEL), **options)
    assert caught.value.field == field


def test_explain_shows_the_rerank_moves_and_still_recomputes_every_score(
    store: MemoryKnowledgeStore,
) -> None:
    from knowledge.ranking import explain

    with fake_rerank_server(ARN, score_of=score_by_document) as fake:
        body = search(api_with(fake, store, top_n=2), mode="keyword", max_results=4, explain=True)
    trace = body["explain"]
    assert trace["rerank"]["reranked"] is True
    assert [m["to_rank"] for m in trace["rerank"]["moves"]] == [1, 2]
    for index, result in enumerate(body["results"]):
        entry = trace["results"][index]
        assert entry["rerank"]["to_rank"] == index + 1
        assert explain.recompute(result, trace, index) == pytest.approx(
            result["rank_score"], abs=2e-6
        )
        assert explain.recompute_relevance(trace, index) == pytest.approx(result["score"], abs=2e-6)
    assert trace["results"][2]["rerank"]["rerank_score"] is None  # past top_n


def test_a_lesson_card_past_a_reranked_page_is_appended(store: MemoryKnowledgeStore) -> None:
    data = b"lesson: when the disk is full, page the storage team"
    upsert_document(
        store,
        SCOPE,
        SourceDocument("z-lesson.md", len(data), lambda: data, metadata={"kind": "lesson"}),
    )
    scores = {**RERANK_SCORES, "z-lesson.md": 0.02}

    def score(_query: str, text: str) -> float:
        if text == data.decode():
            return scores["z-lesson.md"]
        return score_by_document(_query, text)

    with fake_rerank_server(ARN, score_of=score) as fake:
        body = search(api_with(fake, store), mode="keyword", max_results=2)
        grouped = search(api_with(fake, store), mode="keyword", max_results=2, group_by="document")
    results = body["results"]
    assert [r["document_path"] for r in results] == ["c.md", "b.md", "z-lesson.md"]
    assert [r.get("extra", False) for r in results] == [False, False, True]
    # A page of documents gets no extras (ranking.weighted_page), reranked or not.
    assert [r["document_path"] for r in grouped["results"]] == ["c.md", "b.md"]


def test_the_stages_that_kb_and_the_search_function_build_make_their_client_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reranker's boto3 client is made when the stage is built, not inside the first
    search's rerank time limit (3 s), which a cold ``boto3`` on a loaded machine used up
    by itself (1.6 s to make the client, 6-8 s with the import, at load 19 on 2 cores):
    ``kb search --rerank-model`` then answered in search order. Seen through botocore's
    own ``creating-client-class`` event on a session of the test's."""
    import boto3

    from knowledge.aws.settings import LambdaSettings, build_reranking
    from knowledge.config import open_reranking

    session = boto3.Session(region_name=REGION)
    made: list[str] = []
    session.events.register(
        "creating-client-class.bedrock-agent-runtime", lambda **_: made.append("client")
    )
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", session)
    assert open_reranking(MODEL, environ={}) is not None
    assert made == ["client"]
    assert build_reranking(LambdaSettings.from_env({"RERANK_MODEL_ID": MODEL})) is not None
    assert made == ["client", "client"]
