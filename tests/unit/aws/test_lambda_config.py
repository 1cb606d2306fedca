"""knowledge.aws.settings: the functions' settings, embedder and store from the environment."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import boto3
import pytest
from moto import mock_aws

from knowledge.aws.settings import LambdaSettings, build_embedder, build_reranking, build_store
from knowledge.core.errors import ConfigurationError
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.secrets import clear_secret_cache
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import upsert_document
from knowledge.stores.opensearch import OpenSearchKnowledgeStore

SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:openai-AbCdEf"


def test_defaults_without_environment():
    settings = LambdaSettings.from_env({})
    assert settings.embedding_provider == "none"
    assert settings.file_patterns == IndexOptions().file_patterns
    assert settings.max_documents == IndexOptions().max_documents
    assert settings.documents_bucket is None
    assert settings.queue_url is None


def test_everything_from_the_environment():
    settings = LambdaSettings.from_env(
        {
            "EMBEDDING_PROVIDER": " OpenAI ",
            "OPENAI_EMBEDDING_MODEL": "text-embedding-3-large",
            "OPENAI_API_KEY_SECRET_ARN": SECRET_ARN,
            "DOCUMENTS_BUCKET": "kb-docs",
            "INDEX_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
            "FILE_PATTERNS": "*.md, *.txt ,docs/*.rst,",
            "MAX_DOCUMENTS": "250",
        }
    )
    assert settings.embedding_provider == "openai"
    assert settings.openai_model == "text-embedding-3-large"
    assert settings.require_bucket() == "kb-docs"
    assert settings.require_queue_url().endswith("/q")
    assert settings.file_patterns == ("*.md", "*.txt", "docs/*.rst")
    assert settings.index_options == IndexOptions(
        file_patterns=("*.md", "*.txt", "docs/*.rst"), max_documents=250
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"EMBEDDING_PROVIDER": "cohere"}, "EMBEDDING_PROVIDER"),
        ({"EMBEDDING_PROVIDER": "openai"}, "OPENAI_API_KEY_SECRET_ARN"),
        (
            {"EMBEDDING_PROVIDER": "openai", "OPENAI_API_KEY_SECRET_ARN": "sk-a-key-not-an-arn"},
            "not an ARN",
        ),
        ({"FILE_PATTERNS": " , "}, "FILE_PATTERNS"),
        ({"MAX_DOCUMENTS": "many"}, "MAX_DOCUMENTS"),
        ({"MAX_DOCUMENTS": "0"}, "MAX_DOCUMENTS"),
        ({"MAX_DOCUMENT_MIB": "0"}, "MAX_DOCUMENT_MIB"),
        ({"MAX_DOCUMENT_MIB": "64MB"}, "MAX_DOCUMENT_MIB"),
        ({"TIME_RESERVE_SECONDS": "-1"}, "TIME_RESERVE_SECONDS"),
        ({"RETRY_BASE_SECONDS": "120", "RETRY_MAX_SECONDS": "60"}, "RETRY_MAX_SECONDS"),
        ({"RETRY_MAX_SECONDS": "50000"}, "RETRY_MAX_SECONDS"),
        ({"SECRET_MAX_AGE_SECONDS": "soon"}, "SECRET_MAX_AGE_SECONDS"),
        ({"RERANK_TOP_N": "0"}, "RERANK_TOP_N"),
        ({"RERANK_TOP_N": "101"}, "RERANK_TOP_N"),
        ({"RERANK_TOP_N": "all"}, "RERANK_TOP_N"),
        ({"RERANK_TIMEOUT_SECONDS": "0"}, "RERANK_TIMEOUT_SECONDS"),
        ({"RERANK_TIMEOUT_SECONDS": "30"}, "RERANK_TIMEOUT_SECONDS"),
        ({"RERANK_TIMEOUT_SECONDS": "nan"}, "RERANK_TIMEOUT_SECONDS"),
        ({"RERANK_TIMEOUT_SECONDS": "fast"}, "RERANK_TIMEOUT_SECONDS"),
    ],
)
def test_bad_settings_are_configuration_errors_naming_the_variable(env, message):
    with pytest.raises(ConfigurationError, match=message):
        LambdaSettings.from_env(env)


def test_missing_bucket_or_queue_is_named_when_needed():
    settings = LambdaSettings.from_env({})
    with pytest.raises(ConfigurationError, match="DOCUMENTS_BUCKET"):
        settings.require_bucket()
    with pytest.raises(ConfigurationError, match="INDEX_QUEUE_URL"):
        settings.require_queue_url()


def test_embedders_by_provider():
    assert build_embedder(LambdaSettings(embedding_provider="none")) is None
    assert isinstance(build_embedder(LambdaSettings(embedding_provider="hashing")), HashingEmbedder)
    bedrock = build_embedder(
        LambdaSettings(embedding_provider="bedrock", bedrock_model_id="amazon.titan-embed-text-v1")
    )
    assert bedrock is not None
    assert bedrock.name.endswith("amazon.titan-embed-text-v1")
    assert bedrock.dimensions == 1536


def test_store_is_opensearch_from_opensearch_variables_without_io():
    env = {
        "OPENSEARCH_URL": "http://127.0.0.1:9",  # nothing listens: construction must not call
        "OPENSEARCH_INDEX": "kb-test",
        "OPENSEARCH_DEFAULT_MODE": "hybrid",
    }
    store = build_store(LambdaSettings(embedding_provider="hashing"), env=env)
    assert isinstance(store, OpenSearchKnowledgeStore)
    assert store.config.index_name == "kb-test"
    assert store.default_mode is SearchMode.HYBRID
    assert store.supported_modes == frozenset(SearchMode)


def test_store_without_an_endpoint_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="OPENSEARCH_URL"):
        build_store(LambdaSettings(embedding_provider="hashing"), env={})


def test_building_everything_for_openai_imports_no_sdk():
    """A keyword request never pays for openai, opensearchpy or boto3 at cold start."""
    code = f"""
