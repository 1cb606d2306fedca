"""Settings of the OpenSearch store, from parameters or from the environment.

``OpenSearchConfig`` is an immutable value: building one validates it and does no
I/O (no network, no AWS calls). Secrets are never read here: a basic-auth password
kept in AWS Secrets Manager is named by its ARN and read when the client is first
created (``knowledge.stores.opensearch.client``).

Environment (``OpenSearchConfig.from_env``):

=================================  =====================================================
``OPENSEARCH_URL``                 endpoint, ``https://host[:port]`` (required)
``OPENSEARCH_INDEX``               index name (default ``knowledge``)
``OPENSEARCH_AUTH``                ``none`` | ``basic`` | ``sigv4`` (default: ``sigv4`` for
                                   ``*.amazonaws.com`` endpoints, else ``none``)
``OPENSEARCH_SERVICE``             ``es`` (managed domain) | ``aoss`` (Serverless); default
                                   from the host name (``*.aoss.amazonaws.com`` is ``aoss``)
``AWS_REGION``                     SigV4 region (then ``AWS_DEFAULT_REGION``)
``OPENSEARCH_USERNAME``            basic-auth user
``OPENSEARCH_PASSWORD_SECRET_ARN`` Secrets Manager secret holding the password (plain, or
                                   JSON with ``password`` and optionally ``username``)
``OPENSEARCH_PASSWORD``            plain password: accepted for loopback endpoints only
``OPENSEARCH_DEFAULT_MODE``        ``keyword`` (default) | ``vector`` | ``hybrid``
``OPENSEARCH_KEYWORD_WEIGHT``      hybrid keyword weight (default: the embedder's)
``OPENSEARCH_VECTOR_WEIGHT``       hybrid vector weight (default: the embedder's)
``OPENSEARCH_VECTOR_DIMENSIONS``   vector dimension (default: the embedder's)
``OPENSEARCH_VECTOR_ENGINE``       ``lucene`` | ``faiss`` (default ``lucene``; ``faiss`` on aoss)
``OPENSEARCH_TIMEOUT``             seconds per request (default 10)
``OPENSEARCH_MAX_RETRIES``         retries on 429/5xx/connection errors (default 3)
``OPENSEARCH_REPLICAS``            ``number_of_replicas`` of a new index (template: follows
                                   the domain shape; default: the cluster's)
``OPENSEARCH_MSEARCH``             ``true`` (default) sends hybrid's two searches in one
                                   ``_msearch``; ``false`` sends them one after the other
``OPENSEARCH_SEARCH_TIMEOUT``      seconds per search request (default 4)
``OPENSEARCH_SEARCH_MAX_RETRIES``  retries of a search request (default 1)
``OPENSEARCH_SEARCH_BUDGET``       seconds a search may take in all when the caller sets
                                   no deadline (default 12)
``OPENSEARCH_REFRESH_INTERVAL``    ``index.refresh_interval`` of a new index (default 1s)
``OPENSEARCH_WAIT_FOR_REFRESH``    ``false`` (default): a write returns at once and is
                                   searchable within the refresh interval; ``true``: a
                                   write session's last request waits for the next
                                   scheduled refresh (``refresh=wait_for``), so writes
                                   are searchable when the call returns (``kb`` sets it)
``OPENSEARCH_INDEX_PER_AGENT``     ``true``: strict per-agent isolation, one index per
                                   agent (``<index>-agent-<agent>``) and one per shared
                                   library, so term statistics never mix agents or
                                   libraries (default ``false``: one shared index)
``OPENSEARCH_HNSW_M``              HNSW ``m`` (links per node) of a new index (default 16)
``OPENSEARCH_HNSW_EF_CONSTRUCTION`` HNSW ``ef_construction`` of a new index (default 100)
``OPENSEARCH_EF_SEARCH``           HNSW ``ef_search`` sent with every vector query
                                   (``method_parameters``; default 200; ``0``: send none,
                                   the engine then searches with ``ef = k``)
``OPENSEARCH_VECTOR_DERIVED_SOURCE`` ``true``: a new index keeps vectors out of the stored
                                   ``_source`` and rebuilds them on read (k-NN 2.19+
                                   ``index.knn.derived_source.enabled``; 0.71x the
                                   bytes per chunk measured, reuse still reads them);
                                   default ``false``; never sent to Serverless
``OPENSEARCH_HEADINGS_WEIGHT``     ``0`` leaves a chunk's title and heading terms out
                                   of the chunks written; any other value keeps them,
                                   counted as text terms (``knowledge.ranking.headings``)
``OPENSEARCH_PAGE_WEIGHT``         the weight of a page's own keyword score next to its
                                   chunk's (``knowledge.ranking.page_signal``; 0: off)
=================================  =====================================================

The HNSW defaults come from ``bench/runs/scale.py`` (``bench/REPORT.md`` section 9,
``docs/sizing.md``): without ``ef_search`` the lucene engine walks the graph with
``ef = k`` and a big scope's vector recall@10 against exact search fell to 0.60 (a
16,600-chunk scope in an 84,000-chunk index, hashing embedder); ``ef_search`` 100, 200,
400 gave 0.70, 0.84, 0.90, and 400 cost as much as scoring the whole scope exactly.
Small scopes are exact at any value. ``m`` and ``ef_construction`` are fixed when the
index is created (changing them needs a reindex); ``ef_search`` applies to the next
query.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final
from urllib.parse import urlsplit

from knowledge.core.errors import ConfigurationError, ValidationError
from knowledge.core.loopback import is_loopback_url
from knowledge.core.model import SearchMode
from knowledge.core.scope_set import SHARED_AGENT
from knowledge.ranking.headings import DEFAULT_HEADINGS_WEIGHT, check_headings_weight
from knowledge.ranking.page_signal import PAGE_WEIGHT, check_page_weight

__all__ = [
    "AUTH_MODES",
    "DEFAULT_EF_SEARCH",
    "DEFAULT_HNSW_EF_CONSTRUCTION",
    "DEFAULT_HNSW_M",
    "DEFAULT_INDEX_NAME",
    "SERVICES",
    "VECTOR_ENGINES",
    "OpenSearchConfig",
]

AUTH_MODES = ("none", "basic", "sigv4")
SERVICES = ("es", "aoss")
VECTOR_ENGINES = ("lucene", "faiss")
DEFAULT_INDEX_NAME = "knowledge"

_INDEX_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,254}")
_MAX_VECTOR_DIMENSIONS = 16_000
_MAX_PER_AGENT_PREFIX = 255 - len("-agent-") - 2 * 64  # an agent name may double in length
DEFAULT_HNSW_M = 16
DEFAULT_HNSW_EF_CONSTRUCTION = 100
DEFAULT_EF_SEARCH = 200
_HNSW_M_RANGE = (2, 100)  # the k-NN plugin's bounds for m
_EF_RANGE = (2, 10_000)
_INTERVAL = re.compile(r"[1-9][0-9]{0,5}(ms|s|m)")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _default_service(url: str) -> str:
    host = urlsplit(url).hostname or ""
    return "aoss" if host.endswith(".aoss.amazonaws.com") else "es"


def _default_auth(url: str) -> str:
    host = urlsplit(url).hostname or ""
    return "sigv4" if host.endswith(".amazonaws.com") else "none"


_MAX_INDEX_NAME_BYTES: Final = 255


def _encoded(segment: str) -> str:
    """A scope segment as a valid, lower-case part of an index name, one-to-one."""
    return "".join(
        "__" if ch == "_" else ("_" + ch.lower() if ch.isupper() else ch) for ch in segment
    )


@dataclass(frozen=True, slots=True)
class OpenSearchConfig:
    """Connection, index and search settings of one OpenSearch store.

    ``auth`` is ``none`` (a local node), ``basic`` (``username`` with ``password``, or
    ``password_secret_arn``) or ``sigv4`` (AWS credentials of the process, signed for
    ``service`` ``es`` or ``aoss`` in ``region``). ``service="aoss"`` also switches the
    store to what OpenSearch Serverless allows (see the package README).
    ``vector_dimensions=None`` takes the embedder's dimension. ``client_ids=None``
    means deterministic chunk ids except on ``aoss`` (vector collections refuse them).
    Raises ``ConfigurationError`` naming the setting that is wrong.
    """

    url: str
    index_name: str = DEFAULT_INDEX_NAME
    auth: str = "none"
    service: str = "es"
    region: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    password_secret_arn: str | None = None
    default_mode: SearchMode = SearchMode.KEYWORD
    keyword_weight: float | None = None  # None: the embedder's (fusion.hybrid_weights)
    vector_weight: float | None = None
    vector_dimensions: int | None = None
    vector_engine: str | None = None
    timeout: float = 10.0
    max_retries: int = 3
    retry_initial_backoff: float = 0.5
    retry_max_backoff: float = 8.0
    bulk_max_chunk_bytes: int = 5 * 1024 * 1024
    bulk_chunk_size: int = 500
    use_msearch: bool = True
    client_ids: bool | None = None
    verify_certs: bool = True
    number_of_shards: int | None = None
    number_of_replicas: int | None = None
    search_timeout: float = 4.0
    search_max_retries: int = 1
    search_budget: float = 12.0
    refresh_interval: str = "1s"
    wait_for_refresh: bool = False
    index_per_agent: bool = False
    hnsw_m: int = DEFAULT_HNSW_M
    hnsw_ef_construction: int = DEFAULT_HNSW_EF_CONSTRUCTION
    ef_search: int = DEFAULT_EF_SEARCH
    vector_derived_source: bool = False
    headings_weight: float = DEFAULT_HEADINGS_WEIGHT
    page_weight: float = PAGE_WEIGHT

    def __post_init__(self) -> None:
        """Validate every setting (the first wrong one is a ``ConfigurationError`` naming
        it) and fill in the defaults that depend on others, in this order."""
        self._check_url()
        self._check_index_name()
        self._check_access()
        self._check_ranking()
        self._check_vectors()
        self._check_requests()
        self._check_index_settings()

    def _check_url(self) -> None:
        """``scheme://host[:port]``, no path, query or credentials; kept without a
        trailing ``/``."""
        url = self.url.strip().rstrip("/") if isinstance(self.url, str) else ""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(
                f"opensearch url: {self.url!r} is not an http(s) URL like https://host:443"
            )
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ConfigurationError(
                f"opensearch url: {self.url!r} must be just scheme://host[:port], "
                "without a path or query"
            )
        if parts.username or parts.password:
            raise ConfigurationError(
                "opensearch url: must not carry credentials; use auth='basic' with a "
                "username and a password secret"
            )
        try:
            _ = parts.port
        except ValueError:
            raise ConfigurationError(f"opensearch url: {self.url!r} has an invalid port") from None
        object.__setattr__(self, "url", url)

    def _check_index_name(self) -> None:
        if not isinstance(self.index_name, str) or not _INDEX_NAME.fullmatch(self.index_name):
            raise ConfigurationError(
                f"opensearch index: {self.index_name!r} must be 1-255 lowercase letters, "
                "digits, '.', '_' or '-', starting with a letter or digit"
            )

    def _check_access(self) -> None:
        """The auth mode and what it needs: the service, a region for SigV4, a username
        and a password (or its secret's ARN) for basic auth."""
        if self.auth not in AUTH_MODES:
            raise ConfigurationError(
                f"opensearch auth: {self.auth!r} is not one of {', '.join(AUTH_MODES)}"
            )
        if self.service not in SERVICES:
            raise ConfigurationError(
                f"opensearch service: {self.service!r} is not one of {', '.join(SERVICES)} "
                "(es: managed domain, aoss: Serverless)"
            )
        if self.service == "aoss" and self.auth != "sigv4":
            raise ConfigurationError(
                "opensearch auth: OpenSearch Serverless (service 'aoss') only accepts "
                "SigV4-signed requests; set auth='sigv4'"
            )
        if self.auth == "sigv4" and not self.region:
            raise ConfigurationError(
                "opensearch region: SigV4 signing needs a region; set AWS_REGION "
                "(Lambda sets it) or pass region="
            )
        if self.auth == "basic":
            if not self.username and not self.password_secret_arn:
                raise ConfigurationError(
                    "opensearch username: basic auth needs a username "
                    "(or a password secret whose JSON has one)"
                )
            if self.password is None and not self.password_secret_arn:
                raise ConfigurationError(
                    "opensearch password: basic auth needs a password secret "
                    "(OPENSEARCH_PASSWORD_SECRET_ARN) or, for a local node, a password"
                )
        if self.password_secret_arn is not None and not self.password_secret_arn.startswith("arn:"):
            raise ConfigurationError(
                f"opensearch password secret: {self.password_secret_arn!r} is not an ARN "
                "(arn:aws:secretsmanager:<region>:<account>:secret:<name>)"
            )

    def _check_ranking(self) -> None:
        """The default mode, the hybrid weights, the headings and page weights."""
        mode: object = self.default_mode
        try:
            object.__setattr__(self, "default_mode", SearchMode.parse(mode))
        except ValueError as exc:
            raise ConfigurationError(f"opensearch default mode: {exc}") from None
        for name in ("keyword_weight", "vector_weight"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ConfigurationError(f"opensearch {name}: must be a number >= 0, got {value!r}")
        try:
            object.__setattr__(self, "headings_weight", check_headings_weight(self.headings_weight))
        except ValidationError as exc:
            raise ConfigurationError(f"opensearch headings_weight: {exc.message}") from None
        try:
            object.__setattr__(self, "page_weight", check_page_weight(self.page_weight))
        except ValidationError as exc:
            raise ConfigurationError(f"opensearch page_weight: {exc.message}") from None
        if (
            self.keyword_weight is not None
            and self.vector_weight is not None
            and (self.keyword_weight + self.vector_weight <= 0)
        ):
            raise ConfigurationError("opensearch hybrid weights: at least one must be above 0")

    def _check_vectors(self) -> None:
        """The vector dimension, and the engine (``faiss`` by default on Serverless)."""
        if self.vector_dimensions is not None and (
            isinstance(self.vector_dimensions, bool)
            or not isinstance(self.vector_dimensions, int)
            or not 1 <= self.vector_dimensions <= _MAX_VECTOR_DIMENSIONS
        ):
            raise ConfigurationError(
                f"opensearch vector dimensions: must be an integer in 1..{_MAX_VECTOR_DIMENSIONS}, "
                f"got {self.vector_dimensions!r}"
            )
        if self.vector_engine is None:
            object.__setattr__(
                self, "vector_engine", "faiss" if self.service == "aoss" else "lucene"
            )
        elif self.vector_engine not in VECTOR_ENGINES:
            raise ConfigurationError(
                f"opensearch vector engine: {self.vector_engine!r} is not one of "
                f"{', '.join(VECTOR_ENGINES)} (both filter inside the knn clause)"
            )

    def _check_requests(self) -> None:
        """Timeouts, retries and bulk sizes; client ids (not on Serverless); the HNSW
        parameters; the shard and replica counts of a new index."""
        for name in (
            "timeout",
            "retry_initial_backoff",
            "retry_max_backoff",
            "search_timeout",
            "search_budget",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigurationError(f"opensearch {name}: must be a number > 0, got {value!r}")
        positive_ints = {
            "max_retries": 0,
            "search_max_retries": 0,
            "bulk_max_chunk_bytes": 1024,
            "bulk_chunk_size": 1,
        }
        for name, minimum in positive_ints.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ConfigurationError(
                    f"opensearch {name}: must be an integer >= {minimum}, got {value!r}"
                )
        if self.client_ids is None:
            object.__setattr__(self, "client_ids", self.service != "aoss")
        hnsw_ranges = {
            "hnsw_m": _HNSW_M_RANGE,
            "hnsw_ef_construction": _EF_RANGE,
            "ef_search": (0, _EF_RANGE[1]),
        }
        for name, (low, high) in hnsw_ranges.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigurationError(
                    f"opensearch {name}: must be an integer in {low}..{high}, got {value!r}"
                )
        for name in ("number_of_shards", "number_of_replicas"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigurationError(f"opensearch {name}: must be an integer, got {value!r}")

    def _check_index_settings(self) -> None:
        """The refresh interval, the switches, and an index name that leaves room for the
        agent's part with ``index_per_agent``."""
        if not isinstance(self.refresh_interval, str) or not _INTERVAL.fullmatch(
            self.refresh_interval
        ):
            raise ConfigurationError(
                f"opensearch refresh_interval: {self.refresh_interval!r} is not a duration "
                "like 1s or 500ms"
            )
        for name in ("wait_for_refresh", "index_per_agent", "vector_derived_source"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(f"opensearch {name}: must be true or false")
        if self.index_per_agent and len(self.index_name) > _MAX_PER_AGENT_PREFIX:
            raise ConfigurationError(
                f"opensearch index: with index_per_agent the name must be at most "
                f"{_MAX_PER_AGENT_PREFIX} characters (agent indexes are "
                f"<index>-agent-<agent>, at most 255), got {len(self.index_name)}"
            )

    @property
    def serverless(self) -> bool:
        """True for Amazon OpenSearch Serverless (``service='aoss'``)."""
        return self.service == "aoss"

    def index_for(self, agent: str, context: str | None = None) -> str:
        """The index holding ``agent``'s documents (of ``context``): the shared index, or
        with ``index_per_agent`` the agent's own, ``<index_name>-agent-<agent>`` with the
        agent name made a valid index name one-to-one (``_`` -> ``__``, an upper-case
        letter X -> ``_x``), so two agents never share an index. A shared library
        (``_shared/<context>``, ``knowledge.core.scope_set.statistics_owner``) has an index of
        its own, ``<index_name>-agent-__shared_-<context>`` (the context encoded alike;
        ``_-`` never appears in an encoded agent, so no agent's index has that name), or,
        were that over OpenSearch's 255 bytes, ``...-agent-__shared_.<digest>``."""
        if not self.index_per_agent:
            return self.index_name
        agent_index = f"{self.index_name}-agent-{_encoded(agent)}"
        if agent != SHARED_AGENT:
            return agent_index
        if context is None:
            raise ValueError("a shared library's index needs its context")
        name = f"{agent_index}_-{_encoded(context)}"
        if len(name.encode()) <= _MAX_INDEX_NAME_BYTES:
            return name
        return f"{agent_index}_.{hashlib.sha256(context.encode()).hexdigest()[:40]}"

    def with_overrides(self, **changes: Any) -> OpenSearchConfig:
        """A copy with some settings changed (validated again)."""
        return replace(self, **changes)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> OpenSearchConfig:
        """Build from ``OPENSEARCH_*`` / ``AWS_REGION`` variables; ``overrides`` win.

        A plain ``OPENSEARCH_PASSWORD`` is refused unless the endpoint is on loopback:
        in AWS the password must come from Secrets Manager, never from the environment
        of a function (where it shows in the console and in the template).
        """
        source = os.environ if env is None else env
        get = functools.partial(_env_value, source)
        unknown = set(overrides) - {f.name for f in fields(cls)}
        if unknown:
            raise ConfigurationError(f"opensearch: unknown settings {sorted(unknown)}")
        url = overrides.get("url") or get("OPENSEARCH_URL")
        if not url:
            raise ConfigurationError(
                "opensearch url: set OPENSEARCH_URL (or --opensearch-url) to the endpoint"
            )
        values: dict[str, Any] = {
            "url": url,
            "service": get("OPENSEARCH_SERVICE") or _default_service(url),
            "auth": get("OPENSEARCH_AUTH") or _default_auth(url),
        }
        region = get("AWS_REGION") or get("AWS_DEFAULT_REGION")
        if region:
            values["region"] = region
        values.update(_env_texts(get))
        values.update(_env_numbers(get))
        values.update(_env_switches(get))
        values.update(overrides)
        plain_password = get("OPENSEARCH_PASSWORD")
        if plain_password is not None and "password" not in overrides:
            if not is_loopback_url(str(values["url"])):
                raise ConfigurationError(
                    "OPENSEARCH_PASSWORD: a plain password in the environment is only "
                    "accepted for a local node (localhost); for a remote endpoint put it in "
                    "AWS Secrets Manager and set OPENSEARCH_PASSWORD_SECRET_ARN"
                )
            values["password"] = plain_password
        return cls(**values)


_TEXT_SETTINGS = {
    "index_name": "OPENSEARCH_INDEX",
    "username": "OPENSEARCH_USERNAME",
    "password_secret_arn": "OPENSEARCH_PASSWORD_SECRET_ARN",
    "default_mode": "OPENSEARCH_DEFAULT_MODE",
    "vector_engine": "OPENSEARCH_VECTOR_ENGINE",
    "refresh_interval": "OPENSEARCH_REFRESH_INTERVAL",
}
"""Settings read from the environment as text (checked by ``OpenSearchConfig``)."""

_NUMBER_SETTINGS: dict[str, tuple[str, type]] = {
    "keyword_weight": ("OPENSEARCH_KEYWORD_WEIGHT", float),
    "vector_weight": ("OPENSEARCH_VECTOR_WEIGHT", float),
    "timeout": ("OPENSEARCH_TIMEOUT", float),
    "vector_dimensions": ("OPENSEARCH_VECTOR_DIMENSIONS", int),
    "max_retries": ("OPENSEARCH_MAX_RETRIES", int),
    "number_of_replicas": ("OPENSEARCH_REPLICAS", int),
    "search_timeout": ("OPENSEARCH_SEARCH_TIMEOUT", float),
    "search_max_retries": ("OPENSEARCH_SEARCH_MAX_RETRIES", int),
    "search_budget": ("OPENSEARCH_SEARCH_BUDGET", float),
    "hnsw_m": ("OPENSEARCH_HNSW_M", int),
    "hnsw_ef_construction": ("OPENSEARCH_HNSW_EF_CONSTRUCTION", int),
    "ef_search": ("OPENSEARCH_EF_SEARCH", int),
    "headings_weight": ("OPENSEARCH_HEADINGS_WEIGHT", float),
    "page_weight": ("OPENSEARCH_PAGE_WEIGHT", float),
}
"""Settings read from the environment as numbers of that type."""

_SWITCHES = {
    "use_msearch": "OPENSEARCH_MSEARCH",
    "wait_for_refresh": "OPENSEARCH_WAIT_FOR_REFRESH",
    "index_per_agent": "OPENSEARCH_INDEX_PER_AGENT",
    "vector_derived_source": "OPENSEARCH_VECTOR_DERIVED_SOURCE",
}
"""Settings read from the environment as ``true``/``false`` (and their spellings)."""


def _env_value(source: Mapping[str, str], name: str) -> str | None:
    """The variable's value without surrounding blanks; ``None`` when unset or blank."""
    value = source.get(name)
    return value.strip() if value is not None and value.strip() else None


def _env_texts(get: Callable[[str], str | None]) -> dict[str, Any]:
    return {key: value for key, var in _TEXT_SETTINGS.items() if (value := get(var)) is not None}


def _env_numbers(get: Callable[[str], str | None]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, (var, kind) in _NUMBER_SETTINGS.items():
        value = get(var)
        if value is not None:
            try:
                values[key] = kind(value)
            except ValueError:
                raise ConfigurationError(
                    f"{var}: {value!r} is not a valid {kind.__name__}"
                ) from None
    return values


def _env_switches(get: Callable[[str], str | None]) -> dict[str, bool]:
    values: dict[str, bool] = {}
    for key, var in _SWITCHES.items():
        switch = get(var)
        if switch is not None:
            if switch.lower() not in _TRUE + _FALSE:
                raise ConfigurationError(f"{var}: {switch!r} is not true or false")
            values[key] = switch.lower() in _TRUE
    return values
