"""The scope's synonyms file on the indexing side: checked, then stored with the scope.

An indexing run (``index``, ``reindex``: ``RunReport.take_listing_problems``), the S3
event of the file (``knowledge.aws.event_indexing``) and ``kb serve``'s watcher hand
what the source found of ``_synonyms.txt`` (``knowledge.ingest.sources.SynonymsFile``)
to ``apply_synonyms``: a file that parses (``knowledge.ranking.synonym_expansion.parse_synonyms``)
replaces the scope's synonyms (``WriteSession.put_synonyms``), a missing file removes
them, and a bad one (a syntax error, too big, too many rules, unreadable) is a problem
recorded under ``SYNONYMS_FILE`` in the scope's status while the last good set stays in
force. Searches never read the file: each store keeps the checked text.
"""

from __future__ import annotations

from knowledge.core.model import FileProblem
from knowledge.core.source import SYNONYMS_FILE
from knowledge.ingest.sources import SynonymsFile
from knowledge.ranking.synonym_expansion import SynonymsError, parse_synonyms
from knowledge.stores.protocol import WriteSession

__all__ = ["apply_synonyms", "synonyms_problem"]


def synonyms_problem(found: SynonymsFile) -> tuple[str | None, FileProblem | None]:
    """``(text to store, problem)``: the file's checked text (``None``: no file), or the
    problem that keeps the last good set."""
    if found.error is not None:
        return None, _problem(found.error)
    if found.data is None:
        return None, None
    try:
        parse_synonyms(found.data)
    except SynonymsError as exc:
        return None, _problem(str(exc))
    return found.data.decode("utf-8-sig"), None


def _problem(reason: str) -> FileProblem:
    return FileProblem(
        SYNONYMS_FILE, f"synonyms file not used: {reason}; the last good set stays in force"
    )


def apply_synonyms(session: WriteSession, found: SynonymsFile) -> FileProblem | None:
    """Store the scope's synonyms as ``found`` says (module docstring); the problem
    recorded, if any."""
    text, problem = synonyms_problem(found)
    if problem is not None:
        session.record_problem(problem.path, problem.reason)
        return problem
    session.put_synonyms(text)
    return None
