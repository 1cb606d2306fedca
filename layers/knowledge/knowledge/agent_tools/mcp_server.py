"""``ScopedTools`` as a Model Context Protocol server of the official ``mcp`` SDK.

``mcp_server(tools)`` turns the tools of one fixed scope (``knowledge.agent_tools.scoped_tools``)
and the ``knowledge_context`` prompt (``knowledge.agent_tools.mcp_prompt``) into the SDK's
low-level ``Server``; it knows no transport. Two front ends run it:

- ``kb mcp`` (``knowledge.local.mcp_server``): over stdio, or streamable HTTP bound to
  localhost, for a scope fixed on the command line;
- the deployed stack's remote endpoint (``knowledge.aws.mcp_endpoint``): streamable HTTP
  in stateless mode behind API Gateway, one server per request, for the scope of the URL
  and the caller's grant.

Both answer the same ``tools/list``, ``tools/call``, ``prompts/list`` and ``prompts/get``:

- each tool advertises exactly its own ``input_schema`` (``additionalProperties: false``)
  and ``output_schema``; the tool itself checks the arguments and refuses unknown ones
  instead of silently dropping them (the SDK's low-level server, not ``MCPServer``,
  which would build schemas from Python signatures);
- a tool's answer is its text and, on success, its data as structured content
  (``call_result``); a failure is a tool error (``is_error``), never a protocol error,
  and never ends the server;
- tool calls and prompts run in a worker thread: stores block (SQLite, HTTP).

The scope, the cross-context switch, the mode, the shared-library grant and the default
weights are ``ScopedTools``', fixed before the server exists: nothing a client or a model
sends can choose or widen them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

from knowledge.agent_tools.manage_tool import Reindex
from knowledge.agent_tools.mcp_prompt import CONTEXT_PROMPT_NAME, context_prompt, get_context_prompt
from knowledge.agent_tools.scoped_tools import ScopedBackend, ScopedTools
from knowledge.agent_tools.tool import ToolResult
from knowledge.core.model import SearchMode
from knowledge.core.rank_weights import RankWeights
from knowledge.core.scope import KnowledgeScope

__all__ = ["SERVER_NAME", "build_server", "call_result", "mcp_server"]

SERVER_NAME = "knowledge-search"


def call_result(result: ToolResult) -> CallToolResult:
    """A tool's answer as MCP's: the text, and the data as structured content (none for an
    error, which a client does not check against the output schema)."""
    structured = None if result.is_error or result.structured is None else result.structured
    return CallToolResult(
        content=[TextContent(type="text", text=result.content)],
        structured_content=None if structured is None else dict(structured),
        is_error=result.is_error,
    )


def mcp_server(tools: ScopedTools) -> Server[Any]:
    """An MCP ``Server`` answering ``tools``' calls and the prompt of their scope (module
    docstring)."""
    listed = [
        Tool(
            name=spec.name,
            description=spec.description,
            input_schema=dict(spec.input_schema),
            output_schema=None if spec.output_schema is None else dict(spec.output_schema),
        )
        for spec in tools.specs()
    ]

    async def on_list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=listed)

    def call(name: str, arguments: dict[str, Any]) -> CallToolResult:
        return call_result(tools.call(name, arguments))  # never raises

    async def on_call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        return await anyio.to_thread.run_sync(call, params.name, dict(params.arguments or {}))

    prompt = context_prompt(tools.scope, cross_context=tools.cross_context)

    async def on_list_prompts(ctx: Any, params: PaginatedRequestParams | None) -> ListPromptsResult:
        return ListPromptsResult(prompts=[prompt])

    async def on_get_prompt(ctx: Any, params: GetPromptRequestParams) -> GetPromptResult:
        if params.name != CONTEXT_PROMPT_NAME:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}")

        def get() -> GetPromptResult:
            return get_context_prompt(  # the tools' backend: the granted library too
                tools.searched,
                tools.scope,
                params.arguments,
                cross_context=tools.cross_context,
                mode=tools.mode,
                weights=tools.weights,
            )

        return await anyio.to_thread.run_sync(get)

    return Server(
        SERVER_NAME,
        instructions=tools.instructions,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_prompts=on_list_prompts,
        on_get_prompt=on_get_prompt,
    )


def build_server(
    backend: ScopedBackend,
    scope: KnowledgeScope,
    *,
    cross_context: bool = False,
    mode: SearchMode | None = None,
    reindex: Reindex | None = None,
    shared_libraries: Sequence[KnowledgeScope] = (),
    weights: RankWeights | None = None,
) -> Server[Any]:
    """``mcp_server`` over ``ScopedTools(backend, scope, ...)``; the arguments are
    ``ScopedTools``'."""
    return mcp_server(
        ScopedTools(
            backend,
            scope,
            cross_context=cross_context,
            mode=mode,
            reindex=reindex,
            shared_libraries=shared_libraries,
            weights=weights,
        )
    )
