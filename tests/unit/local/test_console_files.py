"""Which request paths ``kb serve`` answers with the console's files, and that the pages
name only files the package ships (a page whose script is missing would be blank)."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from knowledge.local.console import console_file
from knowledge.local.playground import playground_asset

STATIC = resources.files("knowledge.local").joinpath("static")
FOLDER = STATIC.joinpath("console")
SHIPPED = sorted(entry.name for entry in FOLDER.iterdir() if entry.is_file())


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        ("/console/", ("console/index.html", "text/html; charset=utf-8")),
        ("/console/index.html", ("console/index.html", "text/html; charset=utf-8")),
        ("/console/scope.html", ("console/scope.html", "text/html; charset=utf-8")),
        ("/console/api.js", ("console/api.js", "text/javascript; charset=utf-8")),
        ("/console/console.css", ("console/console.css", "text/css; charset=utf-8")),
        ("/console/favicon.svg", ("console/favicon.svg", "image/svg+xml")),
        ("/console", ("console-redirect.html", "text/html; charset=utf-8")),
    ],
)
def test_a_console_path_names_its_file_and_type(route: str, expected: tuple[str, str]) -> None:
    assert console_file(route) == expected


@pytest.mark.parametrize(
    "route",
    [
        "/console/nope.html",
        "/console/../playground.py",
        "/console/..%2Fconsole.py",
        "/console/sub/api.js",
        "/console//api.js",
        "/consoleapi.js",
        "/console/console-redirect.html",
        "/v1/health",
    ],
)
def test_any_other_path_is_not_a_console_file(route: str) -> None:
    assert console_file(route) is None


def test_the_server_answers_a_console_path_with_the_shipped_bytes() -> None:
    asset = playground_asset("/console/scope.html?agent=a&context=c", tuple)
    assert asset is not None
    assert asset.content_type == "text/html; charset=utf-8"
    assert asset.body == FOLDER.joinpath("scope.html").read_bytes()
    assert playground_asset("/console/missing.js", tuple) is None


def test_every_file_a_page_or_module_names_is_shipped() -> None:
    named: dict[str, set[str]] = {}
    for name in SHIPPED:
        text = FOLDER.joinpath(name).read_text("utf-8")
        if name.endswith(".html"):
            found = re.findall(r'(?:src|href)="([^":#?]+)"', text)
            # The scope list is named, never "./": the deployed stack's /console/{proxy+}
            # route is not known to answer the folder itself (docs/deploy.md).
            assert "./" not in found, name
            found = [f for f in found if not f.startswith("../")]
        elif name.endswith(".js"):
            found = re.findall(r'from "\./([^"]+)"', text)
        else:
            continue
        named[name] = set(found)
    assert named["index.html"] >= {"console.css", "scopes.js", "favicon.svg"}
    assert named["scope.html"] >= {"scope.js", "shared.html", "settings.html"}
    missing = {(page, f) for page, files in named.items() for f in files if f not in SHIPPED}
    assert missing == set()
    # The console is these six pages (the docs and the screenshots name each), and the
    # sign-in's redirect URI on the deployed stack.
    pages = {n for n in SHIPPED if n.endswith(".html")}
    assert pages == {
        "index.html",
        "scope.html",
        "document.html",
        "repos.html",
        "shared.html",
        "settings.html",
        "signin.html",
    }
