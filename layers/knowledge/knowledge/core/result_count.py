"""How many results a search returns, under either of its two names.

``max_results`` is this API's name and ``top_k`` the design's (the ``query_knowledge``
tool an agent may already be prompted with): a search body, a tool call and an MCP call
take either, with the same limits (``core.model.MAX_MAX_RESULTS``). Both with the same
value is one request; both with different values is refused, naming both, rather than
one silently winning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from knowledge.core.errors import ValidationError

__all__ = ["MAX_RESULTS", "TOP_K", "given_result_count", "renamed_count_error"]

MAX_RESULTS: Final = "max_results"
TOP_K: Final = "top_k"


def given_result_count(arguments: Mapping[str, Any]) -> tuple[str, Any]:
    """``(name, value)`` of the result count ``arguments`` give: ``("top_k", v)`` when only
    ``top_k`` is given, else ``("max_results", v)`` (``None``: neither, or JSON ``null``).
    The value is not checked here: the caller checks it under the returned name.

    Raises ``ValidationError`` (field ``top_k``, both names in the message) when both are
    given with different values."""
    count, top_k = arguments.get(MAX_RESULTS), arguments.get(TOP_K)
    if top_k is None:
        return MAX_RESULTS, count
    if count is None:
        return TOP_K, top_k
    if type(count) is not type(top_k) and (isinstance(count, bool) or isinstance(top_k, bool)):
        same = False
    else:
        same = count == top_k
    if not same:
        raise ValidationError(
            TOP_K,
            f"top_k and max_results are two names for one limit and were given different "
            f"values (top_k {top_k!r}, max_results {count!r}): give one of them",
        )
    return MAX_RESULTS, count


def renamed_count_error(exc: ValidationError, name: str) -> ValidationError:
    """``exc`` as the caller's own field: a check of ``max_results`` (``SearchQuery``'s)
    refuses a value sent as ``top_k`` under the name that was sent."""
    if name == TOP_K and exc.field == MAX_RESULTS:
        return ValidationError(TOP_K, exc.message.replace(MAX_RESULTS, TOP_K))
    return exc
