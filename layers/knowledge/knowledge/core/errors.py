"""The one error tree of the `knowledge` package.

::

    KnowledgeError                      base of everything raised on purpose
    ├── ValidationError                 bad input; names the field (HTTP 400)
    │   ├── InvalidScopeError           agent/context segment not a valid scope name
    │   ├── UnsupportedModeError        the store cannot answer this search mode
    │   └── TooLargeError               a document body over the size limit (HTTP 413)
    ├── AccessDeniedError               caller not allowed this agent or operation (403)
    ├── NotFoundError                   a route, scope or document that does not exist (404)
    ├── RateLimitedError                a caller over one of its write limits (429)
    ├── ConfigurationError              the product is set up wrongly (missing key, bad URL)
    │   └── EmbeddingMismatchError      provider/dimension differs from the existing index
    ├── ExtractionError                 a document's bytes cannot become text
    ├── ArchivedObjectError             a document's object is archived: unreadable until restored
    ├── EmbeddingError                  the embedding provider failed (after retries)
    └── StoreError                      the index backend failed
        ├── StoreUnavailableError       the backend cannot be reached
        └── StoreAccessDeniedError      the backend refused our own credentials (401/403)

Callers (HTTP API, tool, CLI) map these in one place; nothing else reaches a user.
"""

from __future__ import annotations

__all__ = [
    "STORE_ACCESS_DENIED",
    "AccessDeniedError",
    "ArchivedObjectError",
    "ConfigurationError",
    "EmbeddingError",
    "EmbeddingMismatchError",
    "ExtractionError",
    "InvalidScopeError",
    "KnowledgeError",
    "NotFoundError",
    "RateLimitedError",
    "StoreAccessDeniedError",
    "StoreError",
    "StoreUnavailableError",
    "TooLargeError",
    "UnsupportedModeError",
    "ValidationError",
    "public_message",
]


class KnowledgeError(Exception):
    """Base class: every error this package raises on purpose."""


class ValidationError(KnowledgeError, ValueError):
    """Bad input. ``field`` names the offending field, ``message`` says what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class InvalidScopeError(ValidationError):
    """An agent or context name that is not a valid scope segment."""


class UnsupportedModeError(ValidationError):
    """The store does not support the requested search mode."""

    def __init__(self, mode: str, store: str, supported: str) -> None:
        super().__init__(
            "mode", f"'{mode}' is not supported by the {store} store (supported: {supported})"
        )


class TooLargeError(ValidationError):
    """A body larger than what is taken (HTTP 413: the request itself is fine, only too
    big, so a caller can tell "send it another way" from "fix the request"); ``message``
    names the limit."""


class NotFoundError(KnowledgeError):
    """Something that was asked for does not exist."""


class RateLimitedError(KnowledgeError):
    """A caller over one of its limits (HTTP 429, ``knowledge.service.write_quotas``): the
    request is fine but refused for now, and nothing was stored.

    ``limit`` names the limit (``write_requests_per_minute``, ...), ``value`` is its
    setting, ``retry_after`` the whole seconds until asking again can succeed (the
    ``Retry-After`` header) and ``message`` says all three in plain words. ``retryable``
    is ``False`` when waiting alone cannot help (a scope holding its most documents takes
    a new one only once some are deleted), so clients that retry a 429 stop at once.
    """

    def __init__(
        self, limit: str, value: int, retry_after: int, message: str, *, retryable: bool = True
    ) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value
        self.retry_after = retry_after
        self.message = message
        self.retryable = retryable


class ConfigurationError(KnowledgeError):
    """The product is configured wrongly; the message says how to fix it."""


class EmbeddingMismatchError(ConfigurationError):
    """The embedding provider or its dimension differs from what the index was built with."""


class AnalysisMismatchError(ConfigurationError):
    """The index's keyword terms were made by another analysis (``knowledge.ranking.analysis``) than
    this version's: its keyword side would silently miss; reindex it."""


class RecordsMismatchError(AnalysisMismatchError):
    """The index was written before its records carried the fields this version filters
    and returns (``knowledge.core.origin.RECORDS``: ``origin``, ``format``): its filters on
    them would silently miss; reindex it, as for another analysis."""


class ExtractionError(KnowledgeError):
    """A document's bytes cannot be turned into text (binary, too large, unknown type)."""


class ArchivedObjectError(KnowledgeError):
    """A document's object is in an archive storage class (S3 Glacier Flexible Retrieval,
    Deep Archive, an Intelligent-Tiering archive tier): it cannot be read until it is
    restored, so retrying cannot help."""


class EmbeddingError(KnowledgeError):
    """The embedding provider failed, after retries where they apply."""


class StoreError(KnowledgeError):
    """The index backend failed."""


class StoreUnavailableError(StoreError):
    """The index backend cannot be reached."""


class StoreAccessDeniedError(StoreError):
    """The index backend refused the credentials this process signs with (HTTP 401/403):
    on AWS, the function's role is missing from the collection's data access policy, or
    from the domain's access policy (or its fine-grained access control mapping). The
    operator must act; retrying changes nothing."""


class AccessDeniedError(KnowledgeError):
    """The caller is authenticated but not allowed this agent or operation (HTTP 403).

    ``field`` names what was refused (``agent``, ``operation``); ``message`` says why
    without echoing the caller's grants.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


STORE_ACCESS_DENIED = (
    "OpenSearch refused the function's role (access denied); the operator must check, "
    "for that role: on OpenSearch Serverless, the collection's data access policy "
    "(ServerlessCollectionName must be the collection's name) and aoss:APIAccessAll; on a "
    "domain, its access policy, or the fine-grained access control role mapping "
    "(docs/deploy.md, section 2)"
)
"""What a caller is told when the index backend refuses the service's own role: what is
wrong and where to look, never the role's ARN or the endpoint."""


def public_message(exc: BaseException) -> str:
    """What a caller (an HTTP client, a model using a tool) is told of a failure that is
    not its own: a fixed phrase by kind. The exception's own text (endpoint URLs, index
    names, library messages, ARNs) goes to the log only. Bad input and a missing thing are
    the caller's own business and keep their message, as the HTTP API's 400 and 404 do, and
    so is a limit the caller went over (429)."""
    if isinstance(exc, ValidationError | NotFoundError | RateLimitedError):
        return str(exc)
    if isinstance(exc, ConfigurationError):
        return "the service is misconfigured; the operator must act"
    if isinstance(exc, StoreUnavailableError):
        return "the index backend is unavailable; try again later"
    if isinstance(exc, StoreAccessDeniedError):
        return STORE_ACCESS_DENIED
    if isinstance(exc, EmbeddingError):
        return "the embedding provider failed; try again later"
    if isinstance(exc, StoreError):
        return "the index backend failed"
    if isinstance(exc, AccessDeniedError):
        return "access to this knowledge base was refused"
    return "internal error"
