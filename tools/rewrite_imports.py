"""Rewrite the layer's old module paths (moved or renamed modules) to the new ones.

The ``knowledge`` package moved from 34 top-level modules to sub-packages that say the data
flow (docs/architecture.md, "The package"); later, modules that shared one name in
different packages (``writes``, ``synonyms``, ``local``) or mirrored a neighbour's
(``query_filters`` beside ``filter_query``) were renamed for what differs between them
(the last block of ``MOVES``). This script rewrites every reference to an old
path in the repository's text files: dotted module paths (``knowledge.indexing`` ->
``knowledge.ingest.pipeline``), file paths (``knowledge/indexing.py``) and the
``from knowledge import text`` form. It is idempotent: a new path never contains an old one.

    python tools/rewrite_imports.py            # rewrite in place, print the files changed
    python tools/rewrite_imports.py --check    # exit 1 if any file still names an old path
    python tools/rewrite_imports.py --move     # git mv the old modules first (done once)

Branches written against an old layout run it after merging main. Benchmark results and
the report made from them (``bench/results/``, ``bench/REPORT.md``) keep the names they
were measured with.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "layers" / "knowledge" / "knowledge"

#: old module (below ``knowledge.``) -> new module. Packages move with everything below.
MOVES: dict[str, str] = {
    # core: value types, contracts and the small I/O helpers every layer uses
    "errors": "core.errors",
    "scope": "core.scope",
    "identity": "core.identity",
    "model": "core.model",
    "origin": "core.origin",
    "documents": "core.documents",
    "source": "core.source",
    "search_filter": "core.filter_language",
    "filters": "core.path_filters",
    "deadline": "core.deadline",
    "retry_after": "core.retry_after",
    "loopback": "core.loopback",
    "aws_clients": "core.aws_clients",
    "secrets": "core.secrets",
    # ranking: how text becomes terms and scores become one list (pure, shared by stores)
    "text": "ranking.analysis",
    "headings": "ranking.headings",
    "fusion": "ranking.fusion",
    # ingest: from a source to a store
    "chunking": "ingest.chunking",
    "indexing": "ingest.pipeline",
    "lookahead": "ingest.lookahead",
    "writes": "ingest.api_writes",
    "sources": "ingest.sources",
    "repos": "ingest.repos",
    "repos.cli": "local.repo_cli",  # ``kb repo``: a command, so beside ``kb``
    "ingest.repos.cli": "local.repo_cli",
    # stores
    "store": "stores.protocol",
    "stores.opensearch.config": "stores.opensearch.settings",
    # agent_tools: what an agent reads (tools, result lists, MCP server, prompt context)
    "results": "agent_tools.results",
    "tool": "agent_tools.tool",
    "shared": "agent_tools.shared",
    # service: the HTTP API, framework-free, served by both front ends
    "api": "service.api",
    # aws: the Lambda glue
    "access": "aws.access",
    "lambda_config": "aws.settings",
    "time_budget": "aws.invocation_time",
    "sqs_batch": "aws.sqs_batch",
    "reindex_queue": "aws.reindex_queue",
    "events": "aws.events",
    "event_indexing": "aws.event_indexing",
    "writes_s3": "aws.bucket_writes",
    # local: kb, its server, watcher and MCP server
    "cli": "local.cli",
    "mcp_server": "local.mcp_server",
    # names that say what differs where two modules had one name
    "ingest.writes": "ingest.api_writes",  # API write requests -> DocumentWrite
    "local.writes": "local.folder_writes",  # kb serve's writes into the served folder
    "aws.writes": "aws.bucket_writes",  # writes into the S3 documents bucket
    "ingest.synonyms": "ingest.synonyms_file",  # the scope's _synonyms.txt, checked and stored
    "ranking.synonyms": "ranking.synonym_expansion",  # parse the rules, expand a query
    "stores.opensearch.synonyms": "stores.opensearch.write.synonym_records",  # record + cache
    "embedding.local": "embedding.sentence_transformers",  # the "local" provider's backend
    "ingest.sources.local": "ingest.sources.folders",  # documents from local folders
    "ingest.repos.local": "ingest.repos.kb_serve",  # repositories on kb serve
    "stores.opensearch.query_filters": "stores.opensearch.request_filters",
    # the OpenSearch store by direction: what reads (read/) and what writes (write/); the
    # facade, connection, settings, mapping and the filters both sides send stay on top
    "stores.opensearch.search": "stores.opensearch.read.search",
    "stores.opensearch.queries": "stores.opensearch.read.queries",
    "stores.opensearch.answers": "stores.opensearch.read.answers",
    "stores.opensearch.listing": "stores.opensearch.read.listing",
    "stores.opensearch.chunk_listing": "stores.opensearch.read.chunk_listing",
    "stores.opensearch.page_side": "stores.opensearch.read.page_side",
    "stores.opensearch.relevance_side": "stores.opensearch.read.relevance_side",
    "stores.opensearch.both_sides": "stores.opensearch.read.both_sides",
    "stores.opensearch.named_clauses": "stores.opensearch.read.named_clauses",
    "stores.opensearch.scope_size": "stores.opensearch.read.scope_size",
    "stores.opensearch.agent_scopes": "stores.opensearch.read.agent_scopes",
    "stores.opensearch.bulk": "stores.opensearch.write.bulk",
    "stores.opensearch.sender": "stores.opensearch.write.sender",
    "stores.opensearch.session": "stores.opensearch.write.session",
    "stores.opensearch.serverless": "stores.opensearch.write.serverless",
    "stores.opensearch.records": "stores.opensearch.write.records",
    "stores.opensearch.chunk_records": "stores.opensearch.write.chunk_records",
    "stores.opensearch.generations": "stores.opensearch.write.generations",
    "stores.opensearch.synonym_records": "stores.opensearch.write.synonym_records",
    # the agent's tools and result lists, named for what they are (search itself runs in
    # service/ -> stores/)
    "search": "agent_tools",
}

SUFFIXES = {".sh", ".py", ".pyi", ".md", ".toml", ".yaml", ".yml", ".txt", ".cfg", ".ini", ".json"}
NAMES = {"Makefile", "run"}
SKIP_DIRS = {
    "results",
    ".git",
    ".venv",
    ".venv-sam",
    ".venv-bench",
    "node_modules",
    "__pycache__",
    ".aws-sam",
}
SKIP_FILES = {
    Path(__file__).resolve(),
    ROOT / "bench" / "REPORT.md",
    ROOT / "tools" / "mutation" / "equivalent.json",  # keyed by a measured run's module names
    ROOT / "tests" / "unit" / "project" / "test_rewrite_imports.py",  # old paths as test data
}

_ID = r"[A-Za-z0-9_]"


def _dotted(old: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9_.])knowledge\.{re.escape(old)}(?!{_ID})")


def _path(old: str) -> re.Pattern[str]:
    tail = old.replace(".", "/")
    return re.compile(rf"(?<!{_ID})knowledge/{re.escape(tail)}(?=\.py\b|/)")


# Longest first, so ``stores.opensearch.config`` is rewritten before anything shorter.
_ORDER = sorted(MOVES, key=len, reverse=True)
_DOTTED = [(_dotted(old), "knowledge." + MOVES[old]) for old in _ORDER]
_PATHS = [(_path(old), "knowledge/" + MOVES[old].replace(".", "/")) for old in _ORDER]
# ``from knowledge import text`` / ``from knowledge.stores.opensearch import config``
_FROM = re.compile(
    r"^(?P<indent>[ \t]*)from knowledge(?P<parent>(?:\.[A-Za-z_]+)*) import "
    r"(?P<name>[A-Za-z_]+)(?P<alias> as [A-Za-z_]+)?(?P<rest>[ \t]*(?:#.*)?)$",
    re.MULTILINE,
)


def _from_form(match: re.Match[str]) -> str:
    parent = match["parent"].lstrip(".")
    old = f"{parent}.{match['name']}" if parent else match["name"]
    new = MOVES.get(old)
    if new is None:
        return match[0]
    new_parent, _, leaf = new.rpartition(".")
    alias = match["alias"] or (f" as {match['name']}" if leaf != match["name"] else "")
    return f"{match['indent']}from knowledge.{new_parent} import {leaf}{alias}{match['rest']}"


# ``from knowledge.stores.opensearch import answers, queries`` (one line or parenthesised):
# each moved name goes to an import of its new package, the others stay.
_FROM_LIST = re.compile(
    r"^(?P<indent>[ \t]*)from knowledge(?P<parent>(?:\.[A-Za-z_]+)*) import "
    r"(?:\((?P<block>[^)]*)\)|(?P<line>[A-Za-z_]\w*(?: as \w+)?(?:, *[A-Za-z_]\w*(?: as \w+)?)+))"
    r"(?P<rest>[ \t]*(?:#.*)?)$",
    re.MULTILINE,
)
_LINE_LENGTH = 100


def _import_lines(indent: str, parent: str, names: list[str], comment: str) -> list[str]:
    """One ``from`` import as ruff formats it: one line if it fits, else one name a line."""
    line = f"{indent}from {parent} import {', '.join(names)}{comment}"
    if len(line) <= _LINE_LENGTH:
        return [line]
    inner = "".join(f"{indent}    {name},\n" for name in names)
    return [f"{indent}from {parent} import ({comment}\n{inner}{indent})"]


def _from_list_form(match: re.Match[str]) -> str:
    listed = match["block"] if match["block"] is not None else match["line"]
    comments = re.findall(r"#[^\n]*", listed)
    names = [n.strip() for n in re.sub(r"#[^\n]*", "", listed).split(",") if n.strip()]
    parent = match["parent"].lstrip(".")
    groups: dict[str, list[str]] = {}
    for entry in names:
        name, _, alias = entry.partition(" as ")
        old = f"{parent}.{name}" if parent else name
        new = MOVES.get(old)
        if new is None:
            groups.setdefault("knowledge" + match["parent"], []).append(entry)
            continue
        new_parent, _, leaf = new.rpartition(".")
        alias = alias or (name if leaf != name else "")
        groups.setdefault(f"knowledge.{new_parent}", []).append(
            f"{leaf} as {alias}" if alias else leaf
        )
    if list(groups) == ["knowledge" + match["parent"]]:
        return match[0]
    comment = (match["rest"] or "") + ("  " + "  ".join(comments) if comments else "")
    lines: list[str] = []
    for new_parent in sorted(groups):
        lines += _import_lines(match["indent"], new_parent, groups[new_parent], comment)
        comment = ""
    return "\n".join(lines)


def rewrite(text: str) -> str:
    text = _FROM_LIST.sub(_from_list_form, text)
    text = _FROM.sub(_from_form, text)
    for pattern, new in _DOTTED:
        text = pattern.sub(new, text)
    for pattern, new in _PATHS:
        text = pattern.sub(new, text)
    return text


def _files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    found = []
    for name in listed:
        if not name:
            continue
        path = ROOT / name
        if any(part in SKIP_DIRS for part in path.parts) or path.resolve() in SKIP_FILES:
            continue
        if (path.suffix in SUFFIXES or path.name in NAMES) and path.is_file():
            found.append(path)
    return found


def move() -> None:
    """``git mv`` every old module to its new place, creating the sub-packages."""
    for old in _ORDER:
        source = PACKAGE / (old.replace(".", "/") + ".py")
        if not source.exists():
            source = PACKAGE / old.replace(".", "/")
        if not source.exists():
            continue
        target = PACKAGE / MOVES[old].replace(".", "/")
        if source.suffix == ".py":
            target = target.with_suffix(".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "mv", str(source), str(target)], cwd=ROOT, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report old paths")
    parser.add_argument("--move", action="store_true", help="git mv the old modules first")
    args = parser.parse_args(argv)
    if args.move:
        move()
    stale = []
    for path in _files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite(text)
        if new != text:
            stale.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for path in stale:
        print(path.relative_to(ROOT))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
