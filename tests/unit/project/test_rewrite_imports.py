"""tools/rewrite_imports.py: old module paths become the new ones, in every import form."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[3] / "tools" / "rewrite_imports.py"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rewrite_imports", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "from knowledge.stores.opensearch.queries import keyword_search_body\n",
            "from knowledge.stores.opensearch.read.queries import keyword_search_body\n",
        ),
        (
            "from knowledge.stores.opensearch import search as searching\n",
            "from knowledge.stores.opensearch.read import search as searching\n",
        ),
        (
            # Names of one package moved to two: one import each; the unmoved stay.
            "from knowledge.stores.opensearch import queries, records, request_filters\n",
            "from knowledge.stores.opensearch import request_filters\n"
            "from knowledge.stores.opensearch.read import queries\n"
            "from knowledge.stores.opensearch.write import records\n",
        ),
        (
            "    from knowledge.stores.opensearch import (  # lazily\n"
            "        OpenSearchConfig,\n"
            "        queries,\n"
            "    )\n",
            "    from knowledge.stores.opensearch import OpenSearchConfig  # lazily\n"
            "    from knowledge.stores.opensearch.read import queries\n",
        ),
        (
            "see knowledge/stores/opensearch/session.py\n",
            "see knowledge/stores/opensearch/write/session.py\n",
        ),
    ],
)
def test_old_opensearch_paths_are_rewritten_once(tool: ModuleType, old: str, new: str) -> None:
    assert tool.rewrite(old) == new
    assert tool.rewrite(new) == new


def test_an_import_list_of_nothing_moved_is_left_as_written(tool: ModuleType) -> None:
    text = "from knowledge.stores.opensearch import (\n    OpenSearchConfig,\n    build_store,\n)\n"
    assert tool.rewrite(text) == text


def test_a_long_import_list_is_one_name_a_line(tool: ModuleType) -> None:
    text = (
        "from knowledge.stores.opensearch import agent_scopes, answers, chunk_listing, "
        "listing, named_clauses, page_side, queries\n"
    )
    assert tool.rewrite(text) == (
        "from knowledge.stores.opensearch.read import (\n"
        "    agent_scopes,\n"
        "    answers,\n"
        "    chunk_listing,\n"
        "    listing,\n"
        "    named_clauses,\n"
        "    page_side,\n"
        "    queries,\n"
        ")\n"
    )
