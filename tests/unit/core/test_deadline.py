"""Time budgets (``knowledge.core.deadline``) and the OpenSearch settings that use them."""

from __future__ import annotations

import time

import pytest

from knowledge.core.deadline import Deadline, current_deadline, request_budget, time_budget
from knowledge.core.errors import ConfigurationError, ValidationError
from knowledge.stores.opensearch import OpenSearchConfig


def test_a_deadline_counts_down_to_zero() -> None:
    now = [100.0]  # a clock the test moves: no thresholds on how fast the test ran
    deadline = Deadline.after(0.2, clock=lambda: now[0])
    assert deadline.remaining() == pytest.approx(0.2)
    assert deadline.timeout(4.0) == pytest.approx(0.2)
    assert deadline.timeout(0.05) == 0.05
    now[0] = 100.15
    assert deadline.remaining() == pytest.approx(0.05)
    assert deadline.timeout(4.0) == pytest.approx(0.05)
    assert not deadline.expired()
    now[0] = 100.2
    assert deadline.expired()
    assert deadline.remaining() == 0.0
    now[0] = 101.0
    assert deadline.remaining() == 0.0
    real = Deadline.after(30)
    assert 0.0 < real.remaining() <= 30.0
    assert not real.expired()
    assert Deadline.after(-1).remaining() == 0.0
    assert Deadline.after(0).expired()
    with pytest.raises(ValidationError, match="seconds"):
        Deadline.after("soon")  # type: ignore[arg-type]


def test_a_budget_is_current_inside_its_block_and_a_nearer_outer_one_wins() -> None:
    assert current_deadline() is None
    with time_budget(10) as outer:
        assert current_deadline() is outer
        with time_budget(0.5) as inner:
            assert current_deadline() is inner
            assert inner.remaining() <= 0.5
        with time_budget(60) as wider:
            assert wider is outer  # a block cannot widen its caller's budget
        assert current_deadline() is outer
    assert current_deadline() is None


@pytest.mark.parametrize(
    ("remaining_ms", "budget"),
    [(4_000, 2.5), (30_000, 27.5), (900_000, 27.5), (1_000, 0.0)],
)
def test_a_request_budget_is_the_time_left_within_the_gateway_limit_less_the_answer(
    remaining_ms: int, budget: float
) -> None:
    assert request_budget(remaining_ms) == pytest.approx(budget)


def test_time_is_monotonic_not_wall_clock() -> None:
    before = time.monotonic()
    deadline = Deadline.after(1)
    after = time.monotonic()
    assert before + 1 <= deadline.at <= after + 1


def test_opensearch_time_and_refresh_settings_from_the_environment() -> None:
    config = OpenSearchConfig.from_env(
        {
            "OPENSEARCH_URL": "http://localhost:9200",
            "OPENSEARCH_SEARCH_TIMEOUT": "3",
            "OPENSEARCH_SEARCH_MAX_RETRIES": "0",
            "OPENSEARCH_SEARCH_BUDGET": "8",
            "OPENSEARCH_REFRESH_INTERVAL": "500ms",
            "OPENSEARCH_WAIT_FOR_REFRESH": "true",
            "OPENSEARCH_INDEX_PER_AGENT": "true",
        }
    )
    assert (config.search_timeout, config.search_max_retries, config.search_budget) == (3, 0, 8)
    assert config.refresh_interval == "500ms"
    assert config.wait_for_refresh is True
    assert config.index_per_agent is True
    defaults = OpenSearchConfig(url="http://localhost:9200")
    assert (defaults.search_timeout, defaults.search_max_retries) == (4.0, 1)
    assert defaults.refresh_interval == "1s"
    assert defaults.wait_for_refresh is False  # searchable within refresh_interval
    assert defaults.index_per_agent is False


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"refresh_interval": "soon"}, "refresh_interval"),
        ({"search_timeout": 0}, "search_timeout"),
        ({"search_max_retries": -1}, "search_max_retries"),
        ({"index_per_agent": "yes"}, "index_per_agent"),
        ({"index_per_agent": True, "index_name": "k" * 121}, "index"),
    ],
)
def test_bad_time_and_isolation_settings_are_named(settings: dict, field: str) -> None:
    with pytest.raises(ConfigurationError, match=f"opensearch {field}"):
        OpenSearchConfig(url="http://localhost:9200", **settings)


def test_each_agent_gets_its_own_index_one_to_one() -> None:
    shared = OpenSearchConfig(url="http://localhost:9200", index_name="kb")
    assert shared.index_for("Ops_Bot") == "kb"
    strict = OpenSearchConfig(url="http://localhost:9200", index_name="kb", index_per_agent=True)
    names = {strict.index_for(agent) for agent in ("ops-bot", "Ops-bot", "ops_bot", "_ops-bot")}
    assert len(names) == 4  # never two agents in one index
    assert strict.index_for("ops-bot") == "kb-agent-ops-bot"
    assert strict.index_for("Ops_Bot") == "kb-agent-_ops___bot"
    assert all(name == name.lower() for name in names)


def test_each_shared_library_gets_its_own_index_which_no_agent_can_have() -> None:
    shared = OpenSearchConfig(url="http://localhost:9200", index_name="kb")
    assert shared.index_for("_shared", "playbooks") == "kb"
    strict = OpenSearchConfig(url="http://localhost:9200", index_name="kb", index_per_agent=True)
    libraries = {strict.index_for("_shared", c) for c in ("playbooks", "Playbooks", "p_b", "p-b")}
    assert len(libraries) == 4
    assert strict.index_for("_shared", "playbooks") == "kb-agent-__shared_-playbooks"
    # "_-" never appears in an encoded agent name: no agent's index is a library's, even
    # for agent names that spell the library's index out.
    agents = ("_shared-playbooks", "_shared_-playbooks", "_Shared-playbooks", "__shared")
    assert not libraries & {strict.index_for(agent) for agent in agents}
    assert all(name.startswith("kb-agent-") for name in libraries)  # inside the IAM grant
    with pytest.raises(ValueError, match="context"):
        strict.index_for("_shared")  # a library is one context
    # At most OpenSearch's 255 bytes, whatever the index and context names.
    long_index = OpenSearchConfig(
        url="http://localhost:9200", index_name="k" * 120, index_per_agent=True
    )
    names = {long_index.index_for("_shared", c) for c in ("A" * 64, "B" * 64, "a" * 64)}
    assert len(names) == 3
    assert all(len(n.encode()) <= 255 and n.startswith("k" * 120 + "-agent-") for n in names)
