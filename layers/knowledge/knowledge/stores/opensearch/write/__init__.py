"""What writes the OpenSearch store: the write session, the records and ``_bulk`` actions
it sends, the generation protocol, the background sender. Never imports ``read``
(import-linter contract); both sides send through ``connection`` and share the
package's ``mapping``, ``request_filters`` and ``hits``."""
