"""The bench's view of the node's time and of the relevance report's runs.

``bench.common.recording_client.RecordingClient`` counts the node's own ``took`` of every answer,
an ``_msearch`` answer trimmed to its ``responses`` (the store's ``filter_path``) too;
``bench.report.relevance`` tells the runs whose embedder cannot read the set's language
(the product answers them from the keyword side) from the others.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from bench.common.recording_client import RecordingClient  # noqa: E402
from bench.report.relevance import _dropped_text, _reads  # noqa: E402


class _Answers:
    """A client that answers every ``_msearch`` with one fixed answer."""

    indices = None

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer

    def msearch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self.answer


def test_a_trimmed_msearch_answer_counts_its_longest_search() -> None:
    probe = RecordingClient(_Answers({"responses": [{"took": 3}, {"took": 7}, {}]}))
    probe.msearch(body=[])
    assert (probe.last_took, probe.took_sum) == (7, 7)


def test_an_untrimmed_msearch_answer_counts_its_own_took() -> None:
    probe = RecordingClient(_Answers({"took": 9, "responses": [{"took": 3}, {"took": 7}]}))
    probe.msearch(body=[])
    probe.msearch(body=[])
    assert (probe.last_took, probe.took_sum) == (9, 18)
    empty = RecordingClient(_Answers({"responses": []}))
    empty.msearch(body=[])
    assert (empty.last_took, empty.took_sum) == (None, 0)


def _run(embedder: str, language: str) -> dict[str, Any]:
    return {"embedder": {"name": embedder}, "set": {"language": language}}


def test_the_report_knows_which_runs_the_embedder_cannot_read() -> None:
    minilm = "local:sentence-transformers/all-MiniLM-L6-v2"
    assert not _reads(_run(minilm, "ko"))
    assert _reads(_run(minilm, "en"))
    assert _reads(_run("hashing", "ko"))
    assert _reads(_run("multilingual:universal-sentence-encoder-multilingual-3", "ko"))
    assert _dropped_text([]) == ""
    text = _dropped_text([("faq-ko", "vector", 0.142, 0.487)])
    assert "faq-ko vector 0.142 -> 0.487" in text
    assert "vector_side" in text
