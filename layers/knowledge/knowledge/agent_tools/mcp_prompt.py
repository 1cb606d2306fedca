"""The MCP prompt ``knowledge_context``: knowledge for a prompt with no tool call.

A host that supports the protocol's prompts primitive lists this prompt, asks it for a
query, and inserts what it answers (the design's ``KnowledgeAugmenter``, "autoRag"): one
user message whose text is the prompt block of ``knowledge.agent_tools.prompt_context`` (passages
in score order, each opened by its citation, within ``max_tokens``), or the tool's "No
relevant documents found for: <query>" when the search finds nothing (a line saying
so when no passage fits the budget).

Arguments (MCP prompt arguments are strings):

- ``query`` (required): what to search for;
- ``context`` (optional): one context of the server's agent. It can only narrow the
  server's scope, never widen it: a server across contexts (``kb mcp --cross-context``)
  searches that context alone; a server of one context accepts only that context's name;
- ``max_tokens`` (optional): the block's budget, an integer in [1,
  ``prompt_context.MAX_CONTEXT_TOKENS``] (default ``prompt_context.DEFAULT_MAX_TOKENS``);
- the ranking controls of the ``KnowledgeSearch`` tool (``knowledge.agent_tools.tool_controls``)
  in their text form, checked by the same functions: ``group_by`` (``"document"``),
  ``origin_weights`` (``"manual=1.5,shared=0.5"``, each within ``WEIGHT_BOUNDS``) and
  ``lesson_weight`` (``"1.4"``). They reorder or group what the searched scope holds, never
  widen it; the server's weights (``KB_ORIGIN_WEIGHTS`` ...) are the defaults a
  host's override for one prompt. A blank control is not given (hosts send empty strings
  for optional fields left empty). No ``explain``: the answer is text a model reads, and a
  trace is for whoever tunes the ranking (``kb context --explain``).

A bad argument is an ``INVALID_PARAMS`` protocol error naming it; a failing search an
``INTERNAL_ERROR`` with the fixed public message (``errors.public_message``), the cause
logged; the server keeps running either way.

It lives beside the tools (``knowledge.agent_tools.mcp_server`` serves both) so that every MCP
front end offers it: ``kb mcp`` and the deployed stack's remote endpoint
(``knowledge.aws.mcp_endpoint``), which may not import ``knowledge.local``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from mcp import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    GetPromptResult,
    Prompt,
    PromptArgument,
    PromptMessage,
    TextContent,
)

from knowledge.agent_tools.prompt_context import build_prompt_context, parse_max_tokens
from knowledge.agent_tools.tool import SearchBackend, passage_contexts
from knowledge.agent_tools.tool_controls import (
    GROUP_BY,
    LESSON_WEIGHT,
    ORIGIN_WEIGHTS,
    Controls,
    parse_controls,
    search_with_controls,
)
from knowledge.core.errors import ValidationError, public_message
from knowledge.core.model import SearchMode, SearchQuery, SearchResult
from knowledge.core.rank_weights import WEIGHT_BOUNDS, RankWeights, parse_origin_weights
from knowledge.core.scope import KnowledgeScope, validate_segment

__all__ = ["CONTEXT_PROMPT_NAME", "context_prompt", "get_context_prompt"]

logger = logging.getLogger(__name__)

CONTEXT_PROMPT_NAME = "knowledge_context"
_CONTROLS = (GROUP_BY, ORIGIN_WEIGHTS, LESSON_WEIGHT)
_ARGUMENTS = ("query", "context", "max_tokens", *_CONTROLS)


def context_prompt(scope: KnowledgeScope, *, cross_context: bool) -> Prompt:
    """The prompt as ``prompts/list`` shows it."""
    where = f"any context of agent {scope.agent}" if cross_context else f"only {scope.context}"
    low, high = WEIGHT_BOUNDS
    return Prompt(
        name=CONTEXT_PROMPT_NAME,
        title="Knowledge for this question",
        description=(
            "Passages of the knowledge base that match a question, each opened by its "
            "source, within a token budget: insert them into the conversation as "
            "reference material."
        ),
        arguments=[
            PromptArgument(name="query", description="What to search for", required=True),
            PromptArgument(
                name="context",
                description=f"One context of the knowledge base ({where})",
                required=False,
            ),
            PromptArgument(
                name="max_tokens",
                description="Budget of the inserted text in tokens (default 4000)",
                required=False,
            ),
            PromptArgument(
                name=GROUP_BY,
                description="document: one passage per document, its best one",
                required=False,
            ),
            PromptArgument(
                name=ORIGIN_WEIGHTS,
                description=(
                    f"Weigh passages by source ({low}-{high}, 1 = neutral), e.g. "
                    "manual=1.5,shared=0.5 (origins: upload, repo, manual, shared)"
                ),
                required=False,
            ),
            PromptArgument(
                name=LESSON_WEIGHT,
                description=f"Weight of lesson cards ({low}-{high})",
                required=False,
            ),
        ],
    )


def _invalid(field: str, message: str) -> MCPError:
    return MCPError(INVALID_PARAMS, f"Invalid parameter: {field}: {message}")


def _searched(
    scope: KnowledgeScope, cross_context: bool, wanted: str | None
) -> tuple[KnowledgeScope, bool]:
    """The scope a prompt searches: the server's, or one context of it (never wider)."""
    if wanted is None:
        return scope, cross_context
    try:
        name = validate_segment("context", wanted)
    except ValidationError as exc:
        raise _invalid("context", exc.message) from None
    if not cross_context and name != scope.context:
        raise _invalid("context", f"this server serves context '{scope.context}' only")
    return KnowledgeScope(scope.agent, name), False


