"""template.yaml as data: the intake, the dispatcher and the indexer's two lanes.

Who consumes which queue with which caps, what each role may do to which queue (least
privilege, matched as IAM matches), that every dead-letter queue is alarmed, and that
the functions read the environment the template gives them. The SAM translation and the
deploy rehearsal of the same resources are in tests/integration/aws/test_deploy_rehearsal.py.
"""

from __future__ import annotations

from typing import Any

from cfn_template import Stack, allows, as_list, load_template

from knowledge.aws.dispatch import DispatchPolicy, DispatchSettings
from knowledge.aws.settings import LambdaSettings

TEMPLATE = load_template()
CREATED = {"CreateDomain": "true", "EmbeddingProvider": "hashing"}
MIB = 1024 * 1024
QUEUES = ("DocumentEventsQueue", "DocumentExpressQueue", "DocumentBulkQueue")
DEAD_LETTER_QUEUES = (
    "DocumentEventsDeadLetterQueue",
    "DocumentExpressDeadLetterQueue",
    "DocumentBulkDeadLetterQueue",
)


def arn(queue: str) -> str:
    return f"{queue}.Arn"


def sqs_events(stack: Stack) -> dict[str, dict[str, Any]]:
    """``{"<function>.<event>": properties}`` of every SQS event source."""
    found = {}
    for name, resource in stack.resources().items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        for event, spec in (resource["Properties"].get("Events") or {}).items():
            if spec["Type"] == "SQS":
                found[f"{name}.{event}"] = stack.evaluate(spec["Properties"])
    return found


def environment(stack: Stack, function: str) -> dict[str, str]:
    properties = stack.evaluate(stack.resources()[function]["Properties"])
    return {k: str(v) for k, v in properties["Environment"]["Variables"].items()}


def test_the_dispatcher_reads_the_intake_and_the_indexer_the_two_lanes() -> None:
    stack = Stack(TEMPLATE, {**CREATED, "IndexerMaxConcurrency": "8", "BulkMaxConcurrency": "3"})
    events = sqs_events(stack)
    by_queue = {props["Queue"]: name for name, props in events.items()}
    assert by_queue == {
        arn("DocumentEventsQueue"): "DispatcherFunction.DocumentEvents",
        arn("DocumentExpressQueue"): "IndexerFunction.ExpressEvents",
        arn("DocumentBulkQueue"): "IndexerFunction.BulkEvents",
        arn("RepoSyncQueue"): "RepoFunction.RepoSyncs",
    }
    dispatcher = events["DispatcherFunction.DocumentEvents"]
    assert dispatcher["BatchSize"] == "100"
    assert 1 <= dispatcher["MaximumBatchingWindowInSeconds"] <= 5
    express = events["IndexerFunction.ExpressEvents"]
    bulk = events["IndexerFunction.BulkEvents"]
    assert express["ScalingConfig"] == {"MaximumConcurrency": "8"}
    assert bulk["ScalingConfig"] == {"MaximumConcurrency": "3"}
    assert express["BatchSize"] == bulk["BatchSize"] == "10"
    for name, props in events.items():
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"], name


