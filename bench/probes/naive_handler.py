"""The baseline of the cold-start benchmark: the search function written naively.

It imports every SDK the function may ever need at the top (boto3, openai, opensearch-py
and Powertools), as handlers are often written, and then serves the real search function
(``functions/search/app.py``, imported as ``app``: put ``functions/search`` on
``sys.path``), so that a first request does the same work in both and only the imports
differ. Benchmark code only.
"""

from __future__ import annotations

import boto3  # noqa: F401 - imported for its cost, which is what is measured
import openai  # noqa: F401
import opensearchpy  # noqa: F401
from app import lambda_handler  # functions/search/app.py
from aws_lambda_powertools import Logger, Metrics  # noqa: F401
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver  # noqa: F401

__all__ = ["lambda_handler"]
