"""Fixtures for integration tests that need real services.

The ``opensearch_url`` session fixture is defined in ``tests/conftest.py`` so that the
contract suite shares the same node; ``opensearch_node.py`` (here) starts it.
"""
