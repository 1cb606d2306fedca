"""``kb``: index a folder, search it, show its status, or serve the HTTP API locally.

::

    kb index DIR --agent A --context C [--pattern GLOB ...] [--reindex] [--json]
    kb search "query" --agent A --context C [--mode M] [-k N] [--min-score X]
              [--offset N] [--max-chunks-per-document N] [--pattern GLOB ...]
              [--meta KEY=VALUE ...] [--filter JSON] [--cross-context] [--json]
              [--group-by document]
    kb context "query" --agent A --context C [--max-tokens N] [the search's options]
    kb status --agent A --context C [--root ROOT] [--json]
    kb documents --agent A --context C [--limit N] [--cursor C] [--json]
    kb reindex --agent A --context C [--json]
    kb put FILE --agent A --context C --api-url URL [--path P] [--note] [--meta K=V ...]
    kb rm PATH --agent A --context C --api-url URL
    kb serve ROOT [--host 127.0.0.1] [--port 8080] [--poll-interval 1.0] [--allow-writes]
             [--allow-remote-writes] [--max-writes-per-minute 120]
             [--max-write-mib-per-minute 256] [--max-documents-per-scope 10000]
             [--workers N]
    kb repo add|list|remove|sync [ROOT | --api-url URL] --agent A --context C ...
    kb mcp --agent A --context C [--cross-context] [--transport stdio|http] [--allow-reindex]
           [--shared-library CONTEXT ...]

``search``, ``context``, ``status``, ``documents``, ``reindex``, ``repo`` and ``mcp`` take
``--api-url URL`` to use a deployed stack (or another ``kb serve``) through
``knowledge.client`` instead of a local store, with ``--auth sigv4|bearer|none`` (bearer
reads the token from ``KB_API_TOKEN``).

Every command takes ``--store``, ``--db``, ``--embedder``, ``--opensearch-url`` (see
``knowledge.config`` for the environment variables and defaults) and ``--debug``.

Exit codes: 0 success; 1 the command ran but failed (a file that could not be
indexed, the backend or provider failed); 2 bad usage or configuration (including an
index built with another embedder); 130 interrupted. An error is one line on stderr,
never a traceback, unless ``--debug`` is given.

The parser is ``cli_parser``, each command's work ``cli_commands``, what they open
(stores, the API client) and the exit codes ``cli_open``; ``kb repo`` is ``repo_cli``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from knowledge.core.errors import (
    ConfigurationError,
    KnowledgeError,
    ValidationError,
)
from knowledge.local.cli_open import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from knowledge.local.cli_parser import build_parser
from knowledge.local.progress import ProgressBar

__all__ = ["ProgressBar", "build_parser", "main"]


class _NoTracebackFormatter(logging.Formatter):
    """Log lines without tracebacks: the CLI promises one line per problem."""

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info or record.exc_text or record.stack_info:
            record = logging.makeLogRecord(record.__dict__)
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return super().format(record)


@contextmanager
def _cli_logging(args: argparse.Namespace) -> Iterator[None]:
    """Send the package's logs to stderr for the duration of one command, then restore."""
    level = (
        logging.DEBUG
        if args.debug
        else logging.INFO
        if args.command == "serve"
        else logging.WARNING
    )
    handler = logging.StreamHandler(sys.stderr)
    fmt = "%(asctime)s %(levelname)s %(message)s"
    handler.setFormatter(logging.Formatter(fmt) if args.debug else _NoTracebackFormatter(fmt))
    package = logging.getLogger("knowledge")
    saved = (package.handlers[:], package.level, package.propagate)
    package.handlers = [handler]
    package.setLevel(level)
    package.propagate = False
    try:
        yield
    finally:
        package.handlers, package.propagate = saved[0], saved[2]
        package.setLevel(saved[1])


def _silence_stdout() -> None:
    # Python would report the broken pipe again when it flushes stdout at exit.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _fail(message: str, code: int) -> int:
    print(f"kb: error: {message}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kb`` with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    args = build_parser().parse_args(argv)
    try:
        with _cli_logging(args):
            code: int = args.handler(args)
    except KeyboardInterrupt:
        print("kb: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`kb search ... | head`): not an error worth a message.
        _silence_stdout()
        return EXIT_FAILED
    except Exception as exc:
        if args.debug:
            raise
        if isinstance(exc, ValidationError):
            return _fail(str(exc), EXIT_USAGE)
        if isinstance(exc, ConfigurationError):  # EmbeddingMismatchError too
            return _fail(str(exc), EXIT_USAGE)
        if isinstance(exc, KnowledgeError):
            return _fail(str(exc), EXIT_FAILED)
        if isinstance(exc, OSError):
            where = f": {exc.filename}" if exc.filename else ""
            return _fail(f"{exc.strerror or exc}{where}", EXIT_FAILED)
        return _fail(
            f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)",
            EXIT_FAILED,
        )
    return code


if __name__ == "__main__":  # `python -m knowledge.local.cli ...`, as MCP client configs may run it
    sys.exit(main())
