"""The ``url`` of a repository file: where a person opens it (pure, no I/O).

GitHub-, GitLab- and Bitbucket-style hosts get the file at a commit
(``/blob/<sha>/<path>``, ``/-/blob/<sha>/<path>``, ``/src/<sha>/<path>``); any other
host gets the repository URL and the path. SSH URLs (``ssh://git@github.com/o/r.git``)
are shown as the host's HTTPS page. A URL that cannot be made http(s) is ``None``.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

__all__ = ["file_url", "web_base"]


def web_base(repo_url: str) -> str | None:
    """``https://host/owner/repo`` for a clone URL (``.git`` and credentials dropped)."""
    parts = urlsplit(repo_url)
    host = parts.hostname
    if not host:
        return None
    scheme = parts.scheme if parts.scheme in ("http", "https") else "https"
    port = f":{parts.port}" if parts.port and parts.scheme in ("http", "https") else ""
    path = parts.path.rstrip("/")
    path = path.removesuffix(".git")
    return f"{scheme}://{host}{port}{path}"


def _style(host: str) -> str | None:
    host = host.lower()
    for style in ("github", "gitlab", "bitbucket"):
        if host in (f"{style}.com", f"{style}.org") or host.startswith(f"{style}."):
            return style
    return None


def file_url(repo_url: str, commit: str, path: str) -> str | None:
    """Where ``path`` of the repository at ``commit`` opens in a browser."""
    base = web_base(repo_url)
    if base is None:
        return None
    quoted = quote(path, safe="/")
    style = _style(urlsplit(base).hostname or "")
    if style == "github":
        return f"{base}/blob/{commit}/{quoted}"
    if style == "gitlab":
        return f"{base}/-/blob/{commit}/{quoted}"
    if style == "bitbucket":
        return f"{base}/src/{commit}/{quoted}"
    return f"{base}/{quoted}"
