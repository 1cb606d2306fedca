"""Fixtures shared by every test folder.

``opensearch_url`` lives here (not in ``tests/integration``) so that the contract suite
(``tests/contract``) and the integration tests share one OpenSearch node per session.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# tests/support holds the helpers (fake_embeddings, lambda_support, opensearch_node...):
# on the path here, every test imports them by name, in whatever folder it sits.
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))
from opensearch_node import OpenSearchNode  # found through the path above


@pytest.fixture(autouse=True)
def _restore_package_logging() -> Iterator[None]:
    """Leave the ``knowledge`` package logger as the test found it.

    Importing a Lambda handler (``lambda_support.load_handler``) runs Powertools'
    ``copy_config_to_registered_loggers``, which gives the process-wide ``knowledge``
    logger the handler's JSON stream handler (pointed at the current stdout), its level and
    ``propagate = False``. That is right in a Lambda process, which imports one handler;
    in this one process it made every later test's in-process server log JSON into that
    test's captured stdout (a CLI test read it as the command's output).
    """
    package = logging.getLogger("knowledge")
    handlers, level, propagate = package.handlers[:], package.level, package.propagate
    yield
    package.handlers = handlers
    package.propagate = propagate
    package.setLevel(level)  # also clears the loggers' cached effective levels


@pytest.fixture(scope="session")
def opensearch_url() -> Iterator[str]:
    """URL of a real single-node OpenSearch (tools/opensearch-local), started once per session
    (per pytest process: each worker of ``make test`` starts a node of its own).

    Set KB_SKIP_OPENSEARCH=1 to skip the tests that use it; otherwise a node that
    cannot be built or started is a test error (with the node's log tail).
    Set KB_OPENSEARCH_URL to use an already running node instead (then run pytest without
    workers, ``-n 0``: a test that changes a cluster setting assumes the node is its own).
    """
    if os.environ.get("KB_SKIP_OPENSEARCH", "").strip() in ("1", "true", "yes"):
        pytest.skip("KB_SKIP_OPENSEARCH is set: not starting OpenSearch")
    node = OpenSearchNode()
    url = node.start()
    try:
        yield url
    finally:
        node.stop()
