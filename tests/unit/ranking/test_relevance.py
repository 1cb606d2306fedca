"""knowledge.ranking.relevance: the absolute score's pure parts (term weights, coverage,
the calibration, ``judge``) and its words (``core.model.strength_of``, ``evidence_of``).

Nothing here reads the shipped calibration's values: they are refitted by ``python -m
bench relevance-fit``. What is checked is what any calibration must satisfy (more
evidence never scores lower, the ``default`` family weighs coverage only) and, with
coefficients of the test's own, what the functions compute.
"""

from __future__ import annotations

import itertools
import json
import math
from importlib import resources

import pytest

from knowledge.core.model import (
    DEFAULT_MIN_SCORE,
    STRONG_SCORE,
    SearchMode,
    SearchQuery,
    SearchResult,
    evidence_of,
    strength_of,
)
from knowledge.ranking import explain
from knowledge.ranking.analysis import keyword_terms
from knowledge.ranking.fusion import Fused
from knowledge.ranking.relevance import (
    CALIBRATION_VERSION,
    REFERENCE_CHUNKS,
    Calibration,
    Evidence,
    Judged,
    QueryWeights,
    Script,
    calibration,
    idf,
    judge,
    parse_calibrations,
    query_script,
    query_terms,
    query_weights,
)
from knowledge.ranking.synonym_expansion import SYNONYM_WEIGHT, QueryTerms

GRID = [i / 10 for i in range(11)]
OWN = Calibration("test", keyword=(-3.0, 6.0), vector=(-5.0, 4.0, 3.0), hybrid=(-6.0, 5.0, 4.0))
"""Coefficients of the test's own, so that the computations can be checked exactly."""


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def shipped_families() -> list[str]:
    text = resources.files("knowledge.ranking").joinpath("relevance_calibration.json")
    return sorted(json.loads(text.read_text("utf-8"))["families"])


# --- idf -------------------------------------------------------------------------------------


