"""The embedded store's keyword page read with fewer rows: page rows found by each
document's first chunk (the others read from ``chunks`` as before), a chunk's query terms
told by SQLite as bits, each set of held terms judged once, and only the page's absolute
scores computed when the page alone says the search answers. Each against what the
longer way answers, on real files."""

from __future__ import annotations

import itertools
import random
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from knowledge.core.identity import document_id
from knowledge.core.model import DEFAULT_MIN_SCORE, DocumentChunk, SearchMode, SearchQuery
from knowledge.core.rank_weights import RankWeights
from knowledge.core.scope import KnowledgeScope
from knowledge.ranking import explain
from knowledge.ranking.fusion import Fused
from knowledge.ranking.relevance import calibration, judge, query_weights
from knowledge.ranking.synonym_expansion import QueryTerms, expand
from knowledge.stores.embedded import EmbeddedKnowledgeStore, page_index
from knowledge.stores.embedded.candidates import pairs_condition
from knowledge.stores.embedded.keyword_index import _MASK_TERMS, _matches
from knowledge.stores.embedded.ranking import answering_term_sets, judged_by_terms
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk

A_X = KnowledgeScope("agent-a", "x")
B_X = KnowledgeScope("agent-b", "x")
LIBRARY = KnowledgeScope("_shared", "lib")
WORDS = [f"w{n}" for n in range(24)]
WHEN = datetime(2026, 5, 4, 3, 2, 1, tzinfo=UTC)


def _put(
    store: EmbeddedKnowledgeStore,
    scope: KnowledgeScope,
    path: str,
    texts: list[str],
    order: list[int] | None = None,
    lessons: frozenset[int] = frozenset(),
    **metadata: str,
) -> None:
    """Write ``texts`` as the chunks of ``path``, handed to the store in ``order`` (of
    their chunk indexes; default: in order), those at ``lessons`` lesson chunks."""
    chunks = [
        EmbeddedChunk(
            DocumentChunk(
                path, n, text, {**metadata, **({"kind": "lesson"} if n in lessons else {})}
            ),
            None,
        )
        for n, text in enumerate(texts)
    ]
    header = DocumentHeader(
        path=path,
        document_id=document_id(scope, path),
        content_hash=f"hash-of-{path}",
        indexed_at=WHEN,
        metadata=dict(metadata),
    )
    with store.write_session(scope) as session:
        session.put_document(header, [chunks[n] for n in order or range(len(chunks))])


def _texts(rng: random.Random, count: int) -> list[str]:
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]
    return [
        " ".join(rng.choices(WORDS, weights=weights, k=rng.randint(3, 12))) for _ in range(count)
    ]


