"""A loopback stand-in for S3's browser-based POST upload that enforces its policy.

moto's S3 (``mock_aws`` and ``moto.server.ThreadedMotoServer`` alike) accepts any POST
form: checked on moto 5.2, an upload with another key, a larger body or after the
policy's expiry is stored all the same. S3 itself refuses those, so the tests check the
presigned POST the write API hands out against what S3 enforces, here: the SigV4
signature of the policy (the secret key the test signs with), its ``expiration``, every
condition (``{"field": value}``, ``["eq"|"starts-with", "$field", value]``,
``["content-length-range", min, max]``), and that every form field is named by one.
"""

from __future__ import annotations

import base64
import datetime as dt
import email.parser
import email.policy
import hashlib
import hmac
import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_UNCHECKED = {"policy", "x-amz-signature", "file"}


def _signing_key(secret: str, date: str, region: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (date, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def check_post(
    fields: dict[str, str], size: int, secret: str, now: dt.datetime, bucket: str
) -> str | None:
    """Why S3 would refuse this form posted to ``bucket`` (``None``: it would store it)."""
    fields = {**fields, "bucket": bucket}  # S3 takes the bucket from the URL
    policy_b64 = fields.get("policy", "")
    credential = fields.get("x-amz-credential", "").split("/")
    if len(credential) != 5:
        return "AccessDenied: no credential"
    expected = hmac.new(
        _signing_key(secret, credential[1], credential[2]), policy_b64.encode(), hashlib.sha256
    ).hexdigest()
    if not hmac.compare_digest(expected, fields.get("x-amz-signature", "")):
        return "SignatureDoesNotMatch"
    policy = json.loads(base64.b64decode(policy_b64))
    expiration = dt.datetime.fromisoformat(policy["expiration"].replace("Z", "+00:00"))
    if now >= expiration:
        return "AccessDenied: Invalid according to Policy: Policy expired."
    named: set[str] = set()
    for condition in policy["conditions"]:
        if isinstance(condition, dict):
            ((name, value),) = condition.items()
            named.add(name.lower())
            if fields.get(name) != value:
                return f"AccessDenied: Policy Condition failed: {name}"
        elif condition[0] == "content-length-range":
            if not condition[1] <= size <= condition[2]:
                return "EntityTooLarge" if size > condition[2] else "EntityTooSmall"
        else:
            operator, name, value = condition
            field = name.lstrip("$")
            named.add(field.lower())
            actual = fields.get(field, "")
            if operator == "eq" and actual != value:
                return f"AccessDenied: Policy Condition failed: {field}"
            if operator == "starts-with" and not actual.startswith(value):
                return f"AccessDenied: Policy Condition failed: {field}"
    extra = {f.lower() for f in fields} - _UNCHECKED - named - {"bucket"}
    if extra:
        return f"AccessDenied: Extra input fields: {sorted(extra)}"
    return None


@contextmanager
def post_policy_endpoint(secret: str, bucket: str) -> Iterator[tuple[str, dict[str, bytes]]]:
    """``(url, stored)``: an HTTP endpoint on 127.0.0.1 for ``bucket`` that stores a POSTed
    ``file`` under its ``key`` in ``stored`` when ``check_post`` passes (204), else 403."""
    stored: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
            message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
            fields: dict[str, str] = {}
            data = b""
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                payload: Any = part.get_payload(decode=True)
                if name == "file":
                    data = payload
                else:
                    fields[str(name)] = payload.decode()
            refused = check_post(fields, len(data), secret, dt.datetime.now(dt.UTC), bucket)
            if refused is None:
                stored[fields["key"]] = data
            self.send_response(204 if refused is None else 403)
            body = (refused or "").encode()
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", stored
    finally:
        server.shutdown()
        server.server_close()
