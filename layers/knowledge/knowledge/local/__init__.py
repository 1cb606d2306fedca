"""The local stack (no AWS): ``kb``, a folder laid out like the bucket, watched and served.

``cli`` is the ``kb`` command; ``server`` serves the HTTP API (``knowledge.service``)
on the embedded store, ``watcher`` indexes the folder's changes, ``writes`` are the
write routes on the folder, ``playground`` the page, ``progress`` the index progress
lines, and ``mcp_server`` the knowledge base as an MCP server (``kb mcp``). Nothing is
imported here, so ``kb --help`` loads only what it needs.
"""
