"""The Lambda glue: settings from the environment, S3 events, SQS batches, access checks.

Used only by ``functions/``: the functions' settings (``settings``), who may call which
agent (``access``), document events from S3 notifications (``events``) applied to a
store (``event_indexing``), the dispatcher's routing of those events to the express or
the bulk work queue, so one tenant cannot hold up the others (``dispatch``), the
indexer's SQS batches within the invocation's time (``sqs_batch``, ``invocation_time``;
both send records on through ``sqs_messages``), reindex requests expanded page by page
(``reindex_queue``), the write routes as S3 puts and deletes (``bucket_writes``), each
agent's write counts in DynamoDB (``write_quotas``), and the remote MCP endpoint
(``mcp_endpoint``: the tools of ``kb mcp`` over MCP's streamable HTTP behind API
Gateway, through ``asgi``, one API Gateway event as one ASGI request), and the knowledge
console's pages on the HTTP API (``console_site``).
"""
