"""knowledge.aws.invocation_time.TimeBudget, knowledge.aws.sqs_batch.queue_url_from_arn (pure)."""

from __future__ import annotations

import pytest

from knowledge.aws.invocation_time import TimeBudget
from knowledge.aws.sqs_batch import queue_url_from_arn
from knowledge.core.errors import ValidationError


def test_a_unit_starts_only_if_one_as_long_as_the_longest_leaves_the_reserve():
    remaining = [100_000]
    budget = TimeBudget(lambda: remaining[0], reserve_ms=30_000)
    assert budget.can_start()
    with budget.unit():
        remaining[0] -= 30_000  # the unit took 30 s
    assert (budget.remaining_ms(), budget.longest_ms) == (70_000, 30_000)
    assert budget.can_start()  # 70 - 30 = 40 >= 30
    with budget.unit():
        remaining[0] -= 10_000  # a shorter unit does not lower the bar
    assert budget.longest_ms == 30_000
    assert budget.can_start()  # 60 - 30 = 30 >= 30
    remaining[0] -= 1
    assert not budget.can_start()  # 59.999 - 30 < 30


def test_a_unit_that_raises_is_measured_too():
    remaining = [100_000]
    budget = TimeBudget(lambda: remaining[0], reserve_ms=0)

    def failing_unit() -> None:
        with budget.unit():
            remaining[0] -= 5_000
            raise RuntimeError("failed")

    with pytest.raises(RuntimeError):
        failing_unit()
    assert budget.longest_ms == 5_000


def test_unlimited_and_bad_reserve():
    assert TimeBudget.unlimited().can_start()
    with pytest.raises(ValidationError, match="reserve_ms"):
        TimeBudget(lambda: 1, reserve_ms=-1)


@pytest.mark.parametrize(
    ("arn", "url"),
    [
        (
            "arn:aws:sqs:us-east-1:123456789012:kb-DocumentEventsQueue-1AbC",
            "https://sqs.us-east-1.amazonaws.com/123456789012/kb-DocumentEventsQueue-1AbC",
        ),
        (
            "arn:aws-cn:sqs:cn-north-1:123456789012:q",
            "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q",
        ),
        ("arn:aws:sns:us-east-1:123456789012:topic", None),
        ("not an arn", None),
    ],
)
def test_queue_url_from_arn(arn, url):
    assert queue_url_from_arn(arn) == url
