"""The HTTP API, independent of any HTTP framework: one set of routes for both front ends.

``api`` validates a request, calls the store and answers a status and a JSON body;
the Lambda search function and ``kb serve`` (``knowledge.local.server``) serve it.
"""
