"""A fake Amazon Bedrock Agent Runtime ``Rerank`` endpoint on 127.0.0.1.

``boto3.client("bedrock-agent-runtime", endpoint_url=fake.url)`` talks to it as to AWS:
``POST /rerank`` with a SigV4-signed JSON body. The fake checks what AWS would check and
what the product promises to send (answering a ``ValidationException`` otherwise):

- an ``Authorization`` header signed with SigV4 for the ``bedrock`` service;
- one ``TEXT`` query with a non-empty text;
- ``INLINE`` ``TEXT`` sources with texts of 1-32,000 characters, at most 1000;
- a ``BEDROCK_RERANKING_MODEL`` configuration naming ``model_arn`` and asking for
  ``numberOfResults`` = every source.

It answers ``{"results": [{"index", "relevanceScore"}...]}`` sorted by score, scores from
``score_of(query, text)`` (default: the share of the query's words found in the text).
``fail_with`` (an HTTP status and error type) answers every call with that error;
``hold`` (an ``Event``) keeps every answer back until it is set, so a test can be sure
the client gave up first; ``drop_last`` leaves the last result out. Every request body
is kept in ``requests``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from json_http import JsonHandler, serving

__all__ = ["FakeRerankServer", "fake_rerank_server", "word_overlap"]

_SIGV4 = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=[^/]+/\d{8}/[a-z0-9-]+/bedrock/aws4_request, "
    r"SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$"
)


def word_overlap(query: str, text: str) -> float:
    """The share of the query's distinct words that occur in ``text`` (case-blind)."""
    words = set(re.findall(r"\w+", query.lower()))
    found = set(re.findall(r"\w+", text.lower()))
    return len(words & found) / len(words) if words else 0.0


@dataclass
class FakeRerankServer:
    model_arn: str
    score_of: Callable[[str, str], float] = word_overlap
    fail_with: tuple[int, str] | None = None
    hold: threading.Event | None = None
    drop_last: bool = False
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _check(self, path: str, headers: Any, body: Any) -> str | None:
        if path != "/rerank":
            return f"unknown path {path}"
        if not _SIGV4.match(headers.get("authorization", "")):
            return "the request is not SigV4-signed for bedrock"
        if not isinstance(body, dict):
            return "body is not an object"
        queries = body.get("queries")
        if not (isinstance(queries, list) and len(queries) == 1):
            return "queries must hold exactly one query"
        query = queries[0]
        if query.get("type") != "TEXT" or not query.get("textQuery", {}).get("text"):
            return "the query must be TEXT with a text"
        sources = body.get("sources")
        if not (isinstance(sources, list) and 1 <= len(sources) <= 1000):
            return "sources must hold 1-1000 items"
        for source in sources:
            inline = source.get("inlineDocumentSource", {})
            text = inline.get("textDocument", {}).get("text", "")
            if source.get("type") != "INLINE" or inline.get("type") != "TEXT":
                return "every source must be an INLINE TEXT document"
            if not 1 <= len(text) <= 32_000:
                return "a source text must have 1-32000 characters"
        config = body.get("rerankingConfiguration", {})
        bedrock = config.get("bedrockRerankingConfiguration", {})
        if config.get("type") != "BEDROCK_RERANKING_MODEL":
            return "rerankingConfiguration.type must be BEDROCK_RERANKING_MODEL"
        if bedrock.get("modelConfiguration", {}).get("modelArn") != self.model_arn:
            return f"modelArn must be {self.model_arn}"
        if bedrock.get("numberOfResults") != len(sources):
            return "numberOfResults must ask for every source"
        return None

    def handle(self, path: str, headers: Any, body: Any) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            self.requests.append(body)
        if self.hold is not None:
            self.hold.wait(timeout=60)
        problem = self._check(path, headers, body)
        if problem is not None:
            with self._lock:
                self.problems.append(problem)
            return 400, {"x-amzn-ErrorType": "ValidationException"}, {"message": problem}
        if self.fail_with is not None:
            status, error_type = self.fail_with
            return status, {"x-amzn-ErrorType": error_type}, {"message": f"fake {error_type}"}
        text = body["queries"][0]["textQuery"]["text"]
        scored = [
            {
                "index": i,
                "relevanceScore": self.score_of(
                    text, s["inlineDocumentSource"]["textDocument"]["text"]
                ),
            }
            for i, s in enumerate(body["sources"])
        ]
        scored.sort(key=lambda r: (-r["relevanceScore"], r["index"]))
        if self.drop_last:
            scored = scored[:-1]
        return 200, {}, {"results": scored}


def _handler(fake: FakeRerankServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            try:
                body: Any = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = None
            status, headers, payload = fake.handle(self.path, self.headers, body)
            self.send_json(status, payload, headers)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True


@contextmanager
def fake_rerank_server(
    model_arn: str = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0",
    **options: Any,
) -> Iterator[FakeRerankServer]:
    """Serve a ``FakeRerankServer`` on 127.0.0.1 (an ephemeral port) for the block."""
    fake = FakeRerankServer(model_arn, **options)
    with serving(_Server(("127.0.0.1", 0), _handler(fake))) as fake.url:
        try:
            yield fake
        finally:
            if fake.hold is not None:
                fake.hold.set()  # a held request must end before the server can stop


if __name__ == "__main__":  # ``python tests/support/fake_rerank.py ARN``: serve until stopped
    import sys

    with fake_rerank_server(sys.argv[1]) as running:
        print(running.url, flush=True)
        threading.Event().wait()
