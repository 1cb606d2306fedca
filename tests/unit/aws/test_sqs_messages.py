"""knowledge.aws.sqs_messages (pure) and the batch processor's choice of a record's queue.

The indexer consumes two queues, so a record's retries and visibility changes go to the
queue its ``eventSourceARN`` names; a ``MessageGroupId`` on a standard queue is a fair
queue's tenant, not a FIFO group.
"""

from __future__ import annotations

import base64

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from knowledge.aws.sqs_batch import TimeBudgetBatchProcessor
from knowledge.aws.sqs_messages import is_fifo_queue_arn, queue_url_from_arn, send_attributes

ACCOUNT = "123456789012"
EXPRESS_ARN = f"arn:aws:sqs:us-east-1:{ACCOUNT}:kb-DocumentExpressQueue-1AbC"
BULK_ARN = f"arn:aws:sqs:us-east-1:{ACCOUNT}:kb-DocumentBulkQueue-2DeF"


def record(arn: str) -> SQSRecord:
    return SQSRecord({"messageId": "m-1", "body": "{}", "eventSourceARN": arn})


def test_fifo_is_told_by_the_queue_name_not_by_a_message_group() -> None:
    assert is_fifo_queue_arn(f"arn:aws:sqs:us-east-1:{ACCOUNT}:events.fifo")
    assert not is_fifo_queue_arn(BULK_ARN)
    assert not is_fifo_queue_arn("")


def test_each_record_is_handled_on_its_own_queue() -> None:
    processor = TimeBudgetBatchProcessor(reserve_ms=0)
    assert processor.queue_url(record(EXPRESS_ARN)) == queue_url_from_arn(EXPRESS_ARN)
    assert processor.queue_url(record(BULK_ARN)) == queue_url_from_arn(BULK_ARN)
    assert processor.queue_url(record("not an arn")) is None


def test_a_configured_url_of_the_records_queue_is_preferred() -> None:
    bulk = f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/kb-DocumentBulkQueue-2DeF"
    vpc = f"https://vpce-0a1b.sqs.us-east-1.vpce.amazonaws.com/{ACCOUNT}/kb-DocumentBulkQueue-2DeF"
    processor = TimeBudgetBatchProcessor(reserve_ms=0, queue_urls=(vpc, None))
    assert processor.queue_url(record(BULK_ARN)) == vpc
    assert processor.queue_url(record(EXPRESS_ARN)) == queue_url_from_arn(EXPRESS_ARN)
    other_account = BULK_ARN.replace(ACCOUNT, "210987654321")
    assert processor.queue_url(record(other_account)) != vpc
    assert bulk == queue_url_from_arn(BULK_ARN)


def test_message_attributes_are_put_in_send_message_form() -> None:
    raw = {
        "origin": {"stringValue": "upload", "dataType": "String"},
        "blob": {"binaryValue": base64.b64encode(b"\x00\x01").decode(), "dataType": "Binary"},
        "empty": {"dataType": "String"},
        "broken": "not a mapping",
    }
    assert send_attributes(raw) == {
        "MessageAttributes": {
            "origin": {"DataType": "String", "StringValue": "upload"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
        }
    }
    assert send_attributes({}) == {}
    assert send_attributes(None) == {}
