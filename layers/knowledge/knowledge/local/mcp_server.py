"""``kb mcp``: the knowledge base as a Model Context Protocol server (official ``mcp`` SDK).

The tools are ``knowledge.agent_tools.scoped_tools.ScopedTools``, defined there once for every
front end, and ``knowledge.agent_tools.mcp_server`` makes them an SDK ``Server`` (the deployed
stack's remote endpoint serves the same one); this module only runs it, over stdio
(default) or streamable HTTP bound to localhost:

- ``knowledge_search(query, max_results=5, top_k=None, file_pattern=None,
  max_tokens=4000, source_type=None, include_shared=None, group_by=None,
  origin_weights=None, lesson_weight=None, explain=False)``: the ``KnowledgeSearch`` tool
  (``knowledge.agent_tools.tool``), with its exact messages and citations as text, and its
  answer as the protocol's structured content (``{query, evidence, results: [{score,
  source, title, snippet, url, agent, context, source_type, ...}], dropped}``), declared
  as the tool's ``outputSchema`` (``knowledge.agent_tools.hits.ANSWER_SCHEMA``) so a client
  can check it;
- ``knowledge_status()``: the scope's index status and the documents it could not index
  (``KnowledgeManageTool``'s status);
- ``knowledge_documents(limit=100, cursor=None)``: one page of the scope's documents as
  the index records them, with the cursor of the next page;
- ``knowledge_reindex()``, only with ``kb mcp --allow-reindex`` (``reindex`` given):
  ``KnowledgeManageTool``'s reindex of the configured scope. Off by default, and there is
  no write tool: a document a model writes could carry instructions into every later
  search.

One prompt (the protocol's prompts primitive, ``knowledge.agent_tools.mcp_prompt``):

- ``knowledge_context(query, context=None, max_tokens=None, group_by=None,
  origin_weights=None, lesson_weight=None)``: the prompt block of a search
  (``knowledge.agent_tools.prompt_context``), so a host that supports prompts inserts
  knowledge with no tool call; ``context`` only narrows the server's scope; the ranking
  controls are the tool's, as strings, over the server's ``weights``.

The scope is fixed when the server starts (``--agent``, ``--context``, ``--cross-context``).
No tool takes an agent, a context or a cross-context switch, and unknown arguments are
refused, so nothing a model sends can choose or widen the scope. The backend is any local
store or a deployed API (``knowledge.client.KnowledgeClient``).

Failures are tool errors (``is_error`` with a message for the model, no structured
content); the server never dies on a bad call, and nothing is written to stdout but the
protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import anyio
from mcp.server.stdio import stdio_server

from knowledge.agent_tools.manage_tool import Reindex, format_status
from knowledge.agent_tools.mcp_server import build_server, call_result
from knowledge.agent_tools.scoped_tools import (
    DOCUMENTS_TOOL_NAME,
    REINDEX_TOOL_NAME,
    SEARCH_TOOL_NAME,
    STATUS_TOOL_NAME,
    ScopedBackend,
)
from knowledge.core.errors import ValidationError
from knowledge.core.model import SearchMode
from knowledge.core.rank_weights import RankWeights
from knowledge.core.scope import KnowledgeScope

__all__ = [
    "DOCUMENTS_TOOL_NAME",
    "REINDEX_TOOL_NAME",
    "SEARCH_TOOL_NAME",
    "STATUS_TOOL_NAME",
    "StatusBackend",
    "build_server",
    "call_result",
    "format_status",
    "serve_mcp",
]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

StatusBackend = ScopedBackend
"""A store or an API client: searches a scope, reports its status, lists its documents."""


def serve_mcp(
    backend: StatusBackend,
    scope: KnowledgeScope,
    *,
    cross_context: bool = False,
    mode: SearchMode | None = None,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    reindex: Reindex | None = None,
    shared_libraries: Sequence[KnowledgeScope] = (),
    weights: RankWeights | None = None,
) -> None:
    """Run the server until the client goes away (stdio) or the process is stopped (http).

    The HTTP transport listens on localhost only: it has no authentication of its own.
    """
    if transport != "stdio" and host not in LOCAL_HOSTS:
        raise ValidationError(
            "host",
            f"the MCP HTTP transport has no authentication; bind it to 127.0.0.1, not {host}",
        )
    server = build_server(
        backend,
        scope,
        cross_context=cross_context,
        mode=mode,
        reindex=reindex,
        shared_libraries=shared_libraries,
        weights=weights,
    )
    if transport == "stdio":

        async def run_stdio() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(run_stdio)
        return
    import uvicorn

    app = server.streamable_http_app(host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")
