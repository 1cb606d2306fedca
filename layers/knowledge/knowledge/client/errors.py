"""The errors ``KnowledgeClient`` raises beyond the package's own (module ``knowledge.client``)."""

from __future__ import annotations

from knowledge.core.errors import (
    KnowledgeError,
    StoreUnavailableError,
)

__all__ = ["AccessDeniedError", "ApiError", "ServiceUnavailableError"]


class ApiError(KnowledgeError):
    """The API answered with an unexpected status. ``status`` is the HTTP status code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class AccessDeniedError(ApiError):
    """401 or 403: the caller is not authenticated, or not allowed this agent or route."""


class ServiceUnavailableError(StoreUnavailableError):
    """The API could not answer after the retries (429, 5xx, timeout, connection refused)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
