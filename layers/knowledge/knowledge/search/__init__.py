"""What an agent reads: result lists, the shared library and the ``KnowledgeSearch`` tool.

``results`` merges adjacent chunks and cuts a list to a token budget, ``shared``
adds the granted shared-library scopes to a search, ``tool`` is the tool an LLM
agent calls.
"""
