"""The ``url`` of a repository file: where a person opens it (pure, no I/O).

GitHub-, GitLab- and Bitbucket-style hosts get the file at a commit
(``/blob/<sha>/<path>``, ``/-/blob/<sha>/<path>``, ``/src/<sha>/<path>``), and so do
Bitbucket Server (``/scm/P/r`` -> ``/projects/P/repos/r/browse/<path>?at=<sha>``),
Azure DevOps (``/_git/r?path=/<path>&version=GC<sha>``; its SSH form
``ssh.dev.azure.com/v3/o/p/r`` too), Gitea and Forgejo (Codeberg,
``/src/commit/<sha>/<path>``) and sourcehut (``/tree/<sha>/item/<path>``); any other
host gets the repository URL and the path. SSH URLs (``ssh://git@github.com/o/r.git``)
are shown as the host's HTTPS page (an SSH port is never the page's). A URL that cannot
be made http(s) is ``None``.
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
    if host.lower() == "ssh.dev.azure.com" and path.startswith("/v3/"):
        org_project_repo = path[len("/v3/") :].split("/")
        if len(org_project_repo) == 3:  # ssh://git@ssh.dev.azure.com/v3/org/project/repo
            org, project, repo = org_project_repo
            return f"https://dev.azure.com/{org}/{project}/_git/{repo}"
    return f"{scheme}://{host}{port}{path}"


_STYLES = {
    "github": ("github.com",),
    "gitlab": ("gitlab.com",),
    "bitbucket": ("bitbucket.org",),
    "gitea": ("codeberg.org", "gitea.com"),
    "sourcehut": ("git.sr.ht",),
}
_PREFIXES = {"github": "github.", "gitlab": "gitlab.", "bitbucket": "bitbucket."}


def _style(host: str, path: str) -> str | None:
    host = host.lower()
    if "/_git/" in path:
        return "azure"
    for style, hosts in _STYLES.items():
        if host in hosts:
            return style
    for style, prefix in _PREFIXES.items():
        if host.startswith(prefix):
            return "bitbucket-server" if style == "bitbucket" else style
    if host.startswith(("gitea.", "forgejo.")):
        return "gitea"
    return None


def _bitbucket_server(base: str, commit: str, quoted: str) -> str:
    parts = urlsplit(base)
    segments = parts.path.strip("/").split("/")
    if segments and segments[0] == "scm":
        segments = segments[1:]
    if len(segments) != 2:
        return f"{base}/{quoted}"
    project, repo = segments
    root = f"{parts.scheme}://{parts.netloc}"
    return f"{root}/projects/{project}/repos/{repo}/browse/{quoted}?at={commit}"


def file_url(repo_url: str, commit: str, path: str) -> str | None:
    """Where ``path`` of the repository at ``commit`` opens in a browser."""
    base = web_base(repo_url)
    if base is None:
        return None
    quoted = quote(path, safe="/")
    parts = urlsplit(base)
    style = _style(parts.hostname or "", parts.path)
    if style == "github":
        return f"{base}/blob/{commit}/{quoted}"
    if style == "gitlab":
        return f"{base}/-/blob/{commit}/{quoted}"
    if style == "bitbucket":
        return f"{base}/src/{commit}/{quoted}"
    if style == "bitbucket-server":
        return _bitbucket_server(base, commit, quoted)
    if style == "azure":
        return f"{base}?path=/{quoted}&version=GC{commit}"
    if style == "gitea":
        return f"{base}/src/commit/{commit}/{quoted}"
    if style == "sourcehut":
        return f"{base}/tree/{commit}/item/{quoted}"
    return f"{base}/{quoted}"