@pytest.fixture(params=["shared", "agent"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedKnowledgeStore]:
    opened = EmbeddedKnowledgeStore(tmp_path / "kb.db", isolation=request.param)
    rng = random.Random(11)
    try:
        for scope, documents in ((A_X, 14), (B_X, 5), (LIBRARY, 4)):
            for n in range(documents):
                _put(opened, scope, f"d{n:02d}.md", _texts(rng, rng.randint(1, 9)))
        # Chunks handed over out of order: the page's rowid is not the first chunk's id.
        _put(opened, A_X, "shuffled.md", _texts(rng, 6), order=[3, 0, 5, 1, 2, 4])
        # No term at all: no page row.
        _put(opened, A_X, "empty.md", ["...", "!!"])
        yield opened
    finally:
        opened.close()


QUERIES = ("w0", "w1 w2", "w3 w4 w5", "w7 w0", "w20 w21", "w2 w9 w0 w11")


def _read_from_chunks(
    store: EmbeddedKnowledgeStore,
    conn: sqlite3.Connection,
    scope: KnowledgeScope,
    query: SearchQuery,
) -> tuple[dict[tuple[str, str, str], float], set[tuple[str, str, str]]]:
    """The page scores of the candidates' documents as ``page_sql`` reads them from
    ``chunks`` (both ways, which agree), and the candidates' documents."""
    keywords = store._keywords
    terms = expand(query.text, None)
    chunks = keywords.candidates(conn, scope, query, terms, 40)
    wanted = {(c.key[3], c.key[2], c.key[0]) for c in chunks}
    paths = sorted({c.key[0] for c in chunks})
    by_way = []
    for walk in (False, True):
        scores: dict[tuple[str, str, str], float] = {}
        for chunk_table, pairs in keywords._groups(conn, scope, query).items():
            table = page_index.page_table(chunk_table)
            for weight, match in _matches(terms):
                sql = page_index.page_sql(
                    table, pairs_condition(pairs, "c."), paths, match, walk=walk
                )
                for agent, context, path, score in conn.execute(*sql):
                    if (agent, context, path) in wanted:
                        key = (agent, context, path)
                        scores[key] = scores.get(key, 0.0) + weight * float(score)
        by_way.append(scores)
    assert by_way[0] == by_way[1]
    return by_way[0], wanted


def test_pages_found_by_first_chunk_score_as_read_from_chunks(
    store: EmbeddedKnowledgeStore,
) -> None:
    keywords = store._keywords
    shuffled_seen = False
    with store._reading() as conn:
        for scope in (A_X, B_X):
            for text in QUERIES:
                for options in ({}, {"cross_context": True}, {"shared_libraries": (LIBRARY,)}):
                    query = SearchQuery(text, **options)
                    expected, wanted = _read_from_chunks(store, conn, scope, query)
                    terms = expand(text, None)
                    chunks = keywords.candidates(conn, scope, query, terms, 40)
                    assert keywords.page_scores(conn, scope, query, terms, chunks) == expected
                    if (scope.agent, scope.context, "shuffled.md") in wanted:
                        shuffled_seen = True
                        assert (scope.agent, scope.context, "shuffled.md") in expected
    assert shuffled_seen


def test_a_page_not_at_the_first_chunk_is_read_from_chunks(
    store: EmbeddedKnowledgeStore,
) -> None:
    with store._reading() as conn:
        table = page_index.page_table(
            store._keywords.table(conn, "agent-a", "x", create=False) or ""
        )
        documents = [
            ("agent-a", "x", "d00.md"),
            ("agent-a", "x", "shuffled.md"),
            ("agent-a", "x", "empty.md"),
        ]
        firsts, elsewhere = page_index.first_pages(conn, table, documents)
        first_ids = {
            path: conn.execute(
                "SELECT id FROM chunks WHERE agent = 'agent-a' AND context = 'x' AND path = ?"
                " AND chunk_index = 0",
                (path,),
            ).fetchone()[0]
            for path in ("d00.md", "shuffled.md")
        }
    assert firsts == {first_ids["d00.md"]: ("agent-a", "x", "d00.md")}
    assert elsewhere == {("agent-a", "x", "shuffled.md"), ("agent-a", "x", "empty.md")}


@pytest.mark.parametrize(
    "wanted",
    [
        {"w0", "w3", "absent"},
        {"w2", "w20", "w1", "w21"},  # one term the start of another
        set(),
        {f"w{n}" for n in range(_MASK_TERMS + 5)},  # more than one integer's bits
    ],
)
def test_chunk_terms_by_bits_are_the_split_terms(
    store: EmbeddedKnowledgeStore, wanted: set[str]
) -> None:
    keywords = store._keywords
    with store._reading() as conn:
        query = SearchQuery("w0 w2 w3 w20")
        chunks = keywords.candidates(conn, A_X, query, expand(query.text, None), 200)
        every = keywords.chunk_terms(conn, chunks)
        some = keywords.chunk_terms(conn, chunks, wanted=wanted)
    assert len(chunks) > 20
    assert set(some) == set(every)
    assert some == {key: frozenset(wanted) & terms for key, terms in every.items()}
    if wanted:
        assert any(some.values())


@pytest.mark.parametrize("seed", range(6))
def test_judged_by_terms_is_judge(seed: int) -> None:
    rng = random.Random(seed)
    terms = QueryTerms(("a", "b", "c"), ("d",), ((("c",), ("d",)),))
    weights = query_weights(terms, {"a": 3, "b": 40, "c": 700}, 5000)
    scale = calibration(None)
    keys = [(f"p{n % 5}", n, "x", "a") for n in range(rng.randint(1, 60))]
    candidates = [Fused(key, 1.0 / (n + 1), 1.0 / (n + 1), None) for n, key in enumerate(keys)]
    terms_of = {
        key: frozenset(rng.sample(["a", "b", "c", "d"], rng.randint(0, 4)))
        for key in keys
        if rng.random() < 0.9
    }
    ours = judged_by_terms(SearchMode.KEYWORD, weights, scale, candidates, terms_of)
    theirs = judge(SearchMode.KEYWORD, weights, scale, candidates, terms_of=terms_of)
    assert ours.evidence == theirs.evidence
    assert ours.scores == theirs.scores


def _results(
    store: EmbeddedKnowledgeStore, scope: KnowledgeScope, query: SearchQuery
) -> list[tuple[object, ...]]:
    return [
        (r.document_path, r.chunk_index, r.score, r.rank_score, r.keyword_score, r.extra)
        for r in store.search(scope, query)
    ]


def test_a_page_scores_as_when_every_candidate_is_judged(
    store: EmbeddedKnowledgeStore,
) -> None:
    """Explaining judges every candidate (the record holds the best of them all): the
    results are those of a search that judges the page only."""
    _put(store, A_X, "lesson.md", ["w0 w1 w2 lesson card", "w3 w0"], kind="lesson")
    answered = 0
    for text in (*QUERIES, "w0 nothing", "absent words only"):
        for options in (
            {},
            {"max_results": 3},
            {"max_results": 2, "offset": 2},
            {"max_chunks_per_document": 1},
            {"min_score": 0.6},
            {"min_score": 0.0},
            {"group_by": "document"},
        ):
            query = SearchQuery(text, mode=SearchMode.KEYWORD, **options)
            plain = _results(store, A_X, query)
            with explain.explaining():
                explained = _results(store, A_X, query)
            assert plain == explained, (text, options)
            answered += bool(plain)
    assert answered


def test_a_page_below_the_evidence_floor_answers_when_another_candidate_reaches_it(
    tmp_path: Path,
) -> None:
    """The page's best scores below the evidence floor, a candidate past the page above
    it: the search answers (the best of every candidate is the search's evidence)."""
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db")
    try:
        _put(store, A_X, "short.md", ["zeta zeta zeta"])
        long_text = "zeta alpha beta " + " ".join(f"filler{n}" for n in range(120))
        _put(store, A_X, "long.md", [long_text])
        for n in range(30):
            _put(store, A_X, f"other{n}.md", [f"common words here {n}"])
        query = SearchQuery("zeta alpha beta", mode=SearchMode.KEYWORD, max_results=1)
        found = store.search(A_X, query)
        every = store.search(A_X, SearchQuery("zeta alpha beta", mode=SearchMode.KEYWORD))
    finally:
        store.close()
    assert [r.document_path for r in every] == ["short.md", "long.md"]
    assert every[1].score >= DEFAULT_MIN_SCORE > every[0].score
    assert [(r.document_path, r.score) for r in found] == [("short.md", every[0].score)]


def test_a_long_document_pages_as_when_read_deeper(tmp_path: Path) -> None:
    """A page left short by the per-document cap in a scope of few long documents, with
    lesson chunks past the first candidates: whether or not it is read again deeper (an
    explained search always is), the results are the same."""
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db")
    rng = random.Random(5)
    try:
        _put(store, A_X, "long.md", _texts(rng, 150))
        _put(store, B_X, "other.md", _texts(rng, 90))
        _put(store, B_X, "lessons.md", _texts(rng, 60), kind="lesson", origin="manual")
        short = 0
        for scope in (A_X, B_X):
            for text in QUERIES:
                for options in (
                    {},
                    {"max_chunks_per_document": 1},
                    {"max_chunks_per_document": 4, "max_results": 12},
                    {"min_score": 0.55},
                    {"weights": RankWeights(lesson=3.0)},
                    {"weights": RankWeights({"manual": 0.2}, 1.0, 0)},
                    {"weights": RankWeights({"manual": 10.0}, 1.0, 0)},
                ):
                    query = SearchQuery(text, mode=SearchMode.KEYWORD, **options)
                    plain = _results(store, scope, query)
                    with explain.explaining():
                        explained = _results(store, scope, query)
                    assert plain == explained, (scope, text, options)
                    short += 0 < len(plain) < query.max_results
    finally:
        store.close()
    assert short > 20


def test_chunks_past_the_first_read_that_take_a_place_are_read(tmp_path: Path) -> None:
    """Past the first read's candidates: another document's chunks, and a lesson chunk a
    lesson weight lifts above the page's last chunk of its document. Each takes its
    place on the page, as an explained search (always read deeper) finds; a lesson
    weight too light to lift it leaves the page as the first read found it."""
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db")
    low = "alpha beta gamma delta epsilon"
    try:
        _put(store, A_X, "a-top.md", ["alpha alpha alpha"] * 3 + [low] * 57)
        _put(store, A_X, "b-low.md", [low] * 20)
        texts = ["alpha alpha alpha", "alpha alpha beta gamma", "alpha alpha beta gamma"]
        _put(store, B_X, "one.md", texts + [low] * 77, lessons=frozenset({70}))
        cases = [
            (A_X, None, [("a-top.md", n) for n in range(3)] + [("b-low.md", 0)]),
            (B_X, RankWeights(lesson=1.0), [("one.md", 0), ("one.md", 1), ("one.md", 2)]),
            (B_X, RankWeights(lesson=1.3), [("one.md", 0), ("one.md", 70), ("one.md", 1)]),
        ]
        for scope, weights, first in cases:
            query = SearchQuery("alpha", mode=SearchMode.KEYWORD, weights=weights)
            plain = store.search(scope, query)
            with explain.explaining():
                explained = store.search(scope, query)
            found = [(r.document_path, r.chunk_index, r.score, r.rank_score) for r in plain]
            assert found == [
                (r.document_path, r.chunk_index, r.score, r.rank_score) for r in explained
            ]
            assert [(path, index) for path, index, _, _ in found][: len(first)] == first
    finally:
        store.close()


def test_a_chunks_origin_is_read_when_an_origin_is_weighted(tmp_path: Path) -> None:
    """A chunk's origin is read with its row only when some origin is weighted: a
    weighted origin then lifts its chunks (and lowers them) as ``weigh`` says, and
    neutral origins rank by the keyword score alone."""
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db")
    try:
        _put(store, A_X, "strong.md", ["alpha alpha alpha beta"], origin="upload")
        _put(store, A_X, "weak.md", ["alpha gamma delta epsilon zeta"], origin="manual")
        _put(store, A_X, "none.md", ["alpha gamma delta epsilon zeta eta"])

        def ranked(weights: RankWeights | None) -> list[tuple[str, float]]:
            query = SearchQuery("alpha", mode=SearchMode.KEYWORD, weights=weights)
            return [(r.document_path, r.rank_score or 0.0) for r in store.search(A_X, query)]

        neutral = ranked(None)
        assert [path for path, _ in neutral] == ["strong.md", "weak.md", "none.md"]
        lifted = ranked(RankWeights({"manual": 10.0}, 1.0, 0))
        assert [path for path, _ in lifted] == ["weak.md", "strong.md", "none.md"]
        top = dict(neutral)["weak.md"] * 10.0  # the divisor: the highest weighted score
        assert dict(lifted) == pytest.approx(
            {
                path: min(1.0, score * (10.0 if path == "weak.md" else 1.0) / top)
                for path, score in neutral
            }
        )
        lowered = ranked(RankWeights({"upload": 0.1}, 1.0, 0))
        assert [path for path, _ in lowered] == ["weak.md", "none.md", "strong.md"]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("elsewhere", "options"),
    [
        (KnowledgeScope("agent-a", "y"), {"cross_context": True}),
        (LIBRARY, {"shared_libraries": (LIBRARY,)}),
        (A_X, {}),
    ],
)
def test_a_page_a_deeper_read_fills_from_another_document_is_read(
    tmp_path: Path, elsewhere: KnowledgeScope, options: dict[str, object]
) -> None:
    """One long document fills the first read; another searched document (another
    context, a shared library, the scope itself) has chunks only past it: the page left
    short by the per-document cap takes them, as an explained search (always read
    deeper) finds, and no bound on the unread chunks (``deeper_bound``) skips them."""
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db")
    try:
        _put(store, A_X, "long.md", ["alpha alpha alpha"] * 60)
        _put(store, elsewhere, "z-other.md", ["alpha beta gamma delta epsilon zeta"] * 4)
        query = SearchQuery("alpha", mode=SearchMode.KEYWORD, **options)  # type: ignore[arg-type]
        plain = _results(store, A_X, query)
        with explain.explaining():
            explained = _results(store, A_X, query)
    finally:
        store.close()
    assert plain == explained
    assert [row[:2] for row in plain][:3] == [("long.md", n) for n in range(3)]
    assert "z-other.md" in {row[0] for row in plain}


