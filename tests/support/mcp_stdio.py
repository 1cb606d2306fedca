"""A real ``kb mcp`` over stdio, driven by the official MCP SDK client (the MCP tests)."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def run_session(db: Path, extra: list[str], body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """Start ``kb mcp --db DB --embedder hashing EXTRA...``, initialise a client session and
    return what ``body`` returns (within 60 s)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "knowledge.local.cli", "mcp", "--db", str(db), "--embedder", "hashing", *extra],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )

    async def go() -> Any:
        with anyio.fail_after(60):
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await body(session)

    return anyio.run(go)
