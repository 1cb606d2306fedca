"""The Lambda glue: settings from the environment, S3 events, SQS batches, access checks.

Used only by ``functions/``: the functions' settings (``settings``), who may call which
agent (``access``), document events from S3 notifications (``events``) applied to a
store (``event_indexing``), the indexer's SQS batches within the invocation's time
(``sqs_batch``, ``invocation_time``), reindex requests expanded page by page
(``reindex_queue``) and the write routes as S3 puts and deletes (``writes``).
"""