def test_an_empty_first_page_is_read_deeper_when_a_chunk_past_it_answers(
    tmp_path: Path,
) -> None:
    """The first read's chunks hold too little of the query to answer; a chunk past them
    holds all of it: the search reads deeper, and answers since that chunk reaches the
    evidence floor. A query no chunk holds enough of answers nothing without the deeper
    read (``ranking.answering_term_sets``, ``KeywordIndex.holds_any``). Each as an
    explained search (always read deeper) answers."""
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db")
    filler = " ".join(f"filler{n}" for n in range(300))
    try:
        for n in range(30):  # chunks without the query's terms: alpha is not common
            _put(store, A_X, f"other{n:02d}.md", [f"lorem{n} ipsum{m}" for m in range(10)])
        for n in range(50):
            _put(store, A_X, f"short{n:02d}.md", ["alpha alpha alpha"])
        _put(store, A_X, "long.md", [f"alpha beta gamma {filler}"])
        _put(store, A_X, "apart.md", [f"beta {filler}", f"gamma {filler}"])
        for term in ("kappa", "lambda", "omega", "sigma"):  # 48 chunks, one term each
            _put(store, A_X, f"{term}.md", [f"{term} {term} x{n}" for n in range(12)])
        answers = []
        for text in ("alpha beta gamma", "kappa lambda omega sigma"):
            query = SearchQuery(text, mode=SearchMode.KEYWORD)
            plain = _results(store, A_X, query)
            with explain.explaining():
                explained = _results(store, A_X, query)
            assert plain == explained, text
            answers.append([row[:2] for row in plain])
        with store._reading() as conn:
            terms = expand("alpha beta gamma", None)
            first = store._keywords.candidates(
                conn, A_X, SearchQuery("alpha beta gamma"), terms, 40
            )
    finally:
        store.close()
    assert ("long.md", 0) not in {c.key[:2] for c in first}
    assert answers[0]  # the long chunk past the first read is the search's evidence
    assert answers[1] == []


