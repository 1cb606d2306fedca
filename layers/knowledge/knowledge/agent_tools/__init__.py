"""What an agent reads: result lists, the shared library and the agent's tools.

``results`` merges adjacent chunks and cuts a list to a token budget, ``shared``
adds the granted shared-library scopes to a search, ``tool`` is the ``KnowledgeSearch``
tool an LLM agent calls and ``hits`` its answer as data (the design's hit shape),
``manage_tool`` the ``KnowledgeManage`` tool (status, and reindex where enabled),
``scoped_tools`` the tools of one fixed scope as any tool protocol serves them, and
``mcp_server`` those tools with the ``knowledge_context`` prompt (``mcp_prompt``) as an
MCP SDK server, for ``kb mcp`` and the deployed stack's remote endpoint alike (the only
modules here that import the MCP SDK).
"""
