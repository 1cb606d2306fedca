"""The local stack's fair scheduler: one job per scope at a time, in order; no agent takes
every worker; agents take turns."""

from __future__ import annotations

import threading
import time

import pytest

from knowledge.core.scope import KnowledgeScope
from knowledge.local.scheduling import FairScheduler, ScopeLocks

A1 = KnowledgeScope("agent-a", "one")
A2 = KnowledgeScope("agent-a", "two")
B1 = KnowledgeScope("agent-b", "one")
C1 = KnowledgeScope("agent-c", "one")


def wait_running(scheduler: FairScheduler, scope: KnowledgeScope) -> None:
    deadline = time.monotonic() + 5
    while not scheduler.running(scope):
        assert time.monotonic() < deadline, f"no job of {scope} started"
        time.sleep(0.005)


@pytest.fixture
def scheduler():
    scheduler = FairScheduler(workers=2)
    yield scheduler
    scheduler.stop()


def test_a_busy_agent_never_takes_the_last_worker(scheduler: FairScheduler) -> None:
    release = threading.Event()
    started: list[str] = []
    scheduler.submit(A1, lambda: (started.append("a1"), release.wait(10)))
    wait_running(scheduler, A1)
    scheduler.submit(A2, lambda: started.append("a2"))  # same agent: waits for a worker of its own
    done = scheduler.submit(B1, lambda: started.append("b1"))
    done.result(5)  # another agent's job runs while agent-a's first one is held
    assert started == ["a1", "b1"]
    assert scheduler.running(A1)
    assert scheduler.queued(A2) == 1
    release.set()
    scheduler.submit(A2, lambda: None).result(5)
    assert started == ["a1", "b1", "a2"]


def test_jobs_of_one_scope_run_one_at_a_time_in_order(scheduler: FairScheduler) -> None:
    seen: list[int] = []
    inside = threading.Semaphore(1)

    def job(n: int) -> int:
        assert inside.acquire(blocking=False), "two jobs of one scope at once"
        time.sleep(0.01)
        seen.append(n)
        inside.release()
        return n

    futures = [scheduler.submit(A1, lambda n=n: job(n)) for n in range(8)]
    assert [future.result(5) for future in futures] == list(range(8))
    assert seen == list(range(8))


def test_agents_take_turns(scheduler: FairScheduler) -> None:
    hold = threading.Event()
    order: list[str] = []
    # Agent c's job holds one worker; the other one serves a and b by turns.
    scheduler.submit(C1, hold.wait)
    wait_running(scheduler, C1)
    futures = [
        scheduler.submit(scope, lambda name=name: order.append(name))
        for scope, name in [(A1, "a1"), (A2, "a2"), (A1, "a1'"), (B1, "b1")]
    ]
    for future in futures:
        future.result(5)
    hold.set()
    assert order.index("b1") < order.index("a2"), order


def test_a_failing_job_hands_its_error_to_the_future(scheduler: FairScheduler) -> None:
    def fail() -> None:
        raise RuntimeError("broken document")

    with pytest.raises(RuntimeError, match="broken document"):
        scheduler.submit(A1, fail).result(5)
    assert scheduler.submit(A1, lambda: "next").result(5) == "next"


def test_stop_cancels_what_has_not_started() -> None:
    scheduler = FairScheduler(workers=1)
    hold = threading.Event()
    running = scheduler.submit(A1, hold.wait)
    waiting = scheduler.submit(B1, lambda: "never")
    wait_running(scheduler, A1)
    stopper = threading.Thread(target=scheduler.stop)
    stopper.start()  # waits for the running job
    deadline = time.monotonic() + 5
    while not waiting.cancelled():
        assert time.monotonic() < deadline, "the waiting job was not cancelled"
        time.sleep(0.01)
    hold.set()
    stopper.join(5)
    assert running.result(5) is True
    with pytest.raises(RuntimeError):
        scheduler.submit(A1, lambda: None)


def test_workers_are_checked() -> None:
    with pytest.raises(ValueError, match="workers"):
        FairScheduler(workers=0)


def test_scope_locks_are_per_scope() -> None:
    locks = ScopeLocks()
    assert locks.of(A1) is locks.of(KnowledgeScope("agent-a", "one"))
    assert locks.of(A1) is not locks.of(A2)


def test_idle_for_is_zero_while_a_job_runs_or_waits_then_counts_from_its_end(
    scheduler: FairScheduler,
) -> None:
    scope = KnowledgeScope("ops-bot", "runbooks")
    gate = threading.Event()
    running = scheduler.submit(scope, gate.wait)
    waiting = scheduler.submit(scope, lambda: None)
    wait_running(scheduler, scope)
    assert scheduler.idle_for() == 0.0
    gate.set()
    running.result(10)
    waiting.result(10)
    deadline = time.monotonic() + 10
    while scheduler.running(scope) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    assert 0.2 <= scheduler.idle_for() < 10
