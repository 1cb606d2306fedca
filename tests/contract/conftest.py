"""The store registry of the contract suite: every test runs against every store.

``STORE_SPECS`` maps a store name to a ``StoreSpec``: the search modes the store
supports (declared, because test ids are generated before any store exists; a test
checks the declaration against ``store.supported_modes``), a factory, and pytest marks.

``pytest_generate_tests`` parametrises:

- a test that uses the ``store`` fixture: once per store (id ``memory``);
- a test that also takes ``mode``: once per (store, mode) the store supports
  (id ``embedded-hybrid``); no combination is generated only to be skipped.
  ``@pytest.mark.modes(SearchMode.KEYWORD)`` restricts a test to some modes.

Adding a store (OpenSearch, say): one more entry. The factory receives pytest's
``request`` and a fresh ``tmp_path``, so it can use session fixtures and clean up::

    def _opensearch(request: pytest.FixtureRequest, tmp_path: Path) -> KnowledgeStore:
        from knowledge.stores.opensearch import OpenSearchKnowledgeStore
        url = request.getfixturevalue("opensearch_url")   # the session node, tests/conftest.py
        index = f"test_{uuid.uuid4().hex}"
        store = OpenSearchKnowledgeStore(url=url, index=index, embedder=HashingEmbedder(64))
        request.addfinalizer(lambda: drop_index(url, index))  # a fresh index per test
        return store

    StoreSpec("opensearch", ALL_MODES, _opensearch,
              marks=(pytest.mark.opensearch, pytest.mark.integration))

A factory should return quickly; the ``store`` fixture closes the store after the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from knowledge.core.model import SearchMode
from knowledge.stores.memory import MemoryKnowledgeStore
from knowledge.stores.protocol import KnowledgeStore

StoreFactory = Callable[[pytest.FixtureRequest, Path], KnowledgeStore]

ALL_MODES = frozenset(SearchMode)
KEYWORD_ONLY = frozenset({SearchMode.KEYWORD})


@dataclass(frozen=True)
class StoreSpec:
    name: str
    modes: frozenset[SearchMode]
    create: StoreFactory
    marks: tuple[pytest.MarkDecorator, ...] = ()


def _memory(request: pytest.FixtureRequest, tmp_path: Path) -> KnowledgeStore:
    return MemoryKnowledgeStore()


def _embedded(request: pytest.FixtureRequest, tmp_path: Path) -> KnowledgeStore:
    # Imported here so that a broken or missing backend fails its own tests only.
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    return EmbeddedKnowledgeStore(tmp_path / "kb.db", embedder=HashingEmbedder(64))


def _embedded_per_agent(request: pytest.FixtureRequest, tmp_path: Path) -> KnowledgeStore:
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    return EmbeddedKnowledgeStore(
        tmp_path / "kb.db", embedder=HashingEmbedder(64), isolation="agent"
    )


def _opensearch_per_agent(request: pytest.FixtureRequest, tmp_path: Path) -> KnowledgeStore:
    return _opensearch(request, tmp_path, index_per_agent=True)


def _opensearch(
    request: pytest.FixtureRequest, tmp_path: Path, *, index_per_agent: bool = False
) -> KnowledgeStore:
    from opensearch_index import NodeIndex  # tests/integration, on the path (tests/conftest.py)

    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.stores.opensearch import OpenSearchKnowledgeStore

    # A fresh index per test on the session's node (tests/conftest.py), dropped after it.
    node = NodeIndex(request.getfixturevalue("opensearch_url"))
    request.addfinalizer(node.delete)
    # Sessions wait for the next scheduled refresh (no forced refresh; the contract reads
    # its writes at once): a short interval keeps the suite fast.
    config = node.config(refresh_interval="100ms", index_per_agent=index_per_agent)
    return OpenSearchKnowledgeStore(config, embedder=HashingEmbedder(64))


STORE_SPECS: dict[str, StoreSpec] = {
    spec.name: spec
    for spec in (
        StoreSpec("memory", KEYWORD_ONLY, _memory),
        StoreSpec("embedded", ALL_MODES, _embedded),
        StoreSpec(
            "opensearch",
            ALL_MODES,
            _opensearch,
            marks=(pytest.mark.opensearch, pytest.mark.integration),
        ),
    )
}


ISOLATED_SPECS: dict[str, StoreSpec] = {
    spec.name: spec
    for spec in (
        StoreSpec("embedded-agent", ALL_MODES, _embedded_per_agent),
        StoreSpec(
            "opensearch-agent",
            ALL_MODES,
            _opensearch_per_agent,
            marks=(pytest.mark.opensearch, pytest.mark.integration),
        ),
    )
}
"""The stores again with agent isolation (per-agent FTS tables, an index per agent and per
shared library), for the modules marked ``isolated_stores`` (what differs there: the
shared library)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "modes(*modes): run a contract test only in these search modes"
    )
    config.addinivalue_line(
        "markers", "isolated_stores: run a contract module on the isolated stores as well"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_spec" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("modes")
    wanted = frozenset(SearchMode) if marker is None else frozenset(marker.args)
    specs = list(STORE_SPECS.values())
    if metafunc.definition.get_closest_marker("isolated_stores") is not None:
        specs += ISOLATED_SPECS.values()
    if "mode" not in metafunc.fixturenames:
        metafunc.parametrize(
            "store_spec", [pytest.param(s, id=s.name, marks=s.marks) for s in specs]
        )
        return
    metafunc.parametrize(
        ("store_spec", "mode"),
        [
            pytest.param(spec, mode, id=f"{spec.name}-{mode.value}", marks=spec.marks)
            for spec in specs
            for mode in sorted(spec.modes & wanted)
        ],
    )


@pytest.fixture
def store_factory(
    store_spec: StoreSpec, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[], KnowledgeStore]]:
    """Makes stores of the kind under test, each in its own folder; closes them all after."""
    made: list[KnowledgeStore] = []

    def make() -> KnowledgeStore:
        folder = tmp_path / f"store-{len(made)}"
        folder.mkdir()
        made.append(store_spec.create(request, folder))
        return made[-1]

    yield make
    for store in made:
        store.close()


@pytest.fixture
def store(store_factory: Callable[[], KnowledgeStore]) -> KnowledgeStore:
    """A fresh, empty store of the kind under test."""
    return store_factory()


@pytest.fixture
def bucket(tmp_path: Path) -> Path:
    """An empty folder laid out like the bucket: ``<agent>/<context>/<path>``."""
    root = tmp_path / "bucket"
    root.mkdir()
    return root
