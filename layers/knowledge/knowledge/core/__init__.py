"""The core every layer shares: scopes, identities, value objects, errors and contracts.

Nothing here knows a store, a provider or a front end: the tenant scope
(``scope``), document and chunk identities (``identity``), the query and result
value objects (``model``), the one error tree (``errors``), where a document came
from (``origin``), the source contract (``source``), the document listing
(``documents``), the search ``filter`` language (``filter_language``) and path
patterns (``path_filters``), time budgets (``deadline``), and the small AWS helpers
that any layer may call (``aws_clients``, ``secrets``).
"""