def test_the_defaults_keep_the_bulk_lane_smaller_than_the_express_lane() -> None:
    parameters = TEMPLATE["Parameters"]
    assert int(parameters["BulkMaxConcurrency"]["Default"]) == 2
    assert int(parameters["IndexerMaxConcurrency"]["Default"]) > 2
    assert int(parameters["DispatcherBatchSize"]["Default"]) == 100
    assert int(parameters["ExpressMaxEvents"]["Default"]) == 10
    assert int(parameters["ExpressMaxObjectMiB"]["Default"]) == 8
    for name in ("BulkMaxConcurrency", "DispatcherBatchSize", "ExpressMaxEvents"):
        assert parameters[name]["Description"].strip(), name
    groups = TEMPLATE["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
    grouped = {p for group in groups for p in group["Parameters"]}
    new = {"BulkMaxConcurrency", "DispatcherBatchSize", "ExpressMaxEvents", "ExpressMaxObjectMiB"}
    assert new <= grouped


def test_the_dispatcher_may_only_send_to_the_two_work_queues() -> None:
    statements = Stack(TEMPLATE, CREATED).statements("DispatcherFunction")
    for queue in ("DocumentExpressQueue", "DocumentBulkQueue"):
        assert allows(statements, "sqs:SendMessage", arn(queue)), queue
        assert not allows(statements, "sqs:ChangeMessageVisibility", arn(queue)), queue
        assert not allows(statements, "sqs:DeleteMessage", arn(queue)), queue
    for queue in ("DocumentEventsQueue", *DEAD_LETTER_QUEUES, "RepoSyncQueue"):
        assert not allows(statements, "sqs:SendMessage", arn(queue)), queue
    actions = {a for s in statements for a in as_list(s["Action"])}
    assert actions == {"sqs:SendMessage", "dynamodb:UpdateItem"}, "no S3, index, secret, model"
    # Its one table: the queued events of each scope (knowledge.aws.index_progress).
    table = {
        r
        for s in statements
        if "dynamodb:UpdateItem" in as_list(s["Action"])
        for r in as_list(s["Resource"])
    }
    assert table == {"IndexProgressTable.Arn"}


def test_the_indexer_sends_and_backs_off_on_the_queues_it_consumes_only() -> None:
    statements = Stack(TEMPLATE, CREATED).statements("IndexerFunction")
    for queue in ("DocumentExpressQueue", "DocumentBulkQueue"):
        # Reindex steps (bulk), records not started sent back, failed records' backoff.
        assert allows(statements, "sqs:SendMessage", arn(queue)), queue
        assert allows(statements, "sqs:ChangeMessageVisibility", arn(queue)), queue
    for queue in ("DocumentEventsQueue", *DEAD_LETTER_QUEUES):
        assert not allows(statements, "sqs:SendMessage", arn(queue)), queue
        assert not allows(statements, "sqs:ChangeMessageVisibility", arn(queue)), queue


def test_the_functions_read_the_environment_the_template_gives_them() -> None:
    stack = Stack(TEMPLATE, {**CREATED, "ExpressMaxEvents": "25", "ExpressMaxObjectMiB": "16"})
    dispatcher = DispatchSettings.from_env(environment(stack, "DispatcherFunction"))
    assert dispatcher.express_queue_url == "DocumentExpressQueue.Ref"
    assert dispatcher.bulk_queue_url == "DocumentBulkQueue.Ref"
    assert dispatcher.policy == DispatchPolicy(25, 16 * MIB)
    indexer = LambdaSettings.from_env(environment(stack, "IndexerFunction"))
    assert indexer.reindex_queue_url == "DocumentBulkQueue.Ref"
    search = LambdaSettings.from_env(environment(stack, "SearchFunction"))
    assert search.queue_url == "DocumentEventsQueue.Ref", "reindex requests enter the intake"


def test_every_queue_has_its_own_dead_letter_queue_encryption_and_an_alarm() -> None:
    stack = Stack(TEMPLATE, CREATED)
    resources = stack.resources()
    alarmed = {}
    for resource in resources.values():
        if resource["Type"] != "AWS::CloudWatch::Alarm":
            continue
        alarm = stack.evaluate(resource["Properties"])
        if alarm["Namespace"] == "AWS/SQS":
            (dimension,) = alarm["Dimensions"]
            alarmed[dimension["Value"]] = alarm
    for queue, dead_letter in zip(QUEUES, DEAD_LETTER_QUEUES, strict=True):
        properties = stack.evaluate(resources[queue]["Properties"])
        assert properties["SqsManagedSseEnabled"] is True, queue
        assert stack.evaluate(resources[dead_letter]["Properties"])["SqsManagedSseEnabled"]
        assert properties["RedrivePolicy"] == {
            "deadLetterTargetArn": arn(dead_letter),
            "maxReceiveCount": TEMPLATE["Parameters"]["MaxReceiveCount"]["Default"],
        }, queue
        alarm = alarmed[f"{dead_letter}.QueueName"]
        assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
        assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
        assert alarm["AlarmActions"] == ["AlarmTopic.Ref"], dead_letter


def test_each_queue_hides_a_batch_for_six_times_its_consumers_timeout() -> None:
    """AWS guidance for an SQS event source: the visibility timeout is at least six times
    the function's timeout, so a batch still being processed is not delivered again."""
    stack = Stack(TEMPLATE, CREATED)
    resources = stack.resources()
    default_timeout = TEMPLATE["Globals"]["Function"]["Timeout"]
    for name, props in sqs_events(stack).items():
        function = name.split(".", 1)[0]
        timeout = resources[function]["Properties"].get("Timeout", default_timeout)
        queue = props["Queue"].removesuffix(".Arn")
        visibility = stack.evaluate(resources[queue]["Properties"])["VisibilityTimeout"]
        assert visibility >= 6 * timeout, name
    # The intake now only waits for the dispatcher: a record it failed to forward comes
    # back in minutes, not the indexer's half hour.
    intake = stack.evaluate(resources["DocumentEventsQueue"]["Properties"])
    assert intake["VisibilityTimeout"] <= 300
    # The bulk lane is throttled on purpose: its backlog is kept as long as SQS can.
    bulk = stack.evaluate(resources["DocumentBulkQueue"]["Properties"])
    assert bulk["MessageRetentionPeriod"] == 1_209_600
