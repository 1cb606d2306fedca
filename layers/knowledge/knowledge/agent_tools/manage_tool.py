"""The ``KnowledgeManage`` tool: the index status of the agent's scope, and its reindex.

The design's management tool, beside ``KnowledgeSearch`` (``knowledge.agent_tools.tool``), with
the same injection (``ToolContext``: the host's store and scope) and the same habits:
``run`` never raises, refusals -> parameters -> action, errors are ``ToolResult.error``
with a message for the model and the exception as ``cause`` for the host's log.

The model passes one argument, ``action``:

- ``"status"``: the scope's counts, state, last indexing and the documents that could
  not be indexed (``format_status``); ``ToolResult.structured`` is
  ``{"agent", "context", **IndexStatus.to_dict()}``;
- ``"reindex"``: re-index the scope from its source, only when the host enabled it by
  constructing the tool with ``reindex`` (a callable that re-indexes one scope: a
  ``KnowledgeClient``'s ``reindex``, or a local ``index_source``); otherwise the action
  is not offered (the schema's ``enum`` lacks it) and asking for it is an invalid
  parameter. A reindex costs indexing time (and embedding money), so it is the host's
  decision to offer it.

Both act on ``ToolContext.scope`` alone: the tool takes no agent, context or path, and
refuses unknown arguments, so nothing a model sends can choose or widen the scope. There
is no write action: a document a model writes could carry instructions into every later
search.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from knowledge.agent_tools.tool import (
    NO_SCOPE_MESSAGE,
    NO_STORE_MESSAGE,
    ToolContext,
    ToolDefinition,
    ToolResult,
)
from knowledge.core.errors import ValidationError, public_message
from knowledge.core.model import IndexStatus
from knowledge.core.scope import KnowledgeScope

__all__ = [
    "ACTIONS",
    "MANAGE_TOOL_NAME",
    "REINDEX",
    "STATUS",
    "KnowledgeManageTool",
    "Reindex",
    "format_reindex",
    "format_status",
]

logger = logging.getLogger(__name__)

MANAGE_TOOL_NAME = "KnowledgeManage"
STATUS = "status"
REINDEX = "reindex"
ACTIONS = (STATUS, REINDEX)


class _Reported(Protocol):
    def to_dict(self) -> Mapping[str, Any]: ...


Reindex = Callable[[KnowledgeScope], "Mapping[str, Any] | _Reported"]
"""Re-indexes one scope from its source and says what it did (a mapping, or a value with
``to_dict`` such as ``IndexResult``)."""


def format_status(scope: KnowledgeScope, status: IndexStatus) -> str:
    """The status as a few lines a model can read, problems last."""
    last = "never" if status.last_indexed_at is None else status.last_indexed_at.isoformat()
    lines = [
        f"Knowledge scope {scope}: {status.state.value}",
        f"documents: {status.document_count}, chunks: {status.chunk_count}, last indexed: {last}",
    ]
    if status.message:
        lines.append(f"message: {status.message}")
    unread = status.unread_summary()
    if unread:
        lines.append(unread)
    if status.problems:
        lines.append(f"documents not indexed ({len(status.problems)}):")
        lines.extend(f"- {p.path}: {p.reason}" for p in status.problems)
    return "\n".join(lines)


def format_reindex(scope: KnowledgeScope, answer: Mapping[str, Any]) -> str:
    """What a reindex did, in one line: its counts (``indexed_documents 2, ...``)."""
    done = ", ".join(
        f"{k} {v}"
        for k, v in answer.items()
        if k not in ("agent", "context") and isinstance(v, str | int | float)
    )
    return f"Re-index of knowledge scope {scope}: {done or 'accepted'}"


def _reported(answer: Mapping[str, Any] | _Reported) -> dict[str, Any]:
    return dict(answer) if isinstance(answer, Mapping) else dict(answer.to_dict())


class KnowledgeManageTool(ToolDefinition):
    """The ``KnowledgeManage`` tool (module docstring); ``reindex`` enables that action."""

    name = MANAGE_TOOL_NAME

    def __init__(self, *, reindex: Reindex | None = None) -> None:
        self._reindex = reindex

    @property
    def actions(self) -> tuple[str, ...]:
        """The actions this tool offers: ``status``, and ``reindex`` when enabled."""
        return ACTIONS if self._reindex is not None else (STATUS,)

    @property
    def description(self) -> str:
        text = (
            "Report the state of this agent's knowledge base: how many documents and "
            "chunks are indexed, when it was last indexed, and which documents could not "
            "be indexed and why (action: status). Use it when a search finds nothing you "
            "expected, before concluding the knowledge is missing."
        )
        if self._reindex is not None:
            text += (
                "\nAction reindex re-indexes the knowledge base from its source: only when "
                "the status shows documents missing or stale; it takes a while."
            )
        return text

    @property
    def input_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments; a fresh dict each time, safe to modify."""
        return {
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": list(self.actions),
                    "description": "status: the index status; reindex: index the source again"
                    if self._reindex is not None
                    else "status: the index status",
                },
            },
            "required": ["action"],
            "additionalProperties": False,
        }

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        """Refusals -> parameters -> the action; never raises."""
        if context.store is None:
            return ToolResult.error(NO_STORE_MESSAGE)
        if context.scope is None:
            return ToolResult.error(NO_SCOPE_MESSAGE)
        try:
            action = self._action(arguments)
        except ValidationError as exc:
            return ToolResult.error(f"Invalid parameter: {exc}", exc)
        if action == REINDEX:
            return self.reindex(context)
        return self.status(context)

    def _action(self, arguments: object) -> str:
        if not isinstance(arguments, Mapping):
            raise ValidationError("arguments", "must be an object")
        unknown = sorted(str(k) for k in arguments if k != "action")
        if unknown:
            raise ValidationError(unknown[0], "is not a known property (allowed: action)")
        action = arguments.get("action")
        offered = ", ".join(self.actions)
        if action is None:
            raise ValidationError("action", f"is required (one of: {offered})")
        if action == REINDEX and self._reindex is None:
            raise ValidationError("action", f"'reindex' is not enabled here (one of: {offered})")
        if action not in self.actions:
            raise ValidationError("action", f"{action!r} is not one of: {offered}")
        return str(action)

    def status(self, context: ToolContext) -> ToolResult:
        """The status of ``context.scope``, as text and as data; never raises."""
        if context.store is None:
            return ToolResult.error(NO_STORE_MESSAGE)
        if context.scope is None:
            return ToolResult.error(NO_SCOPE_MESSAGE)
        scope = context.scope
        status_of = getattr(context.store, "status", None)
        if not callable(status_of):
            return ToolResult.error("This knowledge backend cannot report its status")
        try:
            status: IndexStatus = status_of(scope)
        except Exception as exc:
            logger.warning("knowledge status failed for %s: %s", scope, exc)
            return ToolResult.error(
                f"Failed to read the knowledge status: {public_message(exc)}", exc
            )
        data = {"agent": scope.agent, "context": scope.context, **status.to_dict()}
        return ToolResult.success(format_status(scope, status), structured=data)

    def reindex(self, context: ToolContext) -> ToolResult:
        """Re-index ``context.scope`` (only when enabled); never raises."""
        if self._reindex is None:
            return ToolResult.error(
                "Invalid parameter: action: 'reindex' is not enabled here (one of: status)"
            )
        if context.scope is None:
            return ToolResult.error(NO_SCOPE_MESSAGE)
        scope = context.scope
        try:
            answer = _reported(self._reindex(scope))
        except Exception as exc:
            logger.warning("knowledge reindex failed for %s: %s", scope, exc)
            return ToolResult.error(f"Failed to re-index: {public_message(exc)}", exc)
        data = {"agent": scope.agent, "context": scope.context, **answer}
        return ToolResult.success(format_reindex(scope, answer), structured=data)
