"""What a ``kb serve`` worker process is given, and which routes it answers itself."""

from __future__ import annotations

import logging
from pathlib import Path

from knowledge.config import StoreSettings
from knowledge.core.model import SearchMode
from knowledge.local.worker import LOCAL_ROUTES, WorkerSetup
from knowledge.service.routes import ROUTES, Operation


def test_a_setup_reaches_the_worker_as_it_was_made() -> None:
    setup = WorkerSetup(
        store=StoreSettings(
            kind="embedded",
            db_path=Path("/srv/kb/index.db"),
            embedder_name="hashing",
            default_mode=SearchMode.KEYWORD,
            isolation="agent",
        ),
        root="/srv/bucket",
        forward_address="/tmp/kb-serve-x/primary.sock",
        listening_fd=7,
        number=2,
        default_mode=SearchMode.HYBRID,
        reranks=True,
        rerank_model="amazon.rerank-v1:0",
        shared_grants={"ops-bot": ("handbook", "policies")},
        body_timeout=0.5,
        writes_enabled=True,
        max_put_bytes=4 * 2**20,
        log_level=logging.INFO,
    )
    assert WorkerSetup.from_json(setup.to_json()) == setup


def test_a_worker_answers_only_read_only_routes_itself() -> None:
    names = {route.name: route for route in ROUTES}
    assert set(names) >= LOCAL_ROUTES
    for name in LOCAL_ROUTES:
        route = names[name]
        assert route.permission in (None, Operation.SEARCH, Operation.DOCUMENTS), name
        assert route.method in ("GET", "POST"), name
    # The status carries the primary's progress; reindex, writes and repositories its state.
    assert {"status", "reindex", "put_document", "delete_document", "upload"}.isdisjoint(
        LOCAL_ROUTES
    )
