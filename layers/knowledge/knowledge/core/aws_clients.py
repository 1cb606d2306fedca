"""boto3 clients whose calls end in a bounded time (S3, SQS, Secrets Manager and the write
quota table's DynamoDB on the Lambda paths).

botocore's defaults wait 60 s to connect and 60 s per read, and try a call up to five
times: a hung endpoint holds one call for up to five minutes, longer than the indexer's
time reserve (``TIME_RESERVE_SECONDS``, 30 s) and the search function's 29 s. Clients made
here give up after ``CONNECT_TIMEOUT_SECONDS`` to connect and ``READ_TIMEOUT_SECONDS``
without a byte (a long download that keeps receiving is not cut), with two attempts in
all (standard retry mode), so a hung call fails in about 25 s at most and the caller's
retry (the SQS record's, the API client's) takes over. ``boto3`` loads on first use.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["CONNECT_TIMEOUT_SECONDS", "MAX_ATTEMPTS", "READ_TIMEOUT_SECONDS", "bounded_client"]

CONNECT_TIMEOUT_SECONDS = 5
READ_TIMEOUT_SECONDS = 10
MAX_ATTEMPTS = 2


def bounded_client(
    service: Literal["s3", "sqs", "secretsmanager", "dynamodb"],
    *,
    region_name: str | None = None,
    signature_version: str | None = None,
) -> Any:
    """``boto3.client(service)`` (in ``region_name``, else the process's region) with
    the bounded timeouts and retries above; ``signature_version`` as botocore names it
    (``s3v4`` for presigned S3 forms, which botocore would otherwise sign with SigV2)."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
        retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
        signature_version=signature_version,
    )
    return boto3.client(service, region_name=region_name, config=config)
