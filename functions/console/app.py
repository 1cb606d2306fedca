"""Console function: the knowledge console's pages on the stack's HTTP API.

A thin adapter over ``knowledge.aws.console_site.ConsoleSite``, which answers the public
routes ``GET /console`` and ``GET /console/{proxy+}``: the console's files as the
package ships them, its ``config.json`` generated from the stack's parameters (auth
mode, token issuer, the console's OAuth client), each with the console's security
headers. The pages then call the API on the same origin with the signed-in user's
token; this function reads nothing and may call no AWS service.

Cold start: the standard library and two small ``knowledge`` modules; no Powertools,
no boto3 (API Gateway's access log records every request).
"""

from __future__ import annotations

from typing import Any

from knowledge.aws.console_site import ConsoleSite

__all__ = ["lambda_handler", "site"]


class _Container:
    site: ConsoleSite | None = None


_container = _Container()


def site() -> ConsoleSite:
    """The deployment's console, read from the environment on the first request."""
    if _container.site is None:
        _container.site = ConsoleSite.from_env()
    return _container.site


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return site().respond(event)
