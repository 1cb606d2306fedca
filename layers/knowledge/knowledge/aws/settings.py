"""Settings of the Lambda functions, from the environment ``template.yaml`` gives them.

The OpenSearch settings are ``OPENSEARCH_*`` variables read by
``knowledge.stores.opensearch.OpenSearchConfig.from_env``; this module reads the rest:

==============================  ==================================================  ===========
variable                        meaning                                             default
==============================  ==================================================  ===========
``EMBEDDING_PROVIDER``          ``openai`` | ``bedrock`` | ``hashing`` | ``none``   ``none``
``OPENAI_EMBEDDING_MODEL``      OpenAI model                                        provider's
``OPENAI_API_KEY_SECRET_ARN``   Secrets Manager secret with the OpenAI key          unset
``BEDROCK_MODEL_ID``            Bedrock embedding model                             provider's
``EMBEDDING_CONCURRENCY``       most embedding calls in flight (1-64; adaptive)     provider's
``DOCUMENTS_BUCKET``            the documents bucket                                unset
``INDEX_QUEUE_URL``             the document events queue (reindex requests)        unset
``BULK_QUEUE_URL``              indexer: the bulk work queue (reindex steps, keys)  unset
``FILE_PATTERNS``               comma-separated globs of the documents              all types
``MAX_DOCUMENTS``               most documents of one scope (local/batch indexing)  no limit
``MAX_DOCUMENT_MIB``            larger documents are skipped as "too large"         64
``TIME_RESERVE_SECONDS``        indexer: time kept free at the end of an invocation 30
``RETRY_BASE_SECONDS``          indexer: first retry delay of a failed record       60
``RETRY_MAX_SECONDS``           indexer: longest retry delay                        900
``SECRET_MAX_AGE_SECONDS``      a secret is re-read at least this often             300
``RERANK_MODEL_ID``             Bedrock rerank model (id or ARN); empty: no rerank  unset
``RERANK_TOP_N``                search: candidates reranked (1-100)                 20
``RERANK_TIMEOUT_SECONDS``      search: longest rerank call (then search order)     3
``WRITE_REQUESTS_PER_MINUTE``   search: write requests one agent may send a minute  120
``WRITE_MIB_PER_MINUTE``        search: MiB one agent may write a minute            256
``MAX_DOCUMENTS_PER_SCOPE``     search: a write of a new path into a fuller scope   10000
                                is refused
``WRITE_QUOTA_TABLE``           search: the DynamoDB table of the write counts      unset
``INDEX_PROGRESS_TABLE``        indexer, dispatcher, search: the indexing under way unset
                                per scope (``knowledge.aws.index_progress``)
==============================  ==================================================  ===========

The write limits (``knowledge.service.write_quotas``; ``0`` is no limit) are counted per
agent in ``WRITE_QUOTA_TABLE``, shared by every container (``knowledge.aws.write_quotas``).

A scope reindex in AWS pages through the whole prefix (``knowledge.aws.reindex_queue``):
``MAX_DOCUMENTS`` does not cut it short. The search function queues the reindex request
on the document events queue (``INDEX_QUEUE_URL``, the intake the dispatcher routes); the
indexer queues the steps and per-key messages it expands on the bulk work queue
(``BULK_QUEUE_URL``; without it, on ``INDEX_QUEUE_URL``), so a reindex never competes
with the other tenants' edits in the express lane (``knowledge.aws.dispatch``). The
dispatcher's own settings are read by ``knowledge.aws.dispatch.DispatchSettings``.

Who may call which agent (``API_AUTH``, ``JWT_AGENTS_CLAIM``, ``JWT_REINDEX_SCOPE``) is
read by ``knowledge.aws.access.AccessPolicy.from_env``.

The OpenAI key is never an environment variable: the function gets the secret's ARN,
and the key is read from Secrets Manager when the first embedding is needed
(``knowledge.core.secrets``), again after ``SECRET_MAX_AGE_SECONDS``, and at once when OpenAI
answers 401 (a rotated key). Building the settings, the embedder or the store does no I/O
and imports no SDK, so a keyword-only request never loads ``openai``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from knowledge.aws.environment import EnvironmentReader
from knowledge.core.errors import ConfigurationError
from knowledge.core.model import IndexOptions
from knowledge.embedding.base import EmbeddingClient
from knowledge.service.write_quotas import DEFAULT_WRITE_LIMITS, MIB, WriteLimits
from knowledge.stores.protocol import KnowledgeStore

if TYPE_CHECKING:
    from knowledge.reranking import RerankingStage

__all__ = [
    "EMBEDDING_PROVIDERS",
    "OPENAI_KEY_FIELD",
    "LambdaSettings",
    "build_embedder",
    "build_reranking",
    "build_store",
]

EMBEDDING_PROVIDERS = ("openai", "bedrock", "hashing", "none")

OPENAI_KEY_FIELD = "api_key"
"""Field holding the key when the secret is a JSON object (otherwise the string is the key)."""

_DEFAULT_OPTIONS = IndexOptions()
_MIB = 1024 * 1024


def _patterns(text: str | None) -> tuple[str, ...]:
    if text is None:
        return _DEFAULT_OPTIONS.file_patterns
    patterns = tuple(p.strip() for p in text.split(",") if p.strip())
    if not patterns:
        raise ConfigurationError("FILE_PATTERNS: must name at least one glob, e.g. '*.md,*.txt'")
    return patterns


@dataclass(frozen=True, slots=True)
class LambdaSettings:
    """What the functions need besides the OpenSearch settings (module docstring)."""

    embedding_provider: str = "none"
    openai_model: str | None = None
    openai_secret_arn: str | None = None
    bedrock_model_id: str | None = None
    embedding_concurrency: int | None = None
    documents_bucket: str | None = None
    queue_url: str | None = None
    bulk_queue_url: str | None = None
    file_patterns: tuple[str, ...] = field(default=_DEFAULT_OPTIONS.file_patterns)
    max_documents: int | None = _DEFAULT_OPTIONS.max_documents
    max_document_mib: int = _DEFAULT_OPTIONS.max_document_bytes // _MIB
    time_reserve_seconds: int = 30
    retry_base_seconds: int = 60
    retry_max_seconds: int = 900
    secret_max_age_seconds: int = 300
    rerank_model_id: str | None = None
    rerank_top_n: int = 20
    rerank_timeout_seconds: float = 3.0
    write_requests_per_minute: int = DEFAULT_WRITE_LIMITS.requests_per_minute
    write_mib_per_minute: int = DEFAULT_WRITE_LIMITS.bytes_per_minute // MIB
    max_documents_per_scope: int = DEFAULT_WRITE_LIMITS.documents_per_scope
    write_quota_table: str | None = None
    index_progress_table: str | None = None

    def __post_init__(self) -> None:
        if self.embedding_provider not in EMBEDDING_PROVIDERS:
            raise ConfigurationError(
                f"EMBEDDING_PROVIDER: {self.embedding_provider!r} is not one of "
                f"{', '.join(EMBEDDING_PROVIDERS)}"
            )
        if self.embedding_provider == "openai" and not self.openai_secret_arn:
            raise ConfigurationError(
                "OPENAI_API_KEY_SECRET_ARN: the openai provider needs the ARN of the Secrets "
                "Manager secret that holds the API key"
            )
        if self.openai_secret_arn is not None and not self.openai_secret_arn.startswith("arn:"):
            raise ConfigurationError(
                f"OPENAI_API_KEY_SECRET_ARN: {self.openai_secret_arn!r} is not an ARN"
            )
        if self.max_documents is not None and self.max_documents < 1:
            raise ConfigurationError(f"MAX_DOCUMENTS: must be at least 1, got {self.max_documents}")
        concurrency = self.embedding_concurrency
        for name, value, least in (
            ("MAX_DOCUMENT_MIB", self.max_document_mib, 1),
            ("TIME_RESERVE_SECONDS", self.time_reserve_seconds, 0),
            ("RETRY_BASE_SECONDS", self.retry_base_seconds, 0),
            ("RETRY_MAX_SECONDS", self.retry_max_seconds, self.retry_base_seconds),
            ("SECRET_MAX_AGE_SECONDS", self.secret_max_age_seconds, 0),
            ("EMBEDDING_CONCURRENCY", 1 if concurrency is None else concurrency, 1),
            ("WRITE_REQUESTS_PER_MINUTE", self.write_requests_per_minute, 0),
            ("WRITE_MIB_PER_MINUTE", self.write_mib_per_minute, 0),
            ("MAX_DOCUMENTS_PER_SCOPE", self.max_documents_per_scope, 0),
        ):
            if value < least:
                raise ConfigurationError(f"{name}: must be at least {least}, got {value}")
        if concurrency is not None and concurrency > 64:
            raise ConfigurationError(f"EMBEDDING_CONCURRENCY: at most 64, got {concurrency}")
        if not 1 <= self.rerank_top_n <= 100:
            raise ConfigurationError(f"RERANK_TOP_N: must be 1-100, got {self.rerank_top_n}")
        if not 0 < self.rerank_timeout_seconds <= 25:
            raise ConfigurationError(
                f"RERANK_TIMEOUT_SECONDS: must be above 0 and at most 25, "
                f"got {self.rerank_timeout_seconds}"
            )
        if self.retry_max_seconds > 43_200:
            raise ConfigurationError(
                f"RETRY_MAX_SECONDS: must be at most 43200 (12 hours, SQS's limit), "
                f"got {self.retry_max_seconds}"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LambdaSettings:
        """Read the variables of the module docstring (blank counts as unset)."""
        reader = EnvironmentReader(env)
        get, integer, number = reader.get, reader.integer, reader.number

        defaults = cls()
        return cls(
            embedding_provider=(get("EMBEDDING_PROVIDER") or "none").lower(),
            openai_model=get("OPENAI_EMBEDDING_MODEL"),
            openai_secret_arn=get("OPENAI_API_KEY_SECRET_ARN"),
            bedrock_model_id=get("BEDROCK_MODEL_ID"),
            embedding_concurrency=(
                None
                if get("EMBEDDING_CONCURRENCY") is None
                else integer("EMBEDDING_CONCURRENCY", 0)
            ),
            documents_bucket=get("DOCUMENTS_BUCKET"),
            queue_url=get("INDEX_QUEUE_URL"),
            bulk_queue_url=get("BULK_QUEUE_URL"),
            file_patterns=_patterns(get("FILE_PATTERNS")),
            max_documents=None if get("MAX_DOCUMENTS") is None else integer("MAX_DOCUMENTS", 0),
            max_document_mib=integer("MAX_DOCUMENT_MIB", defaults.max_document_mib),
            time_reserve_seconds=integer("TIME_RESERVE_SECONDS", defaults.time_reserve_seconds),
            retry_base_seconds=integer("RETRY_BASE_SECONDS", defaults.retry_base_seconds),
            retry_max_seconds=integer("RETRY_MAX_SECONDS", defaults.retry_max_seconds),
            secret_max_age_seconds=integer(
                "SECRET_MAX_AGE_SECONDS", defaults.secret_max_age_seconds
            ),
            rerank_model_id=get("RERANK_MODEL_ID"),
            rerank_top_n=integer("RERANK_TOP_N", defaults.rerank_top_n),
            rerank_timeout_seconds=number(
                "RERANK_TIMEOUT_SECONDS", defaults.rerank_timeout_seconds
            ),
            write_requests_per_minute=integer(
                "WRITE_REQUESTS_PER_MINUTE", defaults.write_requests_per_minute
            ),
            write_mib_per_minute=integer("WRITE_MIB_PER_MINUTE", defaults.write_mib_per_minute),
            max_documents_per_scope=integer(
                "MAX_DOCUMENTS_PER_SCOPE", defaults.max_documents_per_scope
            ),
            write_quota_table=get("WRITE_QUOTA_TABLE"),
            index_progress_table=get("INDEX_PROGRESS_TABLE"),
        )

    @property
    def write_limits(self) -> WriteLimits:
        """Each agent's write limits (``knowledge.service.write_quotas``)."""
        return WriteLimits.of(
            self.write_requests_per_minute,
            self.write_mib_per_minute,
            self.max_documents_per_scope,
        )

    @property
    def index_options(self) -> IndexOptions:
        return IndexOptions(
            file_patterns=self.file_patterns,
            max_documents=self.max_documents,
            max_document_bytes=self.max_document_mib * _MIB,
        )

    def require_bucket(self) -> str:
        if not self.documents_bucket:
            raise ConfigurationError("DOCUMENTS_BUCKET: the documents bucket is not configured")
        return self.documents_bucket

    @property
    def reindex_queue_url(self) -> str | None:
        """Where the indexer queues a scope reindex's steps and per-key messages: the bulk
        work queue, else the document events queue."""
        return self.bulk_queue_url or self.queue_url

    def require_queue_url(self) -> str:
        if not self.queue_url:
            raise ConfigurationError("INDEX_QUEUE_URL: the document events queue is not configured")
        return self.queue_url


