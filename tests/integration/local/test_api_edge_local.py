"""The local server over real HTTP: the same path and body checks as the search Lambda
(issue 8: percent-encoded segments, lone surrogates), since both go through
knowledge.service.api."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from local_stack import local_server, over_workers

from knowledge.local.server import LocalServer

pytestmark = pytest.mark.integration


def post(base: str, path: str, data: bytes) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(base + path, data=data, method="POST")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


@pytest.fixture
def server(tmp_path: Path, workers: int) -> Iterator[LocalServer]:
    deploy = "# Deploy\n\nRun helm rollback to return to the previous revision.\n"
    files = {"ops-bot/runbooks/deploy.md": deploy}
    with local_server(tmp_path, files, workers=workers) as local:
        yield local


@over_workers
def test_the_plain_agent_name_searches(server: LocalServer) -> None:
    status, body = post(
        server.url,
        "/v1/agents/ops-bot/contexts/runbooks/search",
        b'{"query": "rollback", "mode": "keyword"}',
    )
    assert status == 200
    assert [r["document_path"] for r in body["results"]] == ["deploy.md"]


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/agents/%6Fps-bot/contexts/runbooks/search", "agent"),
        ("/v1/agents/ops-bot/contexts/%72unbooks/search", "context"),
        ("/v1/agents/%6Fps-bot/search", "agent"),
    ],
)
@over_workers
def test_a_percent_encoded_segment_is_a_400(server: LocalServer, path: str, field: str) -> None:
    status, body = post(server.url, path, b'{"query": "rollback", "mode": "keyword"}')
    assert (status, body["field"]) == (400, field)


@over_workers
def test_a_lone_surrogate_escape_is_a_400(server: LocalServer) -> None:
    status, body = post(
        server.url, "/v1/agents/ops-bot/contexts/runbooks/search", b'{"query": "\\ud800"}'
    )
    assert (status, body["field"]) == (400, "query")
