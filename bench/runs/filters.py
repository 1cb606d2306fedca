"""Embedded store: search filter SQL over one scope, next to no filter.

Cost of search filters in the embedded store's SQL: no filter may make a search slow.

One SQLite file in memory with the store's own tables (``schema.create_or_upgrade``) and
``--chunks`` chunks of one scope, with sidecar-like metadata (strings, numbers written as
strings, lists). Measured in one run, as the time of the scope read that the vector side
makes (``SELECT id FROM chunks WHERE scope AND filter``), best of ``--repeat``:

- ``no filter``: the scope condition alone (the baseline);
- ``one comparison``: ``team eq "sre"``;
- ``numeric range``: ``year gte 2015`` (sidecar strings compared as numbers);
- ``largest allowed``: 93 nodes at depth 3 (``or`` of ``and`` groups of every operator,
  ``in`` lists of 100 values), near ``MAX_FILTER_NODES``.

Prints milliseconds and the ratio to the baseline.
Run: ``.venv/bin/python -m bench filters --chunks 20000``.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import time
from typing import Any

from knowledge.core.filter_language import parse_filter
from knowledge.stores.embedded.filter_sql import filter_sql, register_functions
from knowledge.stores.embedded.schema import create_or_upgrade

__all__ = ["add_arguments", "main"]

_OPS = ("eq", "ne", "gt", "lt", "in", "contains", "starts_with")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunks", type=int, default=20_000, help="chunks in the scope")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best kept)")


def _comparison(i: int) -> dict[str, Any]:
    op = _OPS[i % len(_OPS)]
    if op == "in":
        return {"field": "tags", "op": "in", "value": [str(k) for k in range(100)]}
    if op in ("gt", "lt"):
        return {"field": "year", "op": op, "value": 1990 + i}
    return {"field": "team", "op": op, "value": "s" + "x" * (i % 3)}


def largest_filter() -> dict[str, Any]:
    groups = [{"and": [_comparison(i) for i in range(j * 10, j * 10 + 9)]} for j in range(9)]
    return {"or": [*groups, {"not": _comparison(99)}]}


def _database(chunks: int) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    register_functions(conn)
    conn.execute("BEGIN")
    create_or_upgrade(conn, "bench")
    rng = random.Random(14)
    for i in range(chunks):
        meta = {
            "team": rng.choice(["sre", "dev", "ops"]),
            "year": str(2000 + i % 30),
            "tags": ["a", "b", str(i % 7)],
            "format": "markdown",
            "origin": "upload",
        }
        conn.execute(
            "INSERT INTO chunks (doc_id, agent, context, path, chunk_index, content, metadata)"
            " VALUES (?, 'a', 'x', ?, ?, '', ?)",
            (f"d{i // 5}", f"p/{i // 5}.md", i % 5, json.dumps(meta)),
        )
    conn.execute("COMMIT")
    return conn


def _millis(conn: sqlite3.Connection, raw: dict[str, Any] | None, repeat: int) -> float:
    sql, params = ("1", []) if raw is None else filter_sql(parse_filter(raw))
    statement = f"SELECT c.id FROM chunks AS c WHERE c.agent = ? AND c.context = ? AND ({sql})"
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        conn.execute(statement, ["a", "x", *params]).fetchall()
        best = min(best, time.perf_counter() - started)
    return best * 1000.0


def main(args: argparse.Namespace) -> None:
    conn = _database(args.chunks)
    cases: list[tuple[str, dict[str, Any] | None]] = [
        ("no filter", None),
        ("one comparison", {"field": "team", "op": "eq", "value": "sre"}),
        ("numeric range", {"field": "year", "op": "gte", "value": 2015}),
        ("largest allowed", largest_filter()),
    ]
    figures = [(name, _millis(conn, raw, args.repeat)) for name, raw in cases]
    baseline = _millis(conn, None, args.repeat)  # again at the end: the same warm cache
    print(f"{args.chunks} chunks in one scope")
    for name, ms in figures:
        print(f"  {name:16s} {ms:8.1f} ms   x{ms / baseline:6.1f} of no filter")