def _max_tokens(value: str | None) -> int:
    if value is None:
        return parse_max_tokens(None)
    text = value.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        raise _invalid("max_tokens", "must be an integer")
    try:
        return parse_max_tokens(int(text))
    except ValidationError as exc:
        raise _invalid("max_tokens", exc.message) from None


def _controls(given: Mapping[str, str]) -> Controls:
    """The ranking controls among the prompt's string arguments, in the tool's form and
    checked by ``parse_controls`` (module docstring)."""
    raw: dict[str, object] = {}
    group_by = given.get(GROUP_BY, "").strip()
    if group_by:
        raw[GROUP_BY] = group_by
    origins = given.get(ORIGIN_WEIGHTS, "").strip()
    if origins:
        raw[ORIGIN_WEIGHTS] = parse_origin_weights(origins, ORIGIN_WEIGHTS)
    lesson = given.get(LESSON_WEIGHT, "").strip()
    if lesson:
        try:
            raw[LESSON_WEIGHT] = float(lesson)
        except ValueError:
            low, high = WEIGHT_BOUNDS
            raise ValidationError(
                LESSON_WEIGHT, f"must be a number between {low} and {high}"
            ) from None
    return parse_controls(raw)


def _plain_search(
    backend: SearchBackend, scope: KnowledgeScope, query: SearchQuery, include: bool | None
) -> list[SearchResult]:
    return backend.search(scope, query)


def get_context_prompt(
    backend: SearchBackend,
    scope: KnowledgeScope,
    arguments: Mapping[str, str] | None,
    *,
    cross_context: bool = False,
    mode: SearchMode | None = None,
    weights: RankWeights | None = None,
) -> GetPromptResult:
    """Answer ``prompts/get`` for ``knowledge_context`` (module docstring). ``weights``:
    the server's default origin and lesson weights (``None``: the backend's own), which
    the ``origin_weights`` / ``lesson_weight`` arguments override. Blocking: run it off
    the event loop."""
    given = dict(arguments or {})
    unknown = sorted(set(given) - set(_ARGUMENTS))
    if unknown:
        raise _invalid(unknown[0], f"is not an argument (allowed: {', '.join(_ARGUMENTS)})")
    searched, across = _searched(scope, cross_context, given.get("context"))
    max_tokens = _max_tokens(given.get("max_tokens"))
    try:
        controls = _controls(given)
        query = SearchQuery(text=given.get("query", ""), mode=mode, cross_context=across)
    except ValidationError as exc:
        raise _invalid(exc.field, exc.message) from None
    try:
        results, _, _ = search_with_controls(
            backend,
            searched,
            query,
            controls,
            host_weights=weights,
            include=None,
            search=_plain_search,
        )
    except ValidationError as exc:
        raise _invalid(exc.field, exc.message) from None
    except Exception as exc:
        logger.warning("knowledge context failed for %s: %s", searched, exc)
        raise MCPError(
            INTERNAL_ERROR, f"Failed to search knowledge: {public_message(exc)}"
        ) from None
    contexts = passage_contexts(searched, across)  # across contexts: each line names its own
    block = build_prompt_context(results, max_tokens, context_of=contexts)
    if block.text:
        text = block.text
    elif results:
        text = f"No passage found for: {query.text} fits max_tokens={max_tokens}"
    else:
        text = f"No relevant documents found for: {query.text}"
    dropped = f", {len(block.dropped)} dropped for the budget" if block.dropped else ""
    return GetPromptResult(
        description=(
            f"{len(block.passages)} passages from {searched}"
            f"{' (all contexts)' if across else ''}, {block.tokens_used} of {max_tokens} "
            f"tokens (estimated){dropped}"
        ),
        messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))],
    )
