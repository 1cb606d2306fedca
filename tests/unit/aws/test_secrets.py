"""knowledge.core.secrets: Secrets Manager reads, cached, never leaking the value."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from lambda_support import silent_endpoint, use_fake_aws
from moto import mock_aws

from knowledge.core.errors import ConfigurationError
from knowledge.core.secrets import clear_secret_cache, read_secret, secret_reader


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_secret_cache()
    yield
    clear_secret_cache()


@pytest.fixture
def secretsmanager(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="us-east-1")


class CountingClient:
    """Wraps a Secrets Manager client and counts the reads."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls = 0

    def get_secret_value(self, **kwargs: Any) -> Any:
        self.calls += 1
        return self.client.get_secret_value(**kwargs)


def test_plain_string_secret_is_the_value(secretsmanager):
    arn = secretsmanager.create_secret(Name="openai", SecretString=" sk-plain \n")["ARN"]
    assert read_secret(arn, field="api_key") == "sk-plain"


def test_json_secret_field_is_the_value(secretsmanager):
    arn = secretsmanager.create_secret(
        Name="openai-json", SecretString='{"api_key": "sk-json", "note": "rotated monthly"}'
    )["ARN"]
    assert read_secret(arn, field="api_key") == "sk-json"


def test_default_client_uses_the_region_of_the_arn(secretsmanager, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # not where the secret is
    arn = secretsmanager.create_secret(Name="in-us-east-1", SecretString="sk-region")["ARN"]
    assert ":us-east-1:" in arn
    assert read_secret(arn) == "sk-region"


def test_value_is_cached_until_refreshed(secretsmanager):
    arn = secretsmanager.create_secret(Name="cached", SecretString="v1")["ARN"]
    client = CountingClient(secretsmanager)
    assert read_secret(arn, client=client, max_age=60) == "v1"
    secretsmanager.put_secret_value(SecretId=arn, SecretString="v2")
    assert read_secret(arn, client=client, max_age=60) == "v1"
    assert client.calls == 1
    assert read_secret(arn, client=client, max_age=60, refresh=True) == "v2"
    assert client.calls == 2
    assert read_secret(arn, client=client, max_age=60) == "v2"
    assert client.calls == 2
    # The refresh window itself (max_age) is tested in test_openai_key_rotation.py.


def test_secret_reader_reads_only_when_called(secretsmanager):
    arn = secretsmanager.create_secret(Name="lazy", SecretString="sk-lazy")["ARN"]
    client = CountingClient(secretsmanager)
    read = secret_reader(arn, field="api_key", client=client)
    assert client.calls == 0
    assert read() == "sk-lazy"
    assert read() == "sk-lazy"
    assert client.calls == 1
    assert read.refresh() == "sk-lazy"
    assert client.calls == 2


def test_missing_secret_is_a_configuration_error_naming_the_arn(secretsmanager):
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:does-not-exist-AbCdEf"
    with pytest.raises(ConfigurationError, match="does-not-exist") as caught:
        read_secret(arn)
    assert "ResourceNotFoundException" in str(caught.value)


@pytest.mark.parametrize(
    ("secret", "problem"),
    [
        ('{"other": "x"}', "no non-empty string field 'api_key'"),
        ('{"api_key": ""}', "no non-empty string field 'api_key'"),
        ("{broken", "not valid"),
        ("   ", "is empty"),
    ],
)
def test_unusable_secret_values_are_refused_without_showing_them(secretsmanager, secret, problem):
    arn = secretsmanager.create_secret(Name="bad", SecretString=secret)["ARN"]
    with pytest.raises(ConfigurationError, match=problem) as caught:
        read_secret(arn, field="api_key")
    if secret.strip():
        assert secret not in str(caught.value)


def test_binary_secret_is_refused(secretsmanager):
    arn = secretsmanager.create_secret(Name="binary", SecretBinary=b"\x00\x01")["ARN"]
    with pytest.raises(ConfigurationError, match="no string value"):
        read_secret(arn)


def test_not_an_arn_is_refused_before_any_call():
    with pytest.raises(ConfigurationError, match="not an ARN"):
        read_secret("sk-looks-like-a-key-not-an-arn")


def test_importing_the_module_does_not_import_boto3_or_powertools():
    code = (
        "import sys, knowledge.core.secrets; "
        "print('boto3' in sys.modules or 'aws_lambda_powertools' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_hung_secrets_manager_fails_the_read_inside_the_functions_timeout(monkeypatch):
    # botocore's defaults (60 s per read, five attempts) would hold the read for up to
    # five minutes, past the search function's 29 s: API Gateway would answer 504
    # instead of the function's JSON 503, and the indexer would spend its invocation.
    # The default client gives up like the S3 and SQS ones (knowledge.core.aws_clients).
    use_fake_aws(monkeypatch)
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:kb/opensearch-AbCdEf"
    with silent_endpoint() as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", url)
        started = time.monotonic()
        with pytest.raises(ConfigurationError) as raised:
            read_secret(arn)
        elapsed = time.monotonic() - started
    assert elapsed < 120.0  # ~20 s: two attempts of 10 s; botocore's defaults: 300 s
    assert arn in str(raised.value)