def build_embedder(
    settings: LambdaSettings, *, secrets_client: Any | None = None
) -> EmbeddingClient | None:
    """The configured embedding client, or ``None`` for ``none`` (keyword only).

    No I/O and no SDK import: the OpenAI key is read from Secrets Manager, and the SDKs
    are imported, when the first text is embedded.
    """
    from knowledge.embedding import create_embedder  # providers load on demand

    provider = settings.embedding_provider
    if provider == "none":
        return None
    options: dict[str, Any] = {}
    if provider in ("openai", "bedrock") and settings.embedding_concurrency is not None:
        options["concurrency"] = settings.embedding_concurrency
    if provider == "openai":
        from knowledge.core.secrets import secret_reader

        assert settings.openai_secret_arn is not None  # checked in __post_init__
        options["api_key"] = secret_reader(
            settings.openai_secret_arn,
            field=OPENAI_KEY_FIELD,
            client=secrets_client,
            max_age=settings.secret_max_age_seconds,
        )
        if settings.openai_model:
            options["model"] = settings.openai_model
    elif provider == "bedrock" and settings.bedrock_model_id:
        options["model_id"] = settings.bedrock_model_id
    return create_embedder(provider, **options)


def build_reranking(settings: LambdaSettings) -> RerankingStage | None:
    """The search's reranking stage (Bedrock ``Rerank`` with ``RERANK_MODEL_ID``), or
    ``None`` when no model is set (the default). No network call; the reranker's ``boto3``
    client is made here (``BedrockReranker.prepare``), not in the first search's rerank
    time limit."""
    if settings.rerank_model_id is None:
        return None
    from knowledge.reranking import RerankingStage
    from knowledge.reranking.bedrock import BedrockReranker

    timeout = settings.rerank_timeout_seconds
    reranker = BedrockReranker(settings.rerank_model_id, timeout=timeout)
    reranker.prepare()
    return RerankingStage(reranker, top_n=settings.rerank_top_n, timeout=timeout)


def build_store(
    settings: LambdaSettings,
    *,
    env: Mapping[str, str] | None = None,
    embedder: EmbeddingClient | None = None,
) -> KnowledgeStore:
    """The OpenSearch store of the deployment (``OPENSEARCH_*`` from ``env``), with the
    configured embedder (or ``embedder``). Construction does no I/O."""
    from knowledge.stores.opensearch import (  # only when a store is needed
        OpenSearchConfig,
        OpenSearchKnowledgeStore,
    )

    config = OpenSearchConfig.from_env(env)
    return OpenSearchKnowledgeStore(
        config, embedder=embedder if embedder is not None else build_embedder(settings)
    )