import sys
from knowledge.aws.settings import LambdaSettings, build_store
settings = LambdaSettings(embedding_provider="openai", openai_secret_arn={SECRET_ARN!r})
store = build_store(settings, env={{"OPENSEARCH_URL": "http://127.0.0.1:9"}})
print(sorted(m for m in ("openai", "opensearchpy", "boto3") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


class _FakeOpenAI(BaseHTTPRequestHandler):
    seen_authorization: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        request = json.loads(self.rfile.read(length))
        type(self).seen_authorization.append(self.headers.get("authorization", ""))
        inputs = request["input"] if isinstance(request["input"], list) else [request["input"]]
        body = json.dumps(
            {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": [0.5] * 1536}
                    for i in range(len(inputs))
                ],
                "model": request["model"],
                "usage": {"prompt_tokens": 3 * len(inputs), "total_tokens": 3 * len(inputs)},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    _FakeOpenAI.seen_authorization = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_openai_key_comes_from_secrets_manager_on_first_embedding(fake_openai, monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    clear_secret_cache()
    try:
        with mock_aws():
            secrets = boto3.client("secretsmanager", region_name="us-east-1")
            arn = secrets.create_secret(
                Name="openai-key", SecretString=json.dumps({"api_key": "sk-from-secrets"})
            )["ARN"]
            embedder = build_embedder(
                LambdaSettings(embedding_provider="openai", openai_secret_arn=arn),
                secrets_client=secrets,
            )
            assert embedder is not None
            assert _FakeOpenAI.seen_authorization == []
            embedding = embedder.embed("rollback a failed deployment")
    finally:
        clear_secret_cache()
    assert len(embedding.vector) == 1536
    assert _FakeOpenAI.seen_authorization == ["Bearer sk-from-secrets"]


def test_indexer_limits_from_the_environment():
    settings = LambdaSettings.from_env(
        {
            "MAX_DOCUMENT_MIB": "8",
            "TIME_RESERVE_SECONDS": "45",
            "RETRY_BASE_SECONDS": "10",
            "RETRY_MAX_SECONDS": "600",
            "SECRET_MAX_AGE_SECONDS": "60",
        }
    )
    assert settings.index_options.max_document_bytes == 8 * 1024 * 1024
    assert (
        settings.time_reserve_seconds,
        settings.retry_base_seconds,
        settings.retry_max_seconds,
        settings.secret_max_age_seconds,
    ) == (45, 10, 600, 60)
    defaults = LambdaSettings.from_env({})
    assert defaults.index_options.max_document_bytes == 64 * 1024 * 1024
    assert defaults.secret_max_age_seconds == 300


def test_embedding_concurrency_reaches_the_provider():
    settings = LambdaSettings.from_env(
        {"EMBEDDING_PROVIDER": "bedrock", "EMBEDDING_CONCURRENCY": "24"}
    )
    assert settings.embedding_concurrency == 24
    embedder = build_embedder(settings)
    assert getattr(embedder, "concurrency", None) == 24
    default = build_embedder(LambdaSettings(embedding_provider="bedrock"))
    # The ceiling of the adaptive limit (which starts at 16 and grows until throttled).
    assert getattr(default, "concurrency", None) == 64


@pytest.mark.parametrize("value", ["0", "65", "many"])
def test_bad_embedding_concurrency_is_named(value):
    with pytest.raises(ConfigurationError, match="EMBEDDING_CONCURRENCY"):
        LambdaSettings.from_env({"EMBEDDING_CONCURRENCY": value})


def test_no_reranking_unless_a_model_is_set():
    assert build_reranking(LambdaSettings.from_env({})) is None
    assert build_reranking(LambdaSettings.from_env({"RERANK_MODEL_ID": " "})) is None


def test_reranking_from_the_environment_reranks_through_bedrock(monkeypatch):
    """RERANK_* build the stage; botocore's own AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME
    sends its calls to the fake endpoint, which checks what it receives."""
    from fake_rerank import fake_rerank_server

    from knowledge.core.scope import KnowledgeScope
    from knowledge.core.source import SourceDocument
    from knowledge.stores.memory import MemoryKnowledgeStore

    arn = "arn:aws:bedrock:eu-central-1::foundation-model/cohere.rerank-v3-5:0"
    for name, value in {
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret-example",
        "AWS_REGION": "eu-central-1",
        "AWS_DEFAULT_REGION": "eu-central-1",
    }.items():
        monkeypatch.setenv(name, value)
    scope = KnowledgeScope("ops-bot", "runbooks")
    store = MemoryKnowledgeStore()
    for path, text in {
        "a.md": "rollback rollback rollback",
        "b.md": "how to rollback helm",
    }.items():
        data = text.encode()
        upsert_document(store, scope, SourceDocument(path, len(data), lambda d=data: d))
    with fake_rerank_server(arn) as fake:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME", fake.url)
        settings = LambdaSettings.from_env(
            {
                "RERANK_MODEL_ID": "cohere.rerank-v3-5:0",
                "RERANK_TOP_N": "7",
                "RERANK_TIMEOUT_SECONDS": "2.5",
            }
        )
        stage = build_reranking(settings)
        assert stage is not None
        assert (stage.top_n, stage.timeout) == (7, 2.5)
        results, report = stage.search(store, scope, SearchQuery("rollback helm", mode="keyword"))
    assert fake.problems == []
    assert report.reranked
    # the fake's word overlap: b.md has both words, a.md one
    assert [(r.document_path, r.rerank_score) for r in results] == [("b.md", 1.0), ("a.md", 0.5)]
