"""The absolute relevance score (``knowledge.ranking.relevance``) on every store and mode.

A question the scope cannot answer gets no results at the default floor
(``core.model.DEFAULT_MIN_SCORE``, which a search without ``min_score`` applies to its
best candidate), and every front end says so; one it can answer gets results whose best
evidence is not ``weak``; with ``min_score`` 0 the off-topic question's candidates are
all below the floor; and the score of a hit hardly moves when a thousand unrelated
documents join its scope (the term weights are computed over at least
``relevance.REFERENCE_CHUNKS`` chunks, and coverage is a share of the query's own weight).

Nothing here reads the calibration's values or the floor's: they are refitted
(``python -m bench relevance-fit``).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from knowledge.agent_tools.tool import KnowledgeSearchTool, ToolContext
from knowledge.core.model import (
    DEFAULT_MIN_SCORE,
    IndexOptions,
    SearchMode,
    SearchQuery,
    evidence_of,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.ranking import explain
from knowledge.service.api import KnowledgeApi
from knowledge.stores.protocol import KnowledgeStore

SCOPE = KnowledgeScope("ops-bot", "runbooks")

RUNBOOKS = {
    "deploy.md": (
        "# Deploy\n\nDeploy the payments service with a canary release. Watch the error "
        "rate on the dashboard, then promote the canary to production.\n"
    ),
    "rollback.md": (
        "# Rollback\n\nIf a deployment fails, roll back with helm rollback to the previous "
        "revision and page the on-call engineer.\n"
    ),
    "database.md": (
        "# Database\n\nRestore the Postgres database from the nightly backup. Check the "
        "replication lag before you promote the replica.\n"
    ),
    "release.md": (
        # "recipe": a word of the off-topic question, so that its keyword side finds
        # something to judge.
        "# Release recipe\n\nThe release recipe: build, run the tests, tag the image, "
        "deploy to staging.\n"
    ),
    "oncall.md": (
        "# On-call\n\nThe pager rotates weekly. Acknowledge an alert within five minutes "
        "and open an incident channel.\n"
    ),
}

OFF_TOPIC = "chocolate cake recipe with strawberries"
ON_TOPIC = {
    "rollback a failed deployment with helm": "rollback.md",
    "restore the database from the nightly backup": "database.md",
}
PARTLY = {
    "rollback a failed deployment with helm on kubernetes": "rollback.md",
    "restore the database from the nightly backup to a new cluster": "database.md",
}
"""On-topic questions with words the scope does not hold: their hits cover part of the
query, the share that the term weights decide (a hit covering all of it covers all of it
at any scope size)."""

COOKING = (
    "flour sugar butter oven bake whisk dough yeast knead simmer saute garlic onion basil "
    "thyme oregano pepper salt vinegar olive lemon honey cinnamon vanilla batter crust "
    "pastry skillet roast broth noodle rice bean lentil soup stew salad dressing"
)
GARDENING = (
    "garden soil compost seed sprout seedling water prune mulch trowel shovel weed hedge "
    "lawn mower tomato cucumber lettuce carrot radish potato tulip daffodil rose orchid "
    "fern ivy moss sunlight shade greenhouse pot trellis harvest bloom petal"
)
"""Words of the unrelated documents (``unrelated_documents``)."""


def unrelated_documents(count: int) -> dict[str, str]:
    """``count`` small generated documents about cooking and gardening (seeded)."""
    rng = random.Random(26)
    documents = {}
    for n in range(count):
        words = (COOKING if n % 2 else GARDENING).split()
        topic = "Kitchen" if n % 2 else "Garden"
        sentences = [
            " ".join(rng.choice(words) for _ in range(rng.randint(6, 12))).capitalize() + "."
            for _ in range(rng.randint(2, 4))
        ]
        documents[f"unrelated/{topic.lower()}-{n:04d}.md"] = (
            f"# {topic} note {n}\n\n" + " ".join(sentences) + "\n"
        )
    return documents


def index(store: KnowledgeStore, bucket: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = bucket / SCOPE.agent / SCOPE.context / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    result = index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert result.errors == (), result.errors


@pytest.fixture
def runbooks(store: KnowledgeStore, bucket: Path) -> KnowledgeStore:
    index(store, bucket, RUNBOOKS)
    return store


def search(store: KnowledgeStore, text: str, mode: SearchMode, **fields: object):
    return store.search(SCOPE, SearchQuery(text, mode=mode, max_results=20, **fields))  # type: ignore[arg-type]


def test_an_off_topic_question_gets_nothing_and_an_on_topic_one_gets_evidence(
    runbooks: KnowledgeStore, mode: SearchMode
) -> None:
    assert search(runbooks, OFF_TOPIC, mode) == []
    for text, expected in ON_TOPIC.items():
        found = search(runbooks, text, mode)
        assert found, text
        assert found[0].document_path == expected, (text, found)
        assert evidence_of(found) in ("strong", "partial"), found
        assert found[0].strength != "weak"
        # The right document is the strongest evidence as well as the first ranked.
        best = max(found, key=lambda r: r.score)
        assert best.document_path == expected
        assert best.score >= DEFAULT_MIN_SCORE
        # Past the floor the list is the ranking's: the same as with every candidate.
        assert found == search(runbooks, text, mode, min_score=0.0)


def test_with_min_score_zero_the_off_topic_candidates_all_score_below_the_floor(
    runbooks: KnowledgeStore, mode: SearchMode
) -> None:
    with explain.explaining() as trace:
        every = search(runbooks, OFF_TOPIC, mode, min_score=0.0)
    if mode is not SearchMode.VECTOR:
        assert every  # "recipe": the keyword side has a candidate to judge
    assert all(r.score < DEFAULT_MIN_SCORE for r in every), every
    assert all(r.strength == "weak" for r in every)
    body = trace.to_dict(every)
    for index, result in enumerate(every):
        recomputed = explain.recompute_relevance(body, index)
        assert recomputed == pytest.approx(result.score, abs=1e-9)
    # The same search at the default floor records why it answered nothing.
    with explain.explaining() as floored:
        assert search(runbooks, OFF_TOPIC, mode) == []
    (searched,) = floored.to_dict([])["searches"]
    relevance = searched["relevance"]
    assert relevance["min_score"] is None
    assert (relevance["evidence_floor"], relevance["abstained"]) == (DEFAULT_MIN_SCORE, True)
    assert max((r.score for r in every), default=0.0) <= relevance["best"] < DEFAULT_MIN_SCORE
    assert searched["min_score"]["dropped"] >= len(every)
    # An on-topic hit scores above every off-topic candidate.
    on_topic = search(runbooks, "rollback a failed deployment with helm", mode)
    assert all(on_topic[0].score > r.score for r in every)


def test_every_front_end_says_nothing_was_found(runbooks: KnowledgeStore, mode: SearchMode) -> None:
    api = KnowledgeApi(runbooks)
    route = f"/v1/agents/{SCOPE.agent}/contexts/{SCOPE.context}"
    searched = api.handle("POST", f"{route}/search", {"query": OFF_TOPIC, "mode": mode.value})
    assert searched.status == 200, searched.body
    assert (searched.body["results"], searched.body["evidence"]) == ([], "none")
    assert searched.body["min_score"] == DEFAULT_MIN_SCORE
    block = api.handle("POST", f"{route}/context", {"query": OFF_TOPIC, "mode": mode.value})
    assert block.status == 200, block.body
    assert (block.body["passages"], block.body["context"], block.body["evidence"]) == (
        [],
        "",
        "none",
    )
    assert block.body["note"] == f"No relevant documents found for: {OFF_TOPIC}"
    tool = KnowledgeSearchTool().run(
        {"query": OFF_TOPIC}, ToolContext(store=runbooks, scope=SCOPE, mode=mode)
    )
    assert not tool.is_error
    assert tool.content == f"No relevant documents found for: {OFF_TOPIC}"
    # The on-topic question, through the same routes: evidence named, not "none".
    text = "rollback a failed deployment with helm"
    answered = api.handle("POST", f"{route}/search", {"query": text, "mode": mode.value})
    assert answered.body["evidence"] in ("strong", "partial")
    best = max(answered.body["results"], key=lambda r: r["score"])
    assert answered.body["evidence"] == best["strength"]


def test_a_thousand_unrelated_documents_hardly_move_an_on_topic_score(
    store: KnowledgeStore, bucket: Path
) -> None:
    index(store, bucket, RUNBOOKS)
    modes = sorted(store.supported_modes)
    questions = {**ON_TOPIC, **PARTLY}
    before = {}
    for text, expected in questions.items():
        for mode in modes:
            with explain.explaining() as trace:
                found = search(store, text, mode, min_score=0.0)
            (at,) = [i for i, r in enumerate(found) if r.document_path == expected]
            before[text, mode] = found[at]
            coverage = trace.to_dict(found)["results"][at]["relevance"]["coverage"]
            # A partly covered hit has a share for the term weights to move.
            assert (coverage < 1.0) == (text in PARTLY), (text, mode, coverage)
    unrelated = unrelated_documents(1000)
    assert not any(
        word in text.lower()
        for text in unrelated.values()
        for query in questions
        for word in query.split()
        if len(word) > 3
    )  # unrelated indeed
    index(store, bucket, {**RUNBOOKS, **unrelated})
    assert store.status(SCOPE).document_count == len(RUNBOOKS) + 1000
    for (text, mode), hit in before.items():
        found = search(store, text, mode, min_score=0.0)
        after = {(r.document_path, r.chunk_index): r for r in found}
        moved = after.get((hit.document_path, hit.chunk_index))
        assert moved is not None, (text, mode)
        assert abs(moved.score - hit.score) <= 0.05, (text, mode, hit.score, moved.score)
