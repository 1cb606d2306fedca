"""knowledge.config: settings precedence, store kinds and embedders."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from knowledge.config import (
    DEFAULT_DB_PATH,
    STORE_BUILDERS,
    StoreSettings,
    open_embedder,
    open_store,
    register_store_builder,
)
from knowledge.core.errors import ConfigurationError, EmbeddingMismatchError, ValidationError
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.stores.embedded import EmbeddedKnowledgeStore
from knowledge.stores.memory import MemoryKnowledgeStore

SCOPE = KnowledgeScope("ops-bot", "runbooks")


@pytest.fixture
def restore_builders() -> Iterator[None]:
    saved = dict(STORE_BUILDERS)
    yield
    STORE_BUILDERS.clear()
    STORE_BUILDERS.update(saved)


def test_defaults_without_environment() -> None:
    settings = StoreSettings.resolve(environ={})
    assert settings == StoreSettings(
        kind="embedded",
        db_path=Path(DEFAULT_DB_PATH),
        embedder_name="hashing",
        opensearch_url=None,
        default_mode=SearchMode.KEYWORD,
    )
    assert DEFAULT_DB_PATH == ".kb/knowledge.db"


def test_default_mode_is_the_stores_own_with_a_semantic_embedder() -> None:
    assert StoreSettings.resolve(embedder_name="openai", environ={}).default_mode is None
    assert StoreSettings.resolve(embedder_name="none", environ={}).default_mode is None


def test_default_mode_from_argument_then_environment() -> None:
    env = {"KB_MODE": "vector"}
    assert StoreSettings.resolve(environ=env).default_mode is SearchMode.VECTOR
    assert StoreSettings.resolve(default_mode="hybrid", environ=env).default_mode is (
        SearchMode.HYBRID
    )
    with pytest.raises(ValidationError) as info:
        StoreSettings.resolve(environ={"KB_MODE": "fuzzy"})
    assert info.value.field == "KB_MODE"


def test_environment_fills_unset_arguments() -> None:
    env = {
        "KB_STORE": "Memory",
        "KB_DB": "/tmp/x.db",
        "KB_EMBEDDER": "OpenAI",
        "KB_OPENSEARCH_URL": "http://127.0.0.1:9200",
    }
    settings = StoreSettings.resolve(environ=env)
    assert (settings.kind, settings.db_path, settings.embedder_name, settings.opensearch_url) == (
        "memory",
        Path("/tmp/x.db"),
        "openai",
        "http://127.0.0.1:9200",
    )


def test_arguments_win_over_environment() -> None:
    env = {"KB_STORE": "memory", "KB_DB": "/tmp/x.db", "KB_EMBEDDER": "openai"}
    settings = StoreSettings.resolve(
        "embedded",
        db_path=Path("here.db"),
        embedder_name="none",
        default_mode="keyword",
        environ=env,
    )
    assert (settings.kind, settings.db_path, settings.embedder_name, settings.default_mode) == (
        "embedded",
        Path("here.db"),
        "none",
        SearchMode.KEYWORD,
    )


def test_blank_values_fall_through() -> None:
    settings = StoreSettings.resolve(" ", embedder_name="", environ={"KB_STORE": "  "})
    assert (settings.kind, settings.embedder_name) == ("embedded", "hashing")


def test_bad_default_mode() -> None:
    with pytest.raises(ValidationError) as info:
        StoreSettings.resolve(default_mode="fuzzy", environ={})
    assert info.value.field == "mode"


def test_open_embedder() -> None:
    embedder = open_embedder("Hashing")
    assert isinstance(embedder, HashingEmbedder)
    assert open_embedder("none") is None


def test_unknown_embedder() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown embedder 'word2vec' \(known: hashing"):
        open_embedder("word2vec")


def test_unknown_store_kind_lists_known_ones() -> None:
    with pytest.raises(ConfigurationError) as info:
        open_store("cassandra", environ={})
    assert "unknown store kind 'cassandra'" in str(info.value)
    assert "embedded" in str(info.value)
    assert "memory" in str(info.value)


def test_open_embedded_store(tmp_path: Path) -> None:
    db = tmp_path / "sub" / "k.db"
    with closing(open_store(db_path=db, environ={}, create=True)) as store:
        assert isinstance(store, EmbeddedKnowledgeStore)
        assert store.default_mode is SearchMode.KEYWORD  # hashing embedder
        assert store.supported_modes == frozenset(SearchMode)
    with closing(open_store(db_path=db, default_mode="hybrid", environ={})) as store:
        assert store.default_mode is SearchMode.HYBRID
        assert store.supported_modes == frozenset(SearchMode)
    assert db.exists()


def test_open_embedded_store_from_environment(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    env = {"KB_DB": str(db), "KB_EMBEDDER": "none"}
    with closing(open_store(environ=env, create=True)) as store:
        assert store.supported_modes == frozenset({SearchMode.KEYWORD})
    assert db.exists()


def test_isolation_of_the_embedded_store_from_environment(tmp_path: Path) -> None:
    env = {"KB_DB": str(tmp_path / "iso.db"), "KB_EMBEDDER": "none", "KB_ISOLATION": "Agent"}
    with closing(open_store(environ=env, create=True)) as store:
        assert isinstance(store, EmbeddedKnowledgeStore)
        assert store.isolation == "agent"
    with closing(open_store(environ={**env, "KB_ISOLATION": ""})) as store:
        assert isinstance(store, EmbeddedKnowledgeStore)
        assert store.isolation == "shared"
    with pytest.raises(ConfigurationError, match="KB_ISOLATION"):
        open_store(environ={**env, "KB_ISOLATION": "tenant"})


def test_open_memory_store() -> None:
    with closing(open_store("memory", environ={})) as store:
        assert isinstance(store, MemoryKnowledgeStore)


def test_embedded_store_indexes_and_searches(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rollback.md").write_text("# Rollback\n\nhelm rollback checkout-api\n", "utf-8")
    with closing(open_store(db_path=tmp_path / "k.db", environ={}, create=True)) as store:
        index_source(store, SCOPE, LocalDirectorySource(docs), IndexOptions())
        results = store.search(SCOPE, SearchQuery("helm rollback", mode=SearchMode.KEYWORD))
    assert [r.document_path for r in results] == ["rollback.md"]


@pytest.mark.usefixtures("restore_builders")
def test_mismatched_embedder_is_refused(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("alpha beta", "utf-8")
    db = tmp_path / "k.db"
    with closing(open_store(db_path=db, embedder_name="hashing", environ={}, create=True)) as s:
        index_source(s, SCOPE, LocalDirectorySource(docs), IndexOptions())

    class OtherEmbedder(HashingEmbedder):
        @property
        def name(self) -> str:
            return "other"

    def build_other(settings: StoreSettings) -> EmbeddedKnowledgeStore:
        return EmbeddedKnowledgeStore(settings.db_path, embedder=OtherEmbedder(64))

    register_store_builder("other-test", build_other)
    with pytest.raises(EmbeddingMismatchError, match=r"built with hashing \(256 dims\)"):
        open_store("other-test", db_path=db, environ={})


@pytest.mark.usefixtures("restore_builders")
def test_registered_builder_receives_settings() -> None:
    seen: list[StoreSettings] = []

    def build(settings: StoreSettings) -> MemoryKnowledgeStore:
        seen.append(settings)
        return MemoryKnowledgeStore()

    register_store_builder(" OpenSearch ", build)
    store = open_store(
        "opensearch", opensearch_url="http://127.0.0.1:9200", environ={"KB_EMBEDDER": "none"}
    )
    store.close()
    assert seen == [
        StoreSettings(
            kind="opensearch",
            db_path=Path(DEFAULT_DB_PATH),
            embedder_name="none",
            opensearch_url="http://127.0.0.1:9200",
        )
    ]
