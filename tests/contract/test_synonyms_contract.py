"""Per-scope synonyms on every store and on every mode's keyword side (issue 29, part 4).

A scope's ``_synonyms.txt`` (Solr format) goes through the whole pipeline from a bucket
folder, as every file does; the assertions compare the scope with the file to a scope
with the same documents and none, so they say exactly what the synonyms add: the same
results in the same order in every store, an added term weighing ``SYNONYM_WEIGHT`` of a
typed one, a bad file a problem in the status while the last good set stays and every
search still answers, the file never a document, one scope's set never another's.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from knowledge.core.model import IndexOptions, SearchMode, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SYNONYMS_FILE
from knowledge.ingest.pipeline import index_source, reindex_source
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.ranking import explain
from knowledge.ranking.origin_weights import RankWeights
from knowledge.ranking.synonym_expansion import SYNONYM_WEIGHT
from knowledge.stores.protocol import KnowledgeStore

WITH = KnowledgeScope("syn-bot", "ops")
WITHOUT = KnowledgeScope("syn-bot", "plain")  # the same documents, no synonyms file
OTHER_AGENT = KnowledgeScope("other-bot", "ops")

SYNONYMS = """# the team's synonyms (Solr format)
k8s, kubernetes
db => database
배포, 디플로이
dns, domain name system
zyzzyva, xylograph
"""

# Neutral file names (a .txt file's name is its title, whose terms are indexed too).
FILES = {
    "one.txt": "Notes: k8s rollout plan.",
    "two.txt": "Notes: kubernetes rollout plan.",
    "three.txt": "디플로이는 금요일에 하지 않는다.",
    "four.txt": "Nightly database backups, kept a week.",
    "five.txt": "The domain name system resolves every host name.",
    # Filler, so that every searched term is rare (BM25's IDF is then far from 0).
    **{f"filler-{n}.txt": f"Lunch menu {n}: soup, bread and tea." for n in range(8)},
}

NO_LESSONS = RankWeights(lesson=1.0, extra_lessons=0)
KEYWORD_SIDE = (SearchMode.KEYWORD, SearchMode.HYBRID)


def write_scope(bucket: Path, scope: KnowledgeScope, synonyms: str | None) -> Path:
    folder = bucket / scope.agent / scope.context
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    if synonyms is not None:
        (folder / SYNONYMS_FILE).write_text(synonyms, encoding="utf-8")
    return folder


@pytest.fixture
def indexed(store: KnowledgeStore, bucket: Path) -> KnowledgeStore:
    for scope, synonyms in ((WITH, SYNONYMS), (WITHOUT, None), (OTHER_AGENT, None)):
        write_scope(bucket, scope, synonyms)
        result = index_source(store, scope, BucketFolderSource(bucket), IndexOptions())
        assert result.errors == (), result.errors
        assert result.indexed_documents == len(FILES)
    return store


def search(
    store: KnowledgeStore, scope: KnowledgeScope, text: str, mode: SearchMode = SearchMode.KEYWORD
) -> list[SearchResult]:
    """Every candidate (``min_score`` 0): what a synonym finds, however weak, is the subject."""
    query = SearchQuery(text, mode=mode, max_results=20, weights=NO_LESSONS, min_score=0.0)
    return store.search(scope, query)


def paths(results: list[SearchResult]) -> list[str]:
    return [r.document_path for r in results]


def keyword_hits(
    store: KnowledgeStore, scope: KnowledgeScope, text: str, mode: SearchMode
) -> list[str]:
    """The documents the keyword side found, from the trace (hybrid also lists
    vector-only candidates, and normalises the keyword side's weakest to 0)."""
    with explain.explaining() as trace:
        results = search(store, scope, text, mode)
    entries = trace.to_dict(results)["results"]
    return [
        r.document_path
        for r, entry in zip(results, entries, strict=True)
        if entry["keyword"] is not None and entry["keyword"]["raw"] is not None
    ]


# What each query finds in keyword mode, with the synonyms and without: the same in
# every store, in this order (the typed word's document first).
EXPECTED = {
    "k8s": (["one.txt", "two.txt"], ["one.txt"]),
    "kubernetes": (["two.txt", "one.txt"], ["two.txt"]),
    "배포했다": (["three.txt"], []),  # Korean morphemes: 배포했다 -> 배포 -> 디플로이
    "디플로이": (["three.txt"], ["three.txt"]),
    "DB": (["four.txt"], []),  # db => database (and "database" is stemmed on both sides)
    "database": (["four.txt"], ["four.txt"]),  # one way: database does not add db
    "dns": (["five.txt"], []),  # a multi-word synonym
    "domain name system": (["five.txt"], ["five.txt"]),
}


@pytest.mark.parametrize("text", sorted(EXPECTED))
def test_synonyms_find_the_same_documents_in_the_same_order_in_every_store(
    indexed: KnowledgeStore, text: str
) -> None:
    with_synonyms, without = EXPECTED[text]
    assert paths(search(indexed, WITH, text)) == with_synonyms
    assert paths(search(indexed, WITHOUT, text)) == without


def test_every_modes_keyword_side_expands(indexed: KnowledgeStore, mode: SearchMode) -> None:
    if mode is SearchMode.VECTOR:
        # No keyword side: the synonyms change nothing.
        plain = search(indexed, WITHOUT, "k8s", mode)
        assert [(r.document_path, r.score) for r in search(indexed, WITH, "k8s", mode)] == [
            (r.document_path, r.score) for r in plain
        ]
        return
    assert keyword_hits(indexed, WITH, "k8s", mode) == ["one.txt", "two.txt"]
    assert keyword_hits(indexed, WITHOUT, "k8s", mode) == ["one.txt"]
    assert keyword_hits(indexed, WITH, "배포", mode) == ["three.txt"]
    assert keyword_hits(indexed, WITHOUT, "배포", mode) == []


def test_an_added_term_weighs_less_than_the_typed_one(indexed: KnowledgeStore) -> None:
    # one.txt and two.txt are the same but for k8s / kubernetes, each in one document:
    # the same length and term statistics, so the synonym's document scores exactly
    # SYNONYM_WEIGHT of the typed one's, either way round.
    for typed, other in (("k8s", "two.txt"), ("kubernetes", "one.txt")):
        with explain.explaining() as trace:
            results = search(indexed, WITH, typed)
        first, second = results
        assert first.rank_score == 1.0
        assert second.document_path == other
        assert second.rank_score is not None
        assert math.isclose(second.rank_score, SYNONYM_WEIGHT, rel_tol=1e-3), (typed, results)
        # On the absolute scale too: the added term covers SYNONYM_WEIGHT of the query.
        entries = trace.to_dict(results)["results"]
        assert entries[0]["relevance"]["coverage"] == pytest.approx(1.0)
        assert entries[1]["relevance"]["coverage"] == pytest.approx(SYNONYM_WEIGHT, rel=1e-3)
        assert second.score < first.score


def test_the_page_part_counts_an_added_term_at_its_weight_too(
    indexed: KnowledgeStore,
) -> None:
    # The page part (ranking.page_signal) scores the same terms as the chunk part: a term
    # a synonym added counts SYNONYM_WEIGHT there too, in every store (one.txt and
    # two.txt are one chunk each, so their page rows have the same statistics).
    with explain.explaining() as trace:
        results = search(indexed, WITH, "k8s")
    entries = {
        r.document_path: e["keyword"]
        for r, e in zip(results, trace.to_dict(results)["results"], strict=True)
    }
    typed, added = entries["one.txt"], entries["two.txt"]
    assert typed["page"] > 0.0
    assert math.isclose(added["page"], SYNONYM_WEIGHT * typed["page"], rel_tol=1e-3), entries
    assert math.isclose(added["chunk"], SYNONYM_WEIGHT * typed["chunk"], rel_tol=1e-3), entries


def test_the_synonyms_file_is_config_never_a_document(indexed: KnowledgeStore) -> None:
    listed = [d.path for d in indexed.list_documents(WITH).documents]
    assert SYNONYMS_FILE not in listed
    assert sorted(listed) == sorted(FILES)
    assert indexed.get_document(WITH, SYNONYMS_FILE) is None
    assert indexed.status(WITH).document_count == len(FILES)
    # Words only the file holds find nothing: it was not indexed.
    assert search(indexed, WITH, "zyzzyva xylograph") == []


def test_one_scopes_synonyms_never_change_another_scopes_search(
    indexed: KnowledgeStore,
) -> None:
    for scope in (WITHOUT, OTHER_AGENT):
        assert paths(search(indexed, scope, "k8s")) == ["one.txt"]
        assert paths(search(indexed, scope, "dns")) == []


def test_a_bad_file_is_a_problem_and_the_last_good_set_stays(
    indexed: KnowledgeStore, bucket: Path
) -> None:
    folder = bucket / WITH.agent / WITH.context
    source = BucketFolderSource(bucket)
    good = paths(search(indexed, WITH, "k8s"))
    for bad in ("k8s => kubernetes => containers\n", "a, , b\n", "x" * 300_000, "k8s, the\n"):
        (folder / SYNONYMS_FILE).write_text(bad, encoding="utf-8")
        for index in (index_source, reindex_source):  # a reindex's replace keeps the set
            result = index(indexed, WITH, source, IndexOptions())
            assert [p.path for p in result.errors] == [SYNONYMS_FILE], result.errors
            problems = {p.path: p.reason for p in indexed.status(WITH).problems}
            assert "the last good set stays in force" in problems[SYNONYMS_FILE]
            # Every search still answers, with the last good set.
            assert paths(search(indexed, WITH, "k8s")) == good
            assert search(indexed, WITH, "zyzzyva") == []
    # Fixed: the problem goes, the new set is in force.
    (folder / SYNONYMS_FILE).write_text("k8s, kubernetes\n", encoding="utf-8")
    result = index_source(indexed, WITH, source, IndexOptions())
    assert result.errors == ()
    assert SYNONYMS_FILE not in {p.path for p in indexed.status(WITH).problems}
    assert paths(search(indexed, WITH, "k8s")) == good
    assert paths(search(indexed, WITH, "dns")) == []  # that rule is gone
    # Removed: no synonyms at all.
    (folder / SYNONYMS_FILE).unlink()
    assert index_source(indexed, WITH, source, IndexOptions()).errors == ()
    assert paths(search(indexed, WITH, "k8s")) == ["one.txt"]


@pytest.mark.modes(*KEYWORD_SIDE)
def test_the_trace_shows_the_expansion_and_recomputes_every_score(
    indexed: KnowledgeStore, mode: SearchMode
) -> None:
    with explain.explaining() as trace:
        results = search(indexed, WITH, "k8s rollout", mode)
    body = trace.to_dict(results)
    (searched,) = body["searches"]
    assert searched["query"]["terms"] == ["k8s", "rollout"]
    assert searched["query"]["synonyms"] == {
        "weight": SYNONYM_WEIGHT,
        "expanded": ["kubernet"],
        "matches": [{"from": ["k8s"], "adds": ["kubernet"]}],
    }
    assert results
    for index, result in enumerate(results):
        recomputed = explain.recompute(result.to_dict(), body, index)
        assert result.rank_score is not None
        assert math.isclose(recomputed, result.rank_score, abs_tol=1e-9), (index, body)
        relevance = explain.recompute_relevance(body, index)
        assert math.isclose(relevance, result.score, abs_tol=1e-9), (index, body)
    assert "synonyms: + kubernet (weight 0.5 each)" in explain.format_trace(
        body, [r.to_dict() for r in results]
    )
    # Without synonyms the trace says nothing of them.
    with explain.explaining() as plain:
        search(indexed, WITHOUT, "k8s rollout", mode)
    assert "synonyms" not in plain.searches[0]["query"]
