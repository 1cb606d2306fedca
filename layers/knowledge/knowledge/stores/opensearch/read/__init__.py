"""What reads the OpenSearch store: searches, their request bodies and the readers of
their answers, listings, scope facts. Never imports ``write`` (import-linter contract);
both sides send through ``connection`` and share the package's ``mapping``,
``request_filters`` and ``hits``."""