@pytest.mark.parametrize("seed", range(8))
def test_answering_term_sets_are_the_smallest_that_reach_the_evidence_floor(
    seed: int,
) -> None:
    """A set of terms holds one of ``answering_term_sets`` exactly when a chunk holding
    it would reach the evidence floor alone, and none of them holds another."""
    rng = random.Random(seed)
    typed = tuple(f"t{n}" for n in range(rng.randint(1, 6)))
    frequencies = {term: rng.choice([0, 1, 5, 40, 300, 2000]) for term in typed}
    weights = query_weights(QueryTerms(typed, (), ()), frequencies, 5000)
    scale = calibration(None)
    query = SearchQuery(" ".join(typed), min_score=rng.choice([None, 0.3, 0.6, 0.9]))
    answering = answering_term_sets(weights, scale, query, frequencies)
    assert answering is not None
    held = [term for term in typed if frequencies[term]]
    for size in range(len(held) + 1):
        for terms in map(frozenset, itertools.combinations(held, size)):
            alone = Fused(("", 0, "", ""), 1.0, 1.0, None)
            judged = judged_by_terms(
                SearchMode.KEYWORD, weights, scale, [alone], {alone.key: terms}
            )
            passes = bool(judged.passing([alone], query))
            assert passes == any(needed <= terms for needed in answering), terms
    assert all(not a < b for a in answering for b in answering)
