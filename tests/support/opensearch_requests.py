"""What the OpenSearch request tests share: the scope they build bodies for, its term
filters, and the ``_source`` a full hit reads."""

from __future__ import annotations

from knowledge.core.scope import KnowledgeScope

SCOPE = KnowledgeScope("ops-bot", "runbooks")

SOURCE = {
    "includes": [
        "agent",
        "context",
        "document_path",
        "chunk_index",
        "content",
        "metadata",
        "document_id",
        "generation",
    ]
}

AGENT_TERM = {"term": {"agent": "ops-bot"}}

CONTEXT_TERM = {"term": {"context": "runbooks"}}
