"""The write counts on AWS: one DynamoDB item per agent and window, shared by every container.

Each Lambda container of the search function answers its own requests, so a count kept
in one container's memory would let an agent write as many windows' worth as there are
containers. The counts live in the stack's ``WriteQuotaTable`` instead (template.yaml:
on-demand, encrypted, ``expires_at`` as its TTL attribute), one item per agent and window
(``id`` = ``<agent>#<window start>``), and a request is counted by a single
``UpdateItem``:

- ``ADD requests :one, bytes :size`` creates the item or adds to it, atomically, so two
  containers counting at once both land;
- the ``ConditionExpression`` is ``knowledge.service.write_quotas.refused_by`` in
  DynamoDB's words (``requests < limit``, ``bytes <= limit - size``, a missing attribute
  passing), so the decision and the update are the same step and a refused request adds
  nothing;
- ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` hands back the counts that refused it,
  which name the limit in the answer without a read (the function's role may only
  ``UpdateItem`` that table);
- ``expires_at`` (the window's end) lets DynamoDB's TTL delete the item later; nothing
  ever reads an old window, so when it goes does not matter.

``boto3`` and the client load on the first counted write only; a failing call (throttled,
unreachable, refused) is a ``StoreUnavailableError``: the write is answered 503 and not
stored, since letting it through uncounted would open the door the quota closes.
"""

from __future__ import annotations

from typing import Any

from knowledge.core.errors import ConfigurationError, StoreUnavailableError
from knowledge.service.write_quotas import WINDOW_SECONDS, WindowUsage, WriteLimits

__all__ = ["DynamoDBCounter"]

_NAMES = {"#requests": "requests", "#bytes": "bytes", "#expires": "expires_at"}


def _count(item: dict[str, Any], name: str) -> int:
    value = item.get(name, {}).get("N")
    return int(value) if value is not None else 0


class DynamoDBCounter:
    """A ``WindowCounter`` in the table ``table`` (``WRITE_QUOTA_TABLE``); ``client`` for
    tests (default: a bounded boto3 client, made on first use)."""

    def __init__(self, table: str | None, client: Any | None = None) -> None:
        self._table = table
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            from knowledge.core.aws_clients import bounded_client  # boto3 on the first write

            self._client = bounded_client("dynamodb")
        return self._client

    def add(self, agent: str, window: int, size: int, limits: WriteLimits) -> WindowUsage | None:
        if not self._table:
            raise ConfigurationError(
                "WRITE_QUOTA_TABLE: the write quota table is not configured (set the write "
                "limits to 0 to run without one)"
            )
        values: dict[str, Any] = {
            ":one": {"N": "1"},
            ":size": {"N": str(size)},
            ":expires": {"N": str(window + WINDOW_SECONDS)},
        }
        conditions = []
        if limits.requests_per_minute:
            conditions.append("(attribute_not_exists(#requests) OR #requests < :requests)")
            values[":requests"] = {"N": str(limits.requests_per_minute)}
        if limits.bytes_per_minute:
            conditions.append("(attribute_not_exists(#bytes) OR #bytes <= :room)")
            values[":room"] = {"N": str(limits.bytes_per_minute - size)}
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": {"id": {"S": f"{agent}#{window}"}},
            "UpdateExpression": (
                "ADD #requests :one, #bytes :size SET #expires = if_not_exists(#expires, :expires)"
            ),
            "ExpressionAttributeNames": _NAMES,
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if conditions:
            request["ConditionExpression"] = " AND ".join(conditions)
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.update_item(**request)
        except ClientError as exc:
            answer: Any = exc.response  # the failed call's answer: its error and the old item
            if answer.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                item = answer.get("Item") or {}
                return WindowUsage(_count(item, "requests"), _count(item, "bytes"))
            raise StoreUnavailableError(f"write quota table: UpdateItem failed: {exc}") from exc
        except BotoCoreError as exc:
            raise StoreUnavailableError(f"write quota table: UpdateItem failed: {exc}") from exc
        return None