def test_a_term_missing_from_the_scope_weighs_the_most() -> None:
    for chunks in (0, 10, REFERENCE_CHUNKS, 50 * REFERENCE_CHUNKS):
        n = max(chunks, REFERENCE_CHUNKS)
        weights = [idf(df, chunks) for df in (0, 1, 2, 10, n // 2, n)]
        assert weights == sorted(weights, reverse=True)
        assert len(set(weights)) == len(weights)  # strictly: each more common term weighs less
        assert weights[-1] > 0.0  # a term in every chunk still weighs something


def test_weights_do_not_move_while_a_small_scope_grows_below_the_reference() -> None:
    for df in (0, 1, 3, 40):
        small = idf(df, 10)
        assert idf(df, 0) == small
        assert idf(df, REFERENCE_CHUNKS // 2) == small
        assert idf(df, REFERENCE_CHUNKS) == small
        # Past the reference the scope's own size counts: a term of the same count is rarer.
        assert idf(df, 20 * REFERENCE_CHUNKS) > small
    terms = QueryTerms(("rollback", "helm"))
    df = {"rollback": 3, "helm": 1}
    grown = query_weights(terms, df, REFERENCE_CHUNKS - 1)
    assert query_weights(terms, df, 12).typed == grown.typed


def test_idf_is_the_documented_formula_and_clamps_the_count() -> None:
    n = 5 * REFERENCE_CHUNKS
    assert idf(7, n) == pytest.approx(math.log(1.0 + (n - 7 + 0.5) / 7.5))
    assert idf(-3, n) == idf(0, n)
    assert idf(n + 9, n) == idf(n, n)


# --- QueryWeights ---------------------------------------------------------------------------


def weights_of(typed: tuple[str, ...], expanded: tuple[str, ...] = (), **df: int) -> QueryWeights:
    # Each added term a synonym of the first typed one, as ranking.synonym_expansion records it.
    matches = tuple(((typed[0],), (term,)) for term in expanded) if typed else ()
    return query_weights(QueryTerms(typed, expanded, matches), df, 200)


def test_coverage_of_all_terms_is_one_and_of_none_zero() -> None:
    weights = weights_of(("rollback", "helm", "zebra"), rollback=3, helm=1)
    assert weights.coverage({"rollback", "helm", "zebra", "other"}) == pytest.approx(1.0)
    assert weights.coverage(set()) == 0.0
    assert weights.coverage({"other", "words"}) == 0.0


def test_coverage_is_the_share_of_the_idf_weight_a_chunk_holds() -> None:
    weights = weights_of(("common", "rare"), common=150, rare=1)
    rare, common = weights.coverage({"rare"}), weights.coverage({"common"})
    assert rare > common > 0.0
    assert rare + common == pytest.approx(1.0)
    assert rare == pytest.approx(idf(1, 200) / (idf(1, 200) + idf(150, 200)))
    # A term the scope never uses weighs the most: a chunk cannot hold much of a question
    # about something else.
    off_topic = weights_of(("rollback", "chocolate", "cake"), rollback=3)
    assert off_topic.coverage({"rollback"}) < 1 / 3


def test_a_synonym_stands_for_its_typed_term_at_its_weight() -> None:
    # "k8s" is nowhere in the scope: it weighs the most, and a chunk that says
    # "kubernetes" answers it at SYNONYM_WEIGHT of that weight (not of its own, smaller).
    weights = weights_of(("k8s", "deploy"), ("kubernet",), k8s=0, kubernet=40, deploy=40)
    k8s, deploy = weights.typed["k8s"], weights.typed["deploy"]
    assert weights.coverage({"kubernet"}) == pytest.approx(SYNONYM_WEIGHT * k8s / (k8s + deploy))
    assert weights.coverage({"kubernet", "deploy"}) == pytest.approx(
        (SYNONYM_WEIGHT * k8s + deploy) / (k8s + deploy)
    )
    assert weights.coverage({"k8s", "kubernet", "deploy"}) == 1.0  # the typed term counts once
    alone = weights_of(("k8s",), ("kubernet",), kubernet=40)
    assert alone.coverage({"kubernet"}) == pytest.approx(SYNONYM_WEIGHT)
    # A phrase a synonym adds counts only when the chunk holds all of it.
    phrase = query_weights(
        QueryTerms(("k8s",), ("kubernet", "cluster"), ((("k8s",), ("kubernet", "cluster")),)),
        {},
        200,
    )
    assert phrase.coverage({"kubernet"}) == 0.0
    assert phrase.coverage({"kubernet", "cluster"}) == pytest.approx(SYNONYM_WEIGHT)
    assert query_terms(QueryTerms(("k8s", "kubernet"), ("kubernet", "cluster"))) == [
        "k8s",
        "kubernet",
        "cluster",
    ]


def test_a_query_without_terms_covers_nothing() -> None:
    empty = query_weights(QueryTerms(()), {}, 50)
    assert empty.total == 0.0
    assert empty.coverage({"anything"}) == 0.0
    assert QueryWeights({}, (((), ("kubernet",)),), 5).coverage({"kubernet"}) == 0.0


def test_the_weights_trace_names_the_counts() -> None:
    recorded = weights_of(("k8s",), ("kubernet",), k8s=2).to_dict()
    assert recorded["chunks"] == 200
    assert recorded["reference_chunks"] == REFERENCE_CHUNKS
    assert set(recorded["typed"]) == {"k8s"}
    assert recorded["synonyms"] == [
        {"for": ["k8s"], "adds": ["kubernet"], "weight": SYNONYM_WEIGHT}
    ]


# --- Calibration -------------------------------------------------------------------------


def check_monotone(scale: Calibration, *, strict_coverage: bool) -> None:
    for mode, script in itertools.product(SearchMode, Script):
        for vector in GRID:
            scores = [scale.score(mode, Evidence(c, vector, script)) for c in GRID]
            assert all(0.0 <= s <= 1.0 for s in scores)
            assert scores == sorted(scores), (mode, vector, script)
            if strict_coverage:
                assert len(set(scores)) == len(scores), (mode, vector, script)
        for coverage in GRID:
            scores = [scale.score(mode, Evidence(coverage, v, script)) for v in GRID]
            assert scores == sorted(scores), (mode, coverage, script)


def test_the_score_is_monotone_in_coverage_and_vector() -> None:
    check_monotone(OWN, strict_coverage=True)
    for mode in (SearchMode.VECTOR, SearchMode.HYBRID):
        low, high = OWN.score(mode, Evidence(0.5, 0.2)), OWN.score(mode, Evidence(0.5, 0.9))
        assert low < high  # with a positive vector coefficient, strictly


@pytest.mark.parametrize("family", shipped_families())
def test_every_shipped_calibration_is_monotone(family: str) -> None:
    scale = calibration(family)
    assert scale.family == family
    # More of the query's words is more evidence, whatever the fit: strictly.
    check_monotone(scale, strict_coverage=True)


def test_an_unknown_embedder_gets_the_default_family_which_weighs_coverage_only() -> None:
    default = calibration(None)
    assert default.family == "default"
    assert calibration("no-such-provider:no-such-model").family == "default"
    for mode in SearchMode:
        for coverage in GRID:
            # Whatever the vector similarity: an unknown embedder's is not calibrated.
            assert len({default.score(mode, Evidence(coverage, v)) for v in GRID}) == 1


def test_the_score_is_the_documented_sigmoid() -> None:
    assert OWN.score(SearchMode.KEYWORD, Evidence(0.4)) == pytest.approx(sigmoid(-3 + 6 * 0.4))
    # Keyword mode has no vector evidence, whatever is given.
    assert OWN.score(SearchMode.KEYWORD, Evidence(0.4, 0.9)) == OWN.score(
        SearchMode.KEYWORD, Evidence(0.4)
    )
    assert OWN.score(SearchMode.VECTOR, Evidence(0.4, 0.7)) == pytest.approx(
        sigmoid(-5 + 4 * 0.4 + 3 * 0.7)
    )
    assert OWN.score(SearchMode.HYBRID, Evidence(0.4, 0.7)) == pytest.approx(
        sigmoid(-6 + 5 * 0.4 + 4 * 0.7)
    )
    # No vector evidence in a hybrid search: the keyword coefficients.
    assert OWN.score(SearchMode.HYBRID, Evidence(0.4)) == OWN.score(
        SearchMode.KEYWORD, Evidence(0.4)
    )
    # Evidence outside [0, 1] counts as its bound.
    assert OWN.score(SearchMode.HYBRID, Evidence(1.7, 2.0)) == OWN.score(
        SearchMode.HYBRID, Evidence(1.0, 1.0)
    )
    assert OWN.score(SearchMode.HYBRID, Evidence(-0.5, -1.0)) == OWN.score(
        SearchMode.HYBRID, Evidence(0.0, 0.0)
    )
    # Far past either end: still a number in [0, 1].
    steep = Calibration("steep", (-900.0, 1800.0), (-900.0, 900.0, 900.0), (0.0, 0.0, 0.0))
    assert steep.score(SearchMode.KEYWORD, Evidence(0.0)) == 0.0
    assert steep.score(SearchMode.KEYWORD, Evidence(1.0)) == 1.0


# --- the query's script --------------------------------------------------------------------

SCRIPTED = Calibration(
    "scripted",
    keyword=(-3.0, 6.0),
    vector=(-5.0, 4.0, 3.0),
    hybrid=(-6.0, 5.0, 4.0),
    cjk=(-0.5, -1.0, -1.5),
)
"""``OWN`` with a shift of its own for a CJK query in each mode."""


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("how do I install a third-party module on Windows", Script.OTHER),
        ("파이썬 모듈은 어떻게 설치하나요", Script.CJK),
        ("Python 모듈 설치", Script.CJK),  # mixed: a CJK term is enough
        ("Pythonのモジュールをインストールする方法", Script.CJK),  # Kana, not only Hangul
        ("如何安装模块", Script.CJK),  # Han
        ("", Script.OTHER),  # no terms
    ],
)
def test_the_script_is_cjk_when_an_analysed_term_is(text: str, script: Script) -> None:
    assert query_script(keyword_terms(text)) is script
    weights = QueryWeights(dict.fromkeys(keyword_terms(text), 1.0), (), 100)
    assert weights.script is script


def test_a_cjk_query_moves_each_modes_intercept_by_its_shift() -> None:
    for mode, shift in zip(SearchMode, SCRIPTED.cjk, strict=True):
        for coverage, vector in itertools.product(GRID, (None, 0.3, 0.8)):
            other = Evidence(coverage, vector)
            cjk = Evidence(coverage, vector, Script.CJK)
            assert SCRIPTED.score(mode, other) == OWN.score(mode, other)
            used = SearchMode.KEYWORD if vector is None else mode
            expected = sigmoid(
                math.log(OWN.score(used, other) / (1.0 - OWN.score(used, other)))
                + SCRIPTED.cjk[list(SearchMode).index(used)]
            )
            assert SCRIPTED.score(mode, cjk) == pytest.approx(expected, rel=1e-9), (mode, shift)
    # Without shifts (the default) the script changes nothing.
    assert OWN.score(SearchMode.HYBRID, Evidence(0.4, 0.7, Script.CJK)) == OWN.score(
        SearchMode.HYBRID, Evidence(0.4, 0.7)
    )


def test_the_shifts_round_trip_and_a_file_without_them_reads_as_none() -> None:
    assert Calibration.from_dict("scripted", SCRIPTED.to_dict()) == SCRIPTED
    assert SCRIPTED.to_dict()["cjk"] == {"keyword": -0.5, "vector": -1.0, "hybrid": -1.5}
    old = {"keyword": [-3.0, 6.0], "vector": [-5.0, 4.0, 3.0], "hybrid": [-6.0, 5.0, 4.0]}
    assert Calibration.from_dict("test", old) == OWN
    assert parse_calibrations(json.dumps({"families": {"test": old}})) == {"test": OWN}
    with pytest.raises(ValueError, match="cjk"):
        Calibration.from_dict("test", {**old, "cjk": {"keywords": -1.0}})
    with pytest.raises(ValueError, match="version"):
        parse_calibrations(json.dumps({"version": CALIBRATION_VERSION + 1, "families": {}}))


def test_the_shipped_file_is_the_current_version_with_a_shift_per_family_and_mode() -> None:
    text = resources.files("knowledge.ranking").joinpath("relevance_calibration.json")
    loaded = json.loads(text.read_text("utf-8"))
    assert loaded["version"] == CALIBRATION_VERSION
    for family, entry in loaded["families"].items():
        assert set(entry["cjk"]) == {mode.value for mode in SearchMode}, family


def judged_alone(text: str, held: int) -> Judged[str]:
    """A keyword search of ``text`` (its terms weighing alike) whose one hit holds the
    first ``held`` of its terms, scored by the shipped calibration."""
    terms = keyword_terms(text)
    weights = QueryWeights(dict.fromkeys(terms, 1.0), (), 5000)
    return judge(
        SearchMode.KEYWORD,
        weights,
        calibration("hashing"),
        fused("hit"),
        terms_of={"hit": set(terms[:held])},
    )


def test_a_wordy_english_paraphrase_covering_two_fifths_answers_a_korean_one_does_not() -> None:
    """English questions in the asker's own words cover less of themselves than Korean
    ones with the same answer (MeCab-ko's morphemes, a compound's parts): at the same
    coverage the English one is the stronger evidence, and the calibration knows it."""
    english = judged_alone("installing third party modules windows", 2)
    korean = judged_alone("윈도우 외부 모듈 설치 방법", 2)
    assert len(english.weights.typed) == len(korean.weights.typed) == 5
    assert english.evidence["hit"].coverage == korean.evidence["hit"].coverage == 0.4
    assert (english.weights.script, korean.weights.script) == (Script.OTHER, Script.CJK)
    query = SearchQuery("q")
    assert english.best() > DEFAULT_MIN_SCORE > korean.best()
    assert english.passing(fused("hit"), query) != []
    assert korean.passing(fused("hit"), query) == []
    assert english.record(query)["script"] == "other"
    assert korean.record(query)["script"] == "cjk"


# --- judge and Judged -------------------------------------------------------------------------


def fused(*keys: str) -> list[Fused[str]]:
    """Candidates in rank order (the rank score falls down the list)."""
    return [Fused(key, 1.0 - i / 10) for i, key in enumerate(keys)]


WEIGHTS = weights_of(("rollback", "helm"), rollback=4, helm=4)
TERMS = {"a": {"rollback", "helm"}, "b": {"helm"}, "c": {"rollback"}, "d": set()}


def test_judge_scores_each_candidate_by_its_terms_and_its_vector() -> None:
    judged = judge(
        SearchMode.HYBRID,
        WEIGHTS,
        OWN,
        fused("a", "b", "c", "d"),
        terms_of=TERMS,
        vector={"a": 0.9, "b": 0.6, "c": 0.7},
    )
    assert judged.evidence["a"] == Evidence(1.0, 0.9)
    assert judged.evidence["b"].coverage == pytest.approx(0.5)
    for key, evidence in judged.evidence.items():
        assert judged.score(key) == OWN.score(SearchMode.HYBRID, evidence)
    assert judged.score("not a candidate") == 0.0


def test_a_hybrid_hit_the_vector_side_did_not_return_gets_its_lowest_unit_score() -> None:
    vector = {"a": 0.9, "b": 0.55, "c": 0.7}
    judged = judge(
        SearchMode.HYBRID, WEIGHTS, OWN, fused("a", "b", "d"), terms_of=TERMS, vector=vector
    )
    assert judged.evidence["d"].vector == min(vector.values()) == 0.55
    # A candidate missing from terms_of holds no term.
    alone = judge(SearchMode.HYBRID, WEIGHTS, OWN, fused("x"), terms_of={}, vector=vector)
    assert alone.evidence["x"] == Evidence(0.0, 0.55)


def test_no_vector_evidence_in_keyword_mode_or_without_a_vector_side() -> None:
    vector = {"a": 0.9}
    keyword = judge(
        SearchMode.KEYWORD, WEIGHTS, OWN, fused("a", "b"), terms_of=TERMS, vector=vector
    )
    assert {e.vector for e in keyword.evidence.values()} == {None}
    for empty in (None, {}):
        judged = judge(SearchMode.HYBRID, WEIGHTS, OWN, fused("a"), terms_of=TERMS, vector=empty)
        assert judged.evidence["a"].vector is None


def test_a_given_min_score_keeps_the_results_reaching_it_in_rank_order() -> None:
    ranked = fused("d", "b", "a", "c")  # the ranking put the weakest evidence first
    judged = judge(SearchMode.KEYWORD, WEIGHTS, OWN, ranked, terms_of=TERMS)
    scores = [judged.score(item.key) for item in ranked]
    assert scores != sorted(scores, reverse=True)
    assert judged.best() == judged.score("a") == max(scores)
    floor = judged.score("b")
    passing = judged.passing(ranked, SearchQuery("q", min_score=floor))
    assert [item.key for item in passing] == [
        item.key for item in ranked if judged.score(item.key) >= floor
    ]
    assert [item.key for item in passing] == ["b", "a", "c"]
    assert passing[0] is ranked[1]  # the same candidates, unchanged
    assert judged.passing(ranked, SearchQuery("q", min_score=0.0)) == ranked
    assert judged.passing(ranked, SearchQuery("q", min_score=1.0)) == []


def test_without_min_score_the_best_result_decides_and_every_result_follows() -> None:
    """No ``min_score``: nothing when the best candidate is below ``DEFAULT_MIN_SCORE``,
    else every candidate in rank order, a weak one after a strong one too."""
    ranked = fused("d", "b", "a", "c")
    query = SearchQuery("q")
    assert query.min_score is None
    for best in (DEFAULT_MIN_SCORE, 0.9, 1.0):
        scores = {"d": 0.0, "b": best / 2, "a": best, "c": 0.1}
        judged = Judged(SearchMode.KEYWORD, WEIGHTS, OWN, {}, scores)
        assert judged.passing(ranked, query) == ranked
        assert judged.record(query)["abstained"] is False
    below = math.nextafter(DEFAULT_MIN_SCORE, 0.0) - 1e-9
    judged = Judged(SearchMode.KEYWORD, WEIGHTS, OWN, {}, {"d": 0.0, "a": below, "c": 0.1})
    assert judged.passing(ranked, query) == []
    recorded = judged.record(query)
    assert (recorded["min_score"], recorded["evidence_floor"], recorded["result_floor"]) == (
        None,
        DEFAULT_MIN_SCORE,
        0.0,
    )
    assert (recorded["best"], recorded["abstained"]) == (below, True)
    assert judged.passing([], query) == []


def test_a_score_a_rounding_below_the_floor_passes_it() -> None:
    ranked = fused("a", "b", "c")
    judged = Judged(
        SearchMode.KEYWORD,
        WEIGHTS,
        OWN,
        {"a": Evidence(0.5), "b": Evidence(0.4), "c": Evidence(0.4)},
        {"a": 0.29999999999999993, "b": 0.3 - 1e-9, "c": 0.2},  # a: 0.3 as computed
    )
    query = SearchQuery("q", min_score=0.3)
    assert [item.key for item in judged.passing(ranked, query)] == ["a"]
    assert judged.record(query)["abstained"] is False


KOREAN_WEIGHTS = weights_of(("롤백", "배포"), 롤백=4, 배포=4)
KOREAN_TERMS = {"a": {"롤백", "배포"}, "b": {"배포"}, "c": {"롤백"}, "d": set()}


@pytest.mark.parametrize(
    ("weights", "terms"), [(WEIGHTS, TERMS), (KOREAN_WEIGHTS, KOREAN_TERMS)], ids=["en", "ko"]
)
def test_the_trace_recomputes_every_score_in_every_mode(
    weights: QueryWeights, terms: dict[str, set[str]]
) -> None:
    for mode in SearchMode:
        ranked = fused("a", "b", "c", "d")
        judged = judge(mode, weights, SCRIPTED, ranked, terms_of=terms, vector={"a": 0.8, "c": 0.3})
        record = judged.record(SearchQuery("q"))
        assert record["best"] == max(judged.score(item.key) for item in ranked)
        assert record["abstained"] == (record["best"] < DEFAULT_MIN_SCORE)
        assert record["terms"] == weights.to_dict()
        assert record["calibration"] == SCRIPTED.to_dict()
        assert record["script"] == weights.script.value
        trace = {
            "searches": [{"mode": mode.value, "relevance": record}],
            "results": [{"search": 0, "relevance": judged.entry(item.key)} for item in ranked],
        }
        json.dumps(trace)  # plain JSON, as a response carries it
        for index, item in enumerate(ranked):
            entry = trace["results"][index]["relevance"]
            assert entry["strength"] == strength_of(judged.score(item.key))
            recomputed = explain.recompute_relevance(trace, index)
            assert recomputed == pytest.approx(judged.score(item.key), abs=1e-12), (mode, item)


# --- strength and evidence ----------------------------------------------------------------


def test_strength_names_the_score_and_evidence_the_best_of_a_list() -> None:
    assert 0.0 < DEFAULT_MIN_SCORE < STRONG_SCORE <= 1.0
    assert strength_of(STRONG_SCORE) == strength_of(1.0) == "strong"
    assert strength_of(DEFAULT_MIN_SCORE) == "partial"
    assert strength_of(math.nextafter(STRONG_SCORE, 0.0)) == "partial"
    assert strength_of(math.nextafter(DEFAULT_MIN_SCORE, 0.0)) == strength_of(0.0) == "weak"

    def result(score: float) -> SearchResult:
        return SearchResult("a.md", 0, "text", score)

    assert result(STRONG_SCORE).strength == "strong"
    assert result(STRONG_SCORE).to_dict()["strength"] == "strong"
    assert evidence_of([]) == "none"
    # The best score wherever it ranks: lists are in rank order, not by score.
    assert evidence_of([result(0.0), result(STRONG_SCORE)]) == "strong"
    assert evidence_of([result(0.0)]) == "weak"
