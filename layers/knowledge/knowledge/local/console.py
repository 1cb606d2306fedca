"""The knowledge console's files, served by ``kb serve`` under ``/console/``.

The console is static pages (``static/console/``: HTML, JavaScript modules, one style
sheet; no build step) that talk to the public HTTP API only, so the same files can be
published in front of the deployed stack. This module only maps a request path to one of
those files: a name must be one path segment of a file the package ships, so no request
reaches another file. ``/console`` (no slash) answers a page that sends the browser on to
``/console/``, where the pages' relative links resolve.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

__all__ = ["CONSOLE_PATH", "console_file"]

CONSOLE_PATH = "/console/"

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_FOLDER = "console"


@cache
def _names() -> frozenset[str]:
    """The console files the package ships (read once: the package does not change)."""
    folder = resources.files("knowledge.local").joinpath("static", _FOLDER)
    return frozenset(
        entry.name
        for entry in folder.iterdir()
        if entry.is_file() and any(entry.name.endswith(ext) for ext in _TYPES)
    )


def console_file(route: str) -> tuple[str, str] | None:
    """The file under ``static/`` and its content type for ``route`` (a path without
    its query string), or ``None`` when ``route`` is no console file."""
    if route == CONSOLE_PATH.rstrip("/"):
        return "console-redirect.html", _TYPES[".html"]
    if not route.startswith(CONSOLE_PATH):
        return None
    name = route[len(CONSOLE_PATH) :] or "index.html"
    if name not in _names():
        return None
    extension = name[name.rindex(".") :]
    return f"{_FOLDER}/{name}", _TYPES[extension]
