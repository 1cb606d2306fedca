"""``Retry-After`` as seconds to wait, in both forms HTTP allows (RFC 9110, 10.2.3).

A server that throttles says when it will take requests again either as a number of
seconds (``Retry-After: 20``; providers also send fractions) or as an HTTP-date
(``Retry-After: Wed, 21 Oct 2026 07:28:00 GMT``). ``retry_after_seconds(value)`` gives
the seconds from now for both; ``None`` when there is no usable hint (missing, garbage,
negative, NaN), and ``0.0`` for a date already past. A huge value is returned as it is:
the caller caps it (and checks it against its deadline). Used by the embedding providers
(``knowledge.embedding``), so a date backs off the whole pool as seconds do, and by
``knowledge.client``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["retry_after_seconds"]


def retry_after_seconds(
    value: object, *, now: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> float | None:
    """Seconds to wait for a ``Retry-After`` header value (module docstring)."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        return _date_seconds(text, now)
    if math.isnan(seconds) or seconds < 0:
        return None
    return seconds


def _date_seconds(text: str, now: Callable[[], datetime]) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": HTTP-dates are always GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now()).total_seconds())
