"""What a record of Lambda's SQS event says about its message, for sending it on or back.

Pure, no I/O and no SDK: the dispatcher (``knowledge.aws.dispatch``) forwards intake
records to a work queue, and the indexer's batch processor (``knowledge.aws.sqs_batch``)
changes the visibility of failed records and sends unstarted ones back. Both act on the
queue a record came from, or copy what it carried:

- ``queue_url_from_arn``: a record names its queue by ARN (``eventSourceARN``); the SQS
  API takes a URL. The indexer consumes two queues, so the URL is the record's own,
  never one configured for the function.
- ``is_fifo_queue_arn``: a FIFO queue's name ends in ``.fifo`` (SQS requires it). A
  ``MessageGroupId`` alone does not make a queue FIFO: on a standard queue it names the
  message's tenant (a fair queue), and such a message may be sent again freely.
- ``send_attributes``: the message attributes of a record (Lambda's lower-case form)
  in ``SendMessage``'s form, so a message sent on keeps them.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

__all__ = ["is_fifo_queue_arn", "queue_url_from_arn", "send_attributes"]


def queue_url_from_arn(arn: str) -> str | None:
    """``https://sqs.<region>.<domain>/<account>/<name>`` for an SQS queue ARN, or ``None``."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs":
        return None
    partition, region, account, name = parts[1], parts[3], parts[4], parts[5]
    domain = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
    return f"https://sqs.{region}.{domain}/{account}/{name}"


def is_fifo_queue_arn(arn: str) -> bool:
    """True if the ARN names a FIFO queue (its name ends in ``.fifo``)."""
    return arn.rsplit(":", 1)[-1].endswith(".fifo")


def send_attributes(raw: object) -> dict[str, Any]:
    """``{"MessageAttributes": ...}`` for a record's ``messageAttributes`` (as Lambda hands
    them: ``stringValue``/``binaryValue`` base64, ``dataType``), to unpack into a
    ``SendMessage`` call or a ``SendMessageBatch`` entry; ``{}`` when there are none."""
    attributes: dict[str, Any] = {}
    if not isinstance(raw, Mapping):
        return attributes
    for name, value in raw.items():
        if not isinstance(value, Mapping) or not value.get("dataType"):
            continue
        sent: dict[str, Any] = {"DataType": value["dataType"]}
        if value.get("stringValue") is not None:
            sent["StringValue"] = value["stringValue"]
        elif value.get("binaryValue") is not None:
            sent["BinaryValue"] = base64.b64decode(value["binaryValue"])
        else:
            continue
        attributes[name] = sent
    return {"MessageAttributes": attributes} if attributes else {}
