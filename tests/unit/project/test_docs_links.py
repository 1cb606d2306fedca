"""The repository's references to its docs resolve: every relative Markdown link (and its
``#fragment``, a heading of the target) in every Markdown file, and every ``docs/<file>``
named in the code, the Makefile and the configuration. docs/local.md names every ``kb``
option, as ``knowledge.local.cli_parser`` says it does."""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import pytest

from knowledge.local.cli_parser import build_parser

ROOT = Path(__file__).resolve().parents[3]
_LINK = re.compile(r"(?<!\\)\]\(([^()\s]+)\)")
# ``docs/deploy.md``, ``docs/images/playground.png`` as text (a path, not a store key: test
# fixtures name documents like ``docs/guide.md``, so tests/ is left to the link check).
_DOCS_PATH = re.compile(r"(?<![\w/.-])docs/(?:images/)?[\w-]+\.(?:md|yaml|png)\b")
_CODE_SUFFIXES = {".py", ".toml", ".yaml", ".yml", ".sh", ".cfg", ".md"}
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def _files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-``/``_`` dropped,
    spaces as ``-`` (inline code and links keep their text)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _anchors(markdown: str) -> set[str]:
    found: set[str] = set()
    for line in _FENCE.sub("", markdown).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = _slug(match.group(1))
            n, candidate = 0, slug
            while candidate in found:
                n += 1
                candidate = f"{slug}-{n}"
            found.add(candidate)
    return found


def broken_links(path: Path) -> list[str]:
    """The relative links of one Markdown file whose target or heading does not exist."""
    text = path.read_text(encoding="utf-8")
    broken = []
    for target in _LINK.findall(_FENCE.sub("", text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
            continue  # https:, mailto: and the like
        file_part, _, fragment = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists() or (
            fragment
            and resolved.suffix == ".md"
            and fragment not in _anchors(resolved.read_text(encoding="utf-8"))
        ):
            broken.append(target)
    return broken


def test_every_relative_markdown_link_resolves() -> None:
    problems = {
        path.relative_to(ROOT).as_posix(): links
        for path in _files()
        if path.suffix == ".md" and (links := broken_links(path))
    }
    assert problems == {}


def test_every_docs_file_named_outside_the_tests_exists() -> None:
    problems = {}
    for path in _files():
        relative = path.relative_to(ROOT)
        if relative.parts[0] == "tests" or (
            path.suffix not in _CODE_SUFFIXES and path.name != "Makefile"
        ):
            continue
        named = set(_DOCS_PATH.findall(path.read_text(encoding="utf-8")))
        missing = sorted(name for name in named if not (ROOT / name).exists())
        if missing:
            problems[relative.as_posix()] = missing
    assert problems == {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    found = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
        else:
            found |= {o for o in action.option_strings if o not in {"-h", "--help"}}
    return found


def test_docs_local_names_every_kb_option() -> None:
    text = (ROOT / "docs" / "local.md").read_text(encoding="utf-8")
    options = _options(build_parser())
    assert "--api-url" in options  # the parser was walked into its sub-commands
    assert sorted(o for o in options if not re.search(rf"`{re.escape(o)}[ `=]", text)) == []


@pytest.mark.parametrize(
    ("text", "broken"),
    [
        ("[a](missing.md)", ["missing.md"]),
        ("[a](present.md#no-such-heading)", ["present.md#no-such-heading"]),
        ("[a](present.md#a-heading) [b](#own-title) [c](https://example.com/x.md)", []),
        ("```\n[a](inside-a-fence.md)\n```", []),
    ],
)
def test_the_link_check_finds_what_is_broken(tmp_path: Path, text: str, broken: list[str]) -> None:
    (tmp_path / "present.md").write_text("# A heading\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(f"# Own title\n\n{text}\n", encoding="utf-8")
    assert broken_links(page) == broken
