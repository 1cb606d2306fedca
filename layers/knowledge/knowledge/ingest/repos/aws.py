"""Repository sources on AWS: registrations in the bucket, syncs through one queue.

- The repos function answers the repository routes (``RepoService`` over
  ``S3Storage``: registrations under ``.kb@repos/``) and consumes the repo sync queue.
- ``POST .../repos/{name}/sync`` queues one ``sync`` message (202); EventBridge
  Scheduler queues one ``sync_all`` message every ``RepoSyncIntervalHours``, which the
  function expands into one ``sync`` message per registered repository. Each message
  is its own retriable unit (partial batch failures, a dead-letter queue).
- A sync gets the invocation's remaining time minus a margin as its budget; one that
  runs out (``error.kind`` ``time``) queues itself again and continues from its manifest.
- Credentials are Secrets Manager ARNs whose secret name starts with
  ``SECRET_NAME_PREFIX`` (``kb-repo/``): the function may read only those
  (template.yaml): the HTTPS token, or the SSH private key of an ``ssh://`` registration
  (whose ``known_hosts`` are always checked). The repos function has its own layer
  (``RepoLayer``: no extractors, no Korean dictionary) so that paramiko fits.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from knowledge.core.errors import ValidationError
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.repos import REGISTRY_PREFIX
from knowledge.ingest.repos.network import HostPolicy
from knowledge.ingest.repos.registration import CREDENTIAL_ARN, RepoRegistration, SyncBounds
from knowledge.ingest.repos.service import RepoService
from knowledge.ingest.repos.state import RepoRegistry, registration_name
from knowledge.ingest.repos.storage import S3Storage
from knowledge.ingest.repos.sync import SyncReport, sync_repository

__all__ = [
    "MESSAGE_KEY",
    "SECRET_NAME_PREFIX",
    "SYNC_ALL",
    "RepoSyncQueue",
    "aws_repo_service",
    "handle_sync_message",
    "secret_reader",
]

SECRET_NAME_PREFIX = "kb-repo/"  # noqa: S105 - a name prefix, not a secret
MESSAGE_KEY = "kb_repo_sync"
SYNC_ALL = "all"
BUDGET_MARGIN_SECONDS = 30.0


class RepoSyncQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._sqs = client
        self._url = queue_url

    def send(self, body: Mapping[str, Any]) -> None:
        self._sqs.send_message(QueueUrl=self._url, MessageBody=json.dumps(body))

    def sync(self, scope: KnowledgeScope, name: str) -> dict[str, Any]:
        body = {MESSAGE_KEY: {"agent": scope.agent, "context": scope.context, "name": name}}
        self.send(body)
        return body[MESSAGE_KEY]


def _check_aws_registration(registration: RepoRegistration) -> None:
    ref = registration.credential
    if ref is not None:
        name = ref.split(":secret:", 1)[-1]
        if not name.startswith(SECRET_NAME_PREFIX):
            raise ValidationError(
                "credential",
                f"the secret's name must start with '{SECRET_NAME_PREFIX}' "
                "(the sync function may read only those)",
            )


class _AwsRepoService(RepoService):
    def add(self, scope: KnowledgeScope, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        _check_aws_registration(
            RepoRegistration.from_request(body, credential_kinds=(CREDENTIAL_ARN,))
        )
        return super().add(scope, body)


def aws_repo_service(s3: Any, bucket: str, queue: RepoSyncQueue) -> RepoService:
    registry = RepoRegistry(S3Storage(s3, bucket))

    def sync_later(
        scope: KnowledgeScope, registration: RepoRegistration
    ) -> tuple[int, dict[str, Any]]:
        return 202, {**queue.sync(scope, registration.name), "accepted": True}

    return _AwsRepoService(registry, sync_later, credential_kinds=(CREDENTIAL_ARN,))


def secret_reader(client: Any) -> Callable[[str], bytes]:
    def read(arn: str) -> bytes:
        answer = client.get_secret_value(SecretId=arn)
        if "SecretString" in answer:
            return str(answer["SecretString"]).encode("utf-8")
        return bytes(answer["SecretBinary"])

    return read


def registered(registry: RepoRegistry) -> Iterator[tuple[KnowledgeScope, str]]:
    """Every registered repository of the bucket: ``.kb@repos/<agent>/<context>/<name>.json``."""
    for key in registry.storage.keys(REGISTRY_PREFIX):
        parts = key[len(REGISTRY_PREFIX) :].split("/")
        name = registration_name(parts[2]) if len(parts) == 3 else None
        if name is not None:
            try:
                yield KnowledgeScope(parts[0], parts[1]), name
            except ValidationError:
                continue


def handle_sync_message(
    body: Mapping[str, Any],
    registry: RepoRegistry,
    queue: RepoSyncQueue,
    *,
    read_secret: Callable[[str], bytes],
    remaining_seconds: Callable[[], float],
    bounds: SyncBounds | None = None,
    hosts: HostPolicy | None = None,
) -> list[SyncReport]:
    """One queue message: ``sync_all`` fans out, ``sync`` syncs one repository. A sync
    connects only to global addresses and the operator's ``REPO_ALLOWED_NETWORKS``
    (``hosts``, default ``HostPolicy.from_environment()``): a registration's URL is a
    caller's, and the function can reach what the caller cannot."""
    task = body.get(MESSAGE_KEY)
    if task == SYNC_ALL:
        for scope, name in registered(registry):
            queue.sync(scope, name)
        return []
    if not isinstance(task, Mapping):
        raise ValidationError(MESSAGE_KEY, "is not a repository sync message")
    scope = KnowledgeScope(str(task.get("agent")), str(task.get("context")))
    registration = registry.get(scope, str(task.get("name")))
    base = bounds or SyncBounds()
    budget = max(1.0, min(base.time_budget_seconds, remaining_seconds() - BUDGET_MARGIN_SECONDS))
    report = sync_repository(
        registry,
        scope,
        registration,
        bounds=dataclasses.replace(base, time_budget_seconds=budget),
        read_secret=read_secret,
        hosts=hosts or HostPolicy.from_environment(),
    )
    if report.error is not None and report.error["kind"] == "time":
        queue.sync(scope, registration.name)  # continue from the manifest
    return [report]
