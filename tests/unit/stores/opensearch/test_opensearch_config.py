"""OpenSearch settings: parameters, environment, auth choice, SigV4 signer and secrets.

No network: SigV4 signing is checked on the headers it produces, Secrets Manager runs
under moto.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.credentials import RefreshableCredentials
from moto import mock_aws

from knowledge.core.errors import ConfigurationError
from knowledge.core.loopback import is_loopback_url
from knowledge.core.model import SearchMode
from knowledge.core.secrets import clear_secret_cache
from knowledge.stores.opensearch import settings as config_module
from knowledge.stores.opensearch.client import create_client, http_auth, sigv4_auth
from knowledge.stores.opensearch.settings import OpenSearchConfig

DOMAIN = "https://search-kb-abc.us-east-1.es.amazonaws.com"
COLLECTION = "https://abc123.us-east-1.aoss.amazonaws.com"
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:kb-os-AbCdEf"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fake credentials, so nothing can reach a real account; no cached secrets."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTESTING")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    clear_secret_cache()
    yield
    clear_secret_cache()


def test_public_names_are_exported() -> None:
    assert set(config_module.__all__) <= set(dir(config_module))


def test_defaults() -> None:
    config = OpenSearchConfig(url="http://127.0.0.1:9200/")
    assert config.url == "http://127.0.0.1:9200"
    assert config.index_name == "knowledge"
    assert config.auth == "none"
    assert config.service == "es"
    assert config.default_mode is SearchMode.KEYWORD
    # None: the embedder's defaults (fusion.hybrid_weights), resolved by the store.
    assert (config.keyword_weight, config.vector_weight) == (None, None)
    assert config.vector_engine == "lucene"
    assert config.client_ids is True
    assert config.use_msearch is True
    assert not config.serverless


def test_from_env_reads_every_setting() -> None:
    env = {
        "OPENSEARCH_URL": "http://localhost:9200",
        "OPENSEARCH_INDEX": "kb-test",
        "OPENSEARCH_AUTH": "basic",
        "OPENSEARCH_USERNAME": "admin",
        "OPENSEARCH_PASSWORD": "local-only",
        "OPENSEARCH_DEFAULT_MODE": "Hybrid",
        "OPENSEARCH_KEYWORD_WEIGHT": "0.4",
        "OPENSEARCH_VECTOR_WEIGHT": "0.6",
        "OPENSEARCH_VECTOR_DIMENSIONS": "384",
        "OPENSEARCH_VECTOR_ENGINE": "faiss",
        "OPENSEARCH_TIMEOUT": "2.5",
        "OPENSEARCH_MAX_RETRIES": "5",
        "OPENSEARCH_MSEARCH": "false",
    }
    config = OpenSearchConfig.from_env(env)
    assert config.url == "http://localhost:9200"
    assert config.index_name == "kb-test"
    assert (config.auth, config.username, config.password) == ("basic", "admin", "local-only")
    assert config.default_mode is SearchMode.HYBRID
    assert (config.keyword_weight, config.vector_weight) == (0.4, 0.6)
    assert config.vector_dimensions == 384
    assert config.vector_engine == "faiss"
    assert config.timeout == 2.5
    assert config.max_retries == 5
    assert config.use_msearch is False


def test_overrides_win_over_the_environment() -> None:
    env = {"OPENSEARCH_URL": "http://localhost:9200", "OPENSEARCH_INDEX": "from-env"}
    config = OpenSearchConfig.from_env(env, url="http://127.0.0.1:9201", index_name="arg")
    assert (config.url, config.index_name) == ("http://127.0.0.1:9201", "arg")


@pytest.mark.parametrize(
    ("url", "region_vars", "auth", "service", "region"),
    [
        ("http://localhost:9200", {}, "none", "es", None),
        (DOMAIN, {"AWS_REGION": "us-east-1"}, "sigv4", "es", "us-east-1"),
        (COLLECTION, {"AWS_DEFAULT_REGION": "eu-west-1"}, "sigv4", "aoss", "eu-west-1"),
        (
            COLLECTION,
            {"AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "x"},
            "sigv4",
            "aoss",
            "us-east-1",
        ),
    ],
)
def test_auth_and_service_follow_the_endpoint(url, region_vars, auth, service, region) -> None:
    config = OpenSearchConfig.from_env({"OPENSEARCH_URL": url, **region_vars})
    assert (config.auth, config.service, config.region) == (auth, service, region)


def test_serverless_defaults_fit_what_serverless_allows() -> None:
    config = OpenSearchConfig.from_env({"OPENSEARCH_URL": COLLECTION, "AWS_REGION": "us-east-1"})
    assert config.serverless
    assert config.client_ids is False  # vector collections refuse client-chosen ids
    assert config.vector_engine == "faiss"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "localhost:9200"}, "not an http"),
        ({"url": "ftp://host"}, "not an http"),
        ({"url": "http://host:9200/prefix"}, "without a path"),
        ({"url": "http://user:pw@host:9200"}, "must not carry credentials"),
        ({"url": "http://host:99999"}, "invalid port"),
        ({"index_name": "Knowledge"}, "opensearch index"),
        ({"index_name": "_kb"}, "opensearch index"),
        ({"index_name": "kb index"}, "opensearch index"),
        ({"auth": "token"}, "opensearch auth"),
        ({"service": "opensearch"}, "opensearch service"),
        ({"service": "aoss", "auth": "none"}, "only accepts SigV4"),
        ({"auth": "sigv4"}, "needs a region"),
        ({"auth": "basic", "password": "x"}, "needs a username"),
        ({"auth": "basic", "username": "admin"}, "needs a password secret"),
        ({"password_secret_arn": "kb-secret"}, "is not an ARN"),
        ({"default_mode": "semantic"}, "default mode"),
        ({"keyword_weight": -0.1}, "keyword_weight"),
        ({"vector_weight": float("nan")}, "vector_weight"),
        ({"keyword_weight": 0, "vector_weight": 0}, "at least one"),
        ({"vector_dimensions": 0}, "vector dimensions"),
        ({"vector_engine": "nmslib"}, "vector engine"),
        ({"timeout": 0}, "timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"bulk_max_chunk_bytes": 10}, "bulk_max_chunk_bytes"),
    ],
)
def test_bad_settings_name_the_setting(kwargs: dict[str, Any], message: str) -> None:
    values: dict[str, Any] = {"url": "http://localhost:9200", **kwargs}
    with pytest.raises(ConfigurationError, match=message):
        OpenSearchConfig(**values)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "OPENSEARCH_URL"),
        ({"OPENSEARCH_URL": "http://localhost:9200", "OPENSEARCH_TIMEOUT": "soon"}, "TIMEOUT"),
        ({"OPENSEARCH_URL": "http://localhost:9200", "OPENSEARCH_MSEARCH": "maybe"}, "MSEARCH"),
    ],
)
def test_bad_environment_names_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        OpenSearchConfig.from_env(env)


def test_unknown_override_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="unknown settings"):
        OpenSearchConfig.from_env({"OPENSEARCH_URL": "http://localhost:9200"}, colour="red")


def test_plain_password_from_the_environment_only_for_a_local_node() -> None:
    remote = {
        "OPENSEARCH_URL": DOMAIN,
        "AWS_REGION": "us-east-1",
        "OPENSEARCH_AUTH": "basic",
        "OPENSEARCH_USERNAME": "admin",
        "OPENSEARCH_PASSWORD": "hunter2",
    }
    with pytest.raises(ConfigurationError, match="OPENSEARCH_PASSWORD_SECRET_ARN"):
        OpenSearchConfig.from_env(remote)
    with_secret = {**remote, "OPENSEARCH_PASSWORD_SECRET_ARN": SECRET_ARN}
    del with_secret["OPENSEARCH_PASSWORD"]
    assert OpenSearchConfig.from_env(with_secret).password_secret_arn == SECRET_ARN
    local = {**remote, "OPENSEARCH_URL": "http://127.0.0.1:9200"}
    assert OpenSearchConfig.from_env(local).password == "hunter2"


def test_password_is_not_shown() -> None:
    config = OpenSearchConfig(
        url="http://localhost:9200", auth="basic", username="admin", password="hunter2"
    )
    assert "hunter2" not in repr(config)


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://localhost:9200", True),
        ("http://127.0.0.1:9200", True),
        ("http://127.8.0.1", True),
        ("http://[::1]:9200", True),
        ("http://10.0.0.1:9200", False),
        (DOMAIN, False),
    ],
)
def test_is_loopback_url(url: str, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback


# --- auth objects -----------------------------------------------------------------------


def test_no_auth_and_local_basic_auth() -> None:
    assert http_auth(OpenSearchConfig(url="http://localhost:9200")) is None
    basic = OpenSearchConfig(
        url="http://localhost:9200", auth="basic", username="admin", password="pw"
    )
    assert http_auth(basic) == ("admin", "pw")


class _Session:
    """A boto3.Session stand-in that hands out the given credentials object."""

    def __init__(self, credentials: Any) -> None:
        self.credentials = credentials

    def get_credentials(self) -> Any:
        return self.credentials


def _refreshable(keys: list[str]) -> RefreshableCredentials:
    """Credentials that expire in 5 minutes (inside botocore's refresh window), whose
    refresh hands out the next key of ``keys``."""
    issued = iter(keys)

    def metadata() -> dict[str, str]:
        return {
            "access_key": next(issued),
            "secret_key": "secret",
            "token": "session-token",
            "expiry_time": (datetime.now(UTC) + timedelta(minutes=5)).isoformat(),
        }

    return RefreshableCredentials.create_from_metadata(
        metadata=metadata(), refresh_using=metadata, method="test"
    )


def test_sigv4_signs_with_refreshable_credentials_for_each_request() -> None:
    credentials = _refreshable(["AKIDFIRST", "AKIDSECOND", "AKIDTHIRD"])
    config = OpenSearchConfig(url=DOMAIN, auth="sigv4", region="us-east-1")
    auth = sigv4_auth(config, session=_Session(credentials))
    # The signer keeps the refreshable object, not a frozen copy of the first keys.
    assert auth.signer.credentials is credentials
    headers = auth("POST", f"{DOMAIN}/knowledge/_search", b'{"size": 0}')
    authorization = headers["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDSECOND/")
    assert "/us-east-1/es/aws4_request" in authorization
    assert headers["X-Amz-Security-Token"] == "session-token"
    assert "X-Amz-Content-SHA256" in headers  # Serverless requires the payload hash
    again = auth("POST", f"{DOMAIN}/knowledge/_search", b"{}")
    assert again["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDTHIRD/")


def test_sigv4_for_serverless_signs_for_aoss(aws_env: None) -> None:
    config = OpenSearchConfig.from_env({"OPENSEARCH_URL": COLLECTION, "AWS_REGION": "us-east-1"})
    auth = sigv4_auth(config)  # a real boto3.Session on the (fake) environment credentials
    headers = auth("GET", f"{COLLECTION}/knowledge/_search", None)
    assert "Credential=AKIDTESTING/" in headers["Authorization"]
    assert "/us-east-1/aoss/aws4_request" in headers["Authorization"]


def test_sigv4_without_credentials_is_a_configuration_error() -> None:
    config = OpenSearchConfig(url=DOMAIN, auth="sigv4", region="us-east-1")
    with pytest.raises(ConfigurationError, match="AWS credentials"):
        sigv4_auth(config, session=_Session(None))


def test_creating_a_signed_client_does_no_io() -> None:
    config = OpenSearchConfig(url=DOMAIN, auth="sigv4", region="us-east-1")
    client = create_client(config, session=_Session(_refreshable(["A", "B"])))
    connection = client.transport.connection_pool.connections[0]
    assert connection.host == DOMAIN + ":443"
    assert callable(connection.http_auth)


@mock_aws
@pytest.mark.parametrize(
    ("secret", "username", "expected"),
    [
        (json.dumps({"username": "admin", "password": "from-json"}), None, ("admin", "from-json")),
        (json.dumps({"password": "only-password"}), "svc", ("svc", "only-password")),
        ("plain-secret", "svc", ("svc", "plain-secret")),
    ],
)
def test_basic_auth_password_comes_from_secrets_manager(
    aws_env: None, secret: str, username: str | None, expected: tuple[str, str]
) -> None:
    arn = boto3.client("secretsmanager", region_name="us-east-1").create_secret(
        Name="kb-opensearch", SecretString=secret
    )["ARN"]
    config = OpenSearchConfig(url=DOMAIN, auth="basic", username=username, password_secret_arn=arn)
    assert http_auth(config) == expected


@mock_aws
def test_unreadable_secret_is_a_configuration_error_naming_it(aws_env: None) -> None:
    config = OpenSearchConfig(
        url=DOMAIN, auth="basic", username="admin", password_secret_arn=SECRET_ARN
    )
    with pytest.raises(ConfigurationError, match=r"kb-os-AbCdEf.*ResourceNotFoundException"):
        http_auth(config)


@mock_aws
def test_secret_without_password_is_a_configuration_error(aws_env: None) -> None:
    arn = boto3.client("secretsmanager", region_name="us-east-1").create_secret(
        Name="kb-opensearch", SecretString=json.dumps({"user": "admin"})
    )["ARN"]
    config = OpenSearchConfig(url=DOMAIN, auth="basic", username="a", password_secret_arn=arn)
    with pytest.raises(ConfigurationError, match="no 'password'"):
        http_auth(config)


# --- HNSW parameters ------------------------------------------------------------------


def test_hnsw_defaults_are_the_measured_ones() -> None:
    config = OpenSearchConfig(url="http://127.0.0.1:9200")
    # bench/REPORT.md section 9: ef_search 200 lifts a big scope's recall for about the
    # cost of 100; m and ef_construction stay the engine's defaults, now explicit.
    assert (config.hnsw_m, config.hnsw_ef_construction, config.ef_search) == (16, 100, 200)


def test_hnsw_parameters_from_the_environment() -> None:
    config = OpenSearchConfig.from_env(
        {
            "OPENSEARCH_URL": "http://localhost:9200",
            "OPENSEARCH_HNSW_M": "24",
            "OPENSEARCH_HNSW_EF_CONSTRUCTION": "256",
            "OPENSEARCH_EF_SEARCH": "0",
        }
    )
    assert (config.hnsw_m, config.hnsw_ef_construction, config.ef_search) == (24, 256, 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hnsw_m": 1}, "hnsw_m: must be an integer in 2..100"),
        ({"hnsw_m": 101}, "hnsw_m"),
        ({"hnsw_m": True}, "hnsw_m"),
        ({"hnsw_ef_construction": 0}, "hnsw_ef_construction"),
        ({"hnsw_ef_construction": 10_001}, "hnsw_ef_construction"),
        ({"ef_search": -1}, "ef_search: must be an integer in 0..10000"),
        ({"ef_search": 50.5}, "ef_search"),
    ],
)
def test_bad_hnsw_parameters_name_the_setting(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        OpenSearchConfig(url="http://localhost:9200", **kwargs)


@pytest.mark.parametrize("weight", [-1.0, float("nan"), True, "high"])
def test_a_bad_headings_weight_names_the_setting(weight: object) -> None:
    with pytest.raises(ConfigurationError, match="headings_weight: must be a number >= 0"):
        OpenSearchConfig(url="http://localhost:9200", headings_weight=weight)  # type: ignore[arg-type]


def test_headings_weight_from_the_environment() -> None:
    config = OpenSearchConfig.from_env(
        {"OPENSEARCH_URL": "http://localhost:9200", "OPENSEARCH_HEADINGS_WEIGHT": "0"}
    )
    assert config.headings_weight == 0.0
    with pytest.raises(ConfigurationError, match="OPENSEARCH_HEADINGS_WEIGHT"):
        OpenSearchConfig.from_env(
            {"OPENSEARCH_URL": "http://localhost:9200", "OPENSEARCH_HEADINGS_WEIGHT": "many"}
        )
    with pytest.raises(ConfigurationError, match="headings_weight: must be a number >= 0"):
        OpenSearchConfig.from_env(
            {"OPENSEARCH_URL": "http://localhost:9200", "OPENSEARCH_HEADINGS_WEIGHT": "-2"}
        )


@pytest.mark.parametrize("weight", [-1.0, float("nan"), True, "high"])
def test_a_bad_page_weight_names_the_setting(weight: object) -> None:
    with pytest.raises(ConfigurationError, match="page_weight: must be a number >= 0"):
        OpenSearchConfig(url="http://localhost:9200", page_weight=weight)  # type: ignore[arg-type]


def test_page_weight_from_the_environment() -> None:
    # The page part's weight (knowledge.ranking.page_signal); 0 turns it off.
    assert OpenSearchConfig(url="http://localhost:9200").page_weight == 0.5
    config = OpenSearchConfig.from_env(
        {"OPENSEARCH_URL": "http://localhost:9200", "OPENSEARCH_PAGE_WEIGHT": "0"}
    )
    assert config.page_weight == 0.0
    with pytest.raises(ConfigurationError, match="OPENSEARCH_PAGE_WEIGHT"):
        OpenSearchConfig.from_env(
            {"OPENSEARCH_URL": "http://localhost:9200", "OPENSEARCH_PAGE_WEIGHT": "many"}
        )


def test_bad_hnsw_environment_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="OPENSEARCH_EF_SEARCH"):
        OpenSearchConfig.from_env(
            {"OPENSEARCH_URL": "http://localhost:9200", "OPENSEARCH_EF_SEARCH": "many"}
        )


def test_vector_derived_source_from_the_environment() -> None:
    env = {"OPENSEARCH_URL": "http://localhost:9200"}
    assert OpenSearchConfig.from_env(env).vector_derived_source is False
    on = OpenSearchConfig.from_env({**env, "OPENSEARCH_VECTOR_DERIVED_SOURCE": "true"})
    assert on.vector_derived_source is True
    with pytest.raises(ConfigurationError, match="OPENSEARCH_VECTOR_DERIVED_SOURCE"):
        OpenSearchConfig.from_env({**env, "OPENSEARCH_VECTOR_DERIVED_SOURCE": "maybe"})
