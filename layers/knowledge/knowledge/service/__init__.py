"""The HTTP API, independent of any HTTP framework: one set of routes for both front ends.

``routes`` declares every route once (method, path, the permission a caller needs, the
handler into the API); ``validation`` checks bodies, path segments and query strings;
``responses`` turns answers and errors into a status and a JSON body; ``write_quotas``
decides whether an agent's write fits its limits; ``api`` is
``KnowledgeApi``, each route's behaviour over one store, with the collaborators that
differ between the stacks (reindex, writes, status, repositories) injected; ``console``
is the knowledge console's files, settings and headers, served by both front ends. The Lambda
functions (``functions/search``, ``functions/repos``) and ``kb serve``
(``knowledge.local.server``) register from the same table.
"""
