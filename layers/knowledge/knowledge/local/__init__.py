"""The local stack (no AWS): ``kb``, a folder laid out like the bucket, watched and served.

``cli`` is the ``kb`` command (its parser ``cli_parser``, the commands ``cli_commands``,
what they open ``cli_open``, ``kb repo`` ``repo_cli``); ``server`` is ``kb serve``: the
HTTP API (``knowledge.service``) on the embedded store, through ``http_handler`` (the
stdlib HTTP layer), with ``watcher`` indexing the folder's changes (``snapshots``:
what a poll sees; ``changes``: what it does with one key); ``folder_writes`` are the write
routes on the folder (``write_quotas``: each agent's write counts, in memory),
``playground`` the page (and ``console`` the console's files), ``progress`` the index
progress lines, and ``mcp_server`` the knowledge base as an MCP server (``kb mcp``). Nothing is
imported here, so ``kb --help`` loads only what it needs.
"""
