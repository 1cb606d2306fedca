"""Build a store (and its embedder) from explicit settings, environment variables or defaults.

Precedence for every setting: an explicit argument, then the environment, then the
default. Environment variables:

==================  ==========================================  =====================
variable            meaning                                     default
==================  ==========================================  =====================
KB_STORE            store kind (``STORE_BUILDERS``)             ``embedded``
KB_DB               file of the embedded store                  ``.kb/knowledge.db``
KB_EMBEDDER         embedding provider, or ``none``             ``hashing``
KB_OPENSEARCH_URL   OpenSearch endpoint (``opensearch`` kind)   unset
KB_MODE             search mode when a query names none         see below
KB_ISOLATION        keyword statistics ``shared`` or per        ``shared``
                    ``agent`` (embedded store; README,
                    "Security")
KB_RERANK_MODEL     Bedrock rerank model for ``kb serve`` and   unset (no reranking)
                    ``kb search`` (``open_reranking``)
KB_RERANK_TOP_N     candidates reranked per search (1-100)      20
==================  ==========================================  =====================

The default search mode is the store's own (hybrid with an embedder), except with the
``hashing`` embedder, where it is ``keyword``: a bag-of-words vector adds no meaning to
BM25 and, fused with it, ranks worse than BM25 alone (``bench/REPORT.md``).

Store kinds are builders in ``STORE_BUILDERS`` (``opensearch`` calls
``knowledge.stores.opensearch.build_store``, which reads the other ``OPENSEARCH_*``
settings); more can be added with ``register_store_builder``. This module never
imports a backend it is not asked for. An unknown kind or embedder is a
``ConfigurationError`` that lists the known ones.

An embedded store is one file, and ``open_store`` opens an existing one: a file that is
not there is a ``ConfigurationError`` naming it (absolute) and how to make one, unless the
caller asks for a new index with ``create=True`` (``kb index`` and ``kb serve`` do). A
new empty index would answer "no relevant documents" to every question, which a program
or a model cannot tell from a knowledge base without the answer (a typo in the path, or
the default ``.kb/knowledge.db`` while ``make run`` wrote ``.kb/local.db``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from knowledge.core.errors import ConfigurationError, ValidationError
from knowledge.core.model import SearchMode
from knowledge.embedding import EMBEDDER_NAMES as PROVIDER_NAMES
from knowledge.embedding import create_embedder
from knowledge.embedding.base import EmbeddingClient
from knowledge.stores.protocol import KnowledgeStore

if TYPE_CHECKING:
    from knowledge.reranking import RerankingStage

__all__ = [
    "DEFAULT_DB_PATH",
    "DEFAULT_EMBEDDER",
    "DEFAULT_STORE_KIND",
    "EMBEDDER_NAMES",
    "ENV_DB",
    "ENV_EMBEDDER",
    "ENV_ISOLATION",
    "ENV_MODE",
    "ENV_OPENSEARCH_URL",
    "ENV_RERANK_MODEL",
    "ENV_RERANK_TOP_N",
    "ENV_STORE",
    "KEYWORD_LIKE_EMBEDDER",
    "MAKE_RUN_DB_PATH",
    "NO_EMBEDDER",
    "STORE_BUILDERS",
    "StoreBuilder",
    "StoreSettings",
    "check_index_file",
    "open_embedder",
    "open_reranking",
    "open_store",
    "register_store_builder",
]

ENV_STORE = "KB_STORE"
ENV_DB = "KB_DB"
ENV_EMBEDDER = "KB_EMBEDDER"
ENV_OPENSEARCH_URL = "KB_OPENSEARCH_URL"
ENV_MODE = "KB_MODE"
ENV_ISOLATION = "KB_ISOLATION"
ENV_RERANK_MODEL = "KB_RERANK_MODEL"
ENV_RERANK_TOP_N = "KB_RERANK_TOP_N"

DEFAULT_STORE_KIND = "embedded"
DEFAULT_DB_PATH = ".kb/knowledge.db"
DEFAULT_EMBEDDER = "hashing"
NO_EMBEDDER = "none"
"""Embedder name for a keyword-only store (no vectors, no embedding cost)."""

EMBEDDER_NAMES = (*PROVIDER_NAMES, NO_EMBEDDER)
KEYWORD_LIKE_EMBEDDER = "hashing"
"""Stores built with this embedder search in keyword mode unless a mode is asked for."""


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Everything a store builder needs, resolved from arguments, environment and defaults."""

    kind: str = DEFAULT_STORE_KIND
    db_path: Path = Path(DEFAULT_DB_PATH)
    embedder_name: str = DEFAULT_EMBEDDER
    opensearch_url: str | None = None
    default_mode: SearchMode | None = None
    isolation: str = "shared"

    @classmethod
    def resolve(
        cls,
        kind: str | None = None,
        *,
        db_path: str | os.PathLike[str] | None = None,
        embedder_name: str | None = None,
        opensearch_url: str | None = None,
        default_mode: SearchMode | str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> StoreSettings:
        """Fill every unset argument from ``environ`` (default ``os.environ``), then defaults."""
        env = os.environ if environ is None else environ

        def pick(value: str | None, variable: str, default: str) -> str:
            if value is not None and value.strip():
                return value.strip()
            from_env = env.get(variable, "").strip()
            return from_env or default

        url = pick(opensearch_url, ENV_OPENSEARCH_URL, "")
        embedder = pick(embedder_name, ENV_EMBEDDER, DEFAULT_EMBEDDER).lower()
        mode: SearchMode | None = None
        if default_mode is not None:
            mode = SearchMode.parse(default_mode)
        elif env.get(ENV_MODE, "").strip():
            mode = SearchMode.parse(env[ENV_MODE], ENV_MODE)
        elif embedder == KEYWORD_LIKE_EMBEDDER:
            # The hashing embedder is a bag of words: fused with BM25 it ranks worse than
            # BM25 alone (bench/REPORT.md, quality), so it only serves vector/hybrid on request.
            mode = SearchMode.KEYWORD
        return cls(
            kind=pick(kind, ENV_STORE, DEFAULT_STORE_KIND).lower(),
            db_path=Path(
                pick(None if db_path is None else os.fspath(db_path), ENV_DB, DEFAULT_DB_PATH)
            ),
            embedder_name=embedder,
            opensearch_url=url or None,
            default_mode=mode,
            isolation=pick(None, ENV_ISOLATION, "shared").lower(),
        )


StoreBuilder = Callable[[StoreSettings], KnowledgeStore]


def _known_embedder(name: str) -> str:
    normalized = name.strip().lower()
    if normalized not in EMBEDDER_NAMES:
        raise ConfigurationError(
            f"unknown embedder '{normalized}' (known: {', '.join(EMBEDDER_NAMES)})"
        )
    return normalized


def open_embedder(name: str) -> EmbeddingClient | None:
    """The embedding client called ``name`` (``none``: no embedder, keyword only).

    Raises ``ConfigurationError`` for an unknown name, a missing optional dependency
    or a provider that is not set up (no API key, say).
    """
    normalized = _known_embedder(name)
    if normalized == NO_EMBEDDER:
        return None
    try:
        return create_embedder(normalized)
    except ImportError as exc:
        raise ConfigurationError(
            f"embedder '{normalized}' needs a package that is not installed ({exc.name}); "
            "install the matching extra, e.g. pip install 'knowledge-search[local-embeddings]'"
        ) from exc


def _build_memory(settings: StoreSettings) -> KnowledgeStore:
    from knowledge.stores.memory import MemoryKnowledgeStore  # only if asked

    return MemoryKnowledgeStore()


def _build_embedded(settings: StoreSettings) -> KnowledgeStore:
    from knowledge.stores.embedded import (  # only if asked
        ISOLATION_MODES,
        EmbeddedKnowledgeStore,
    )

    if settings.isolation not in ISOLATION_MODES:
        raise ConfigurationError(
            f"{ENV_ISOLATION}: {settings.isolation!r} is not one of {', '.join(ISOLATION_MODES)}"
        )
    embedder = open_embedder(settings.embedder_name)
    return EmbeddedKnowledgeStore(
        settings.db_path,
        embedder=embedder,
        default_mode=settings.default_mode,
        isolation=settings.isolation,
    )


def _build_opensearch(settings: StoreSettings) -> KnowledgeStore:
    from knowledge.stores.opensearch import build_store  # only if asked; opensearchpy is lazy

    return build_store(
        url=settings.opensearch_url,
        default_mode=settings.default_mode,
        open_embedder=lambda: open_embedder(settings.embedder_name),
    )


STORE_BUILDERS: dict[str, StoreBuilder] = {
    "embedded": _build_embedded,
    "memory": _build_memory,
    "opensearch": _build_opensearch,
}


def register_store_builder(kind: str, builder: StoreBuilder) -> None:
    """Make ``open_store(kind)`` use ``builder``; a later registration replaces an earlier one."""
    STORE_BUILDERS[kind.strip().lower()] = builder


def open_store(
    kind: str | None = None,
    *,
    db_path: str | os.PathLike[str] | None = None,
    embedder_name: str | None = None,
    opensearch_url: str | None = None,
    default_mode: SearchMode | str | None = None,
    environ: Mapping[str, str] | None = None,
    create: bool = False,
) -> KnowledgeStore:
    """Open the store described by the arguments, the environment and the defaults.

    The caller owns the store and must ``close()`` it. An embedded store's file must exist
    unless ``create`` is true (module docstring). Raises ``ConfigurationError`` for an
    unknown kind or embedder and for a missing embedded file, and whatever the store
    raises when its existing index does not fit the settings (``EmbeddingMismatchError``).
    """
    settings = StoreSettings.resolve(
        kind,
        db_path=db_path,
        embedder_name=embedder_name,
        opensearch_url=opensearch_url,
        default_mode=default_mode,
        environ=environ,
    )
    builder = STORE_BUILDERS.get(settings.kind)
    if builder is None:
        known = ", ".join(sorted(STORE_BUILDERS))
        raise ConfigurationError(f"unknown store kind '{settings.kind}' (known: {known})")
    if settings.kind == "embedded" and not create:
        _known_embedder(settings.embedder_name)  # the setting to fix first, if both are wrong
        check_index_file(settings.db_path)
    return builder(settings)


MAKE_RUN_DB_PATH = ".kb/local.db"
"""The file ``make run`` (``kb serve examples/bucket --db .kb/local.db``) writes."""


def check_index_file(db_path: Path) -> None:
    """Raise ``ConfigurationError`` unless the embedded index file ``db_path`` exists
    (SQLite's ``:memory:`` is never a file). The message names the file, absolute, how to
    build one, and the file ``make run`` wrote when that one is there instead."""
    if str(db_path) == ":memory:" or db_path.exists():
        return
    served = Path(MAKE_RUN_DB_PATH)
    if db_path != served and served.exists():
        where = f"make run wrote {MAKE_RUN_DB_PATH}: db_path={MAKE_RUN_DB_PATH!r}"
    else:
        where = f"make run writes {MAKE_RUN_DB_PATH}"
    raise ConfigurationError(
        f"no knowledge index file at {db_path.absolute()} ({where}); build one with "
        "`kb index DIR --agent A --context C` or `kb serve ROOT`, point db_path (or "
        f"{ENV_DB}) at an existing file, or pass create=True for a new, empty index"
    )


def open_reranking(
    model: str | None = None,
    *,
    top_n: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> RerankingStage | None:
    """The reranking stage of ``kb serve`` / ``kb search``: Bedrock ``Rerank`` with
    ``model`` (else ``KB_RERANK_MODEL``) on ``top_n`` (else ``KB_RERANK_TOP_N``, else
    20) candidates; ``None`` (no reranking) when no model is set. The AWS credentials,
    region and endpoint are boto3's (``AWS_REGION``, ``AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME``).
    Raises ``ConfigurationError`` naming the variable for a bad top N."""
    env = os.environ if environ is None else environ
    name = (model or "").strip() or env.get(ENV_RERANK_MODEL, "").strip()
    if not name:
        return None
    from knowledge.reranking import DEFAULT_RERANK_TOP_N, RerankingStage
    from knowledge.reranking.bedrock import BedrockReranker

    count = top_n
    if count is None:
        text = env.get(ENV_RERANK_TOP_N, "").strip()
        try:
            count = int(text) if text else DEFAULT_RERANK_TOP_N
        except ValueError:
            raise ConfigurationError(f"{ENV_RERANK_TOP_N}: {text!r} is not an integer") from None
    reranker = BedrockReranker(name)
    try:
        stage = RerankingStage(reranker, top_n=count)
    except ValidationError as exc:
        raise ConfigurationError(f"{ENV_RERANK_TOP_N}: {exc.message}") from None
    reranker.prepare()  # its client, before a search's rerank time limit starts
    return stage
