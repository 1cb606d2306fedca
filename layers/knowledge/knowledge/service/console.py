"""The knowledge console's files and the headers they are served with, for both front ends.

The console is static pages shipped in the package (``knowledge/local/static/console/``:
HTML, JavaScript modules, one style sheet; no build step) that talk to the public HTTP
API only. ``kb serve`` answers them under ``/console/`` (``knowledge.local.console``) and
so does the deployed stack's console function (``knowledge.aws.console_site``); both map
a request path to one of those files here: a name must be one path segment of a file the
package ships, so no request reaches another file.

``config.json`` is the pages' settings (``ConsoleSettings``): the package ships the one
``kb serve`` answers (no sign-in, same origin); the stack answers one generated from its
parameters instead. ``security_headers`` is what every console answer carries: a strict
Content-Security-Policy (only the package's own scripts and styles, no inline script,
requests only to the origins named), no framing, no MIME sniffing, no referrer.

The files are read as package data of ``knowledge`` (not through ``knowledge.local``, which
the AWS front end does not import).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

__all__ = [
    "CONFIG_NAME",
    "CONSOLE_PATH",
    "ConsoleSettings",
    "console_file",
    "content_security_policy",
    "read_console_file",
    "security_headers",
]

CONSOLE_PATH = "/console/"
CONFIG_NAME = "config.json"
"""The pages' settings, fetched by ``config.js`` next to the pages."""

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json; charset=utf-8",
}
_FOLDER = "console"
_STATIC = ("local", "static")

AuthMode = Literal["none", "jwt", "iam"]


@cache
def _names() -> frozenset[str]:
    """The console files the package ships (read once: the package does not change)."""
    folder = resources.files("knowledge").joinpath(*_STATIC, _FOLDER)
    return frozenset(
        entry.name
        for entry in folder.iterdir()
        if entry.is_file() and any(entry.name.endswith(ext) for ext in _TYPES)
    )


def console_file(route: str) -> tuple[str, str] | None:
    """The file under ``static/`` and its content type for ``route`` (a path without
    its query string), or ``None`` when ``route`` is no console file. ``/console`` (no
    slash) is a page that sends the browser on to ``/console/``, where the pages'
    relative links resolve."""
    if route == CONSOLE_PATH.rstrip("/"):
        return "console-redirect.html", _TYPES[".html"]
    if not route.startswith(CONSOLE_PATH):
        return None
    name = route[len(CONSOLE_PATH) :] or "index.html"
    if name not in _names():
        return None
    extension = name[name.rindex(".") :]
    return f"{_FOLDER}/{name}", _TYPES[extension]


def read_console_file(name: str) -> bytes:
    """The bytes of ``name``, a path ``console_file`` answered (under ``static/``)."""
    return resources.files("knowledge").joinpath(*_STATIC, *name.split("/")).read_bytes()


@dataclass(frozen=True)
class ConsoleSettings:
    """What ``config.json`` tells the pages: how to authenticate and how files go up.

    ``auth``: ``none`` (``kb serve``), ``jwt`` (sign in at ``issuer`` as the public client
    ``client_id`` with ``scopes``: authorization code with PKCE) or ``iam`` (SigV4, which a
    browser cannot sign: the pages say so). ``uploads``: ``put`` (the bytes through the
    API's PUT, ``kb serve``) or ``presigned`` (ask ``POST .../uploads``, post the file to
    the bucket). ``agents_claim``: the access token's claim naming the agents it may read
    (``jwt``), which the scope list lists when no server list answers.
    """

    auth: AuthMode
    issuer: str = ""
    client_id: str = ""
    scopes: str = "openid"
    uploads: Literal["put", "presigned"] = "put"
    agents_claim: str = ""

    def to_json(self) -> bytes:
        body = {
            "auth": self.auth,
            "issuer": self.issuer,
            "client_id": self.client_id,
            "scopes": self.scopes,
            "uploads": self.uploads,
            "agents_claim": self.agents_claim,
        }
        return json.dumps(body, indent=2).encode("utf-8")


def content_security_policy(connect: Iterable[str] = ()) -> str:
    """The pages' policy: their own scripts, styles and images only (no inline script or
    style), requests to this origin and the ``connect`` origins (the issuer, the bucket),
    forms and ``<base>`` nowhere, never in a frame."""
    origins = " ".join(["'self'", *dict.fromkeys(o for o in connect if o)])
    return (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src {origins}; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
    )


def security_headers(connect: Iterable[str] = ()) -> dict[str, str]:
    """The headers every console answer carries (module docstring)."""
    return {
        "Content-Security-Policy": content_security_policy(connect),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Cache-Control": "no-cache",
    }
