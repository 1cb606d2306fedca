"""The playground page of ``kb serve``: static files shipped in the package, and a scope list.

``GET /`` is the page (``static/index.html`` with its ``.js`` and ``.css``: plain files, no
CDN, no build step); ``GET /playground/scopes`` lists the scopes the page can choose from.
Everything else the page does goes through the ordinary HTTP API. The console's pages
under ``/console/`` are served the same way (``knowledge.local.console``). Only the local
server serves these paths; the deployed API does not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources

from knowledge.core.scope import KnowledgeScope
from knowledge.local.console import console_file

__all__ = ["SCOPES_PATH", "Asset", "playground_asset"]

SCOPES_PATH = "/playground/scopes"

_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/playground.js": ("playground.js", "text/javascript; charset=utf-8"),
    "/playground.css": ("playground.css", "text/css; charset=utf-8"),
}


@dataclass(frozen=True, slots=True)
class Asset:
    """A response for one playground path."""

    content_type: str
    body: bytes


def playground_asset(
    path: str, scopes: Callable[[], Iterable[KnowledgeScope]], *, writes: bool = False
) -> Asset | None:
    """The page's file or the scope list for ``path`` (query string ignored); ``None`` for
    any other path, which is then the API's to answer. ``writes`` (``kb serve
    --allow-writes``) is said in the scope list, and the page then shows its upload box
    and note editor."""
    route = path.split("?", 1)[0]
    if route == SCOPES_PATH:
        listed = sorted({(s.agent, s.context) for s in scopes()})
        body = {"scopes": [{"agent": a, "context": c} for a, c in listed], "writes": writes}
        return Asset("application/json; charset=utf-8", json.dumps(body).encode("utf-8"))
    found = _FILES.get(route) or console_file(route)  # the console: /console/
    if found is None:
        return None
    name, content_type = found
    data = resources.files("knowledge.local").joinpath("static", name).read_bytes()
    return Asset(content_type, data)
