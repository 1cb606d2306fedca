"""The rule that picks how a vector search walks a scope from its size
(``stores.opensearch.scope_size``; the figures behind it: bench/REPORT.md section 9.2)."""

from __future__ import annotations

from knowledge.stores.opensearch.read.scope_size import (
    CHUNKS_PER_EF,
    EXACT_MAX_CHUNKS,
    LARGE_SCOPE_CHUNKS,
    MAX_EF_SEARCH,
    ScopeSizes,
    ef_search_for,
    exact_for,
)


def test_the_bounds_are_the_measured_ones() -> None:
    assert (LARGE_SCOPE_CHUNKS, EXACT_MAX_CHUNKS, CHUNKS_PER_EF) == (200, 60_000, 12)


def test_small_scopes_are_walked_as_configured() -> None:
    for chunks in (None, 0, 1, 40, LARGE_SCOPE_CHUNKS):
        assert not exact_for(chunks)
        assert ef_search_for(200, chunks) == 200
    assert ef_search_for(350, LARGE_SCOPE_CHUNKS) == 350  # the operator's EfSearch


def test_mid_size_scopes_are_scored_exactly_up_to_the_bound() -> None:
    for chunks in (LARGE_SCOPE_CHUNKS + 1, 1_053, 2_550, 4_775, 16_217, 56_061, EXACT_MAX_CHUNKS):
        assert exact_for(chunks), chunks
    assert not exact_for(EXACT_MAX_CHUNKS + 1)
    assert not exact_for(10**9)


def test_serverless_keeps_the_walk_with_a_longer_candidate_list() -> None:
    assert not exact_for(4_775, serverless=True)
    assert not exact_for(56_061, serverless=True)
    assert ef_search_for(200, 4_775) == 398  # a twelfth, rounded up


def test_big_scopes_get_a_twelfth_of_their_chunks_as_ef_search() -> None:
    assert ef_search_for(200, 2_001) == 200  # a twelfth is less than the configured 200
    assert ef_search_for(200, 2_401) == 201
    assert ef_search_for(200, 60_001) == 5_001
    assert ef_search_for(200, 90_000) == 7_500
    assert ef_search_for(200, 10**9) == MAX_EF_SEARCH
    assert ef_search_for(8_000, 90_000) == 8_000  # never below the configured value


def test_zero_sends_none_whatever_the_scope() -> None:
    assert ef_search_for(0, 10**6) == 0
    assert ef_search_for(0, 4_775) == 0


def test_benchmark_overrides() -> None:
    assert ef_search_for(200, 30_000, chunks_per_ef=20) == 1_500
    assert ef_search_for(200, 3_000, large_scope_chunks=5_000) == 200
    assert exact_for(3_000, large_scope_chunks=5_000) is False
    assert exact_for(80_000, exact_max_chunks=100_000) is True


def test_scope_sizes_are_counted_once_per_ttl() -> None:
    now = [0.0]
    sizes = ScopeSizes(ttl=300.0, clock=lambda: now[0])
    counted: list[int] = []

    def count() -> int:
        counted.append(1)
        return 4_775 + len(counted)

    key = ("kb", None, False)
    assert sizes.get(key, count) == 4_776  # type: ignore[arg-type]
    now[0] = 299.0
    assert sizes.get(key, count) == 4_776  # type: ignore[arg-type]
    now[0] = 301.0
    assert sizes.get(key, count) == 4_777  # type: ignore[arg-type]
    assert len(counted) == 2
