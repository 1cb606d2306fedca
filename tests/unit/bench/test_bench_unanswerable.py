"""bench.corpora.unanswerable's split of sets and questions: fit, candidate and report sets
are apart, no off-domain question is both fitted and reported, and every set's in-domain
near-misses name their key terms."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.corpora.unanswerable import (
    CANDIDATE_SETS,
    FIT_SETS,
    OFF_DOMAIN_FILE,
    REPORT_SETS,
    SETS,
    load_domain,
    load_off_domain,
)


def test_every_set_is_fit_candidate_or_report_and_only_one_of_them() -> None:
    groups = (set(FIT_SETS), set(CANDIDATE_SETS), set(REPORT_SETS))
    assert sum(len(group) for group in groups) == len(SETS) == len(set(SETS))
    assert set().union(*groups) == set(SETS)


@pytest.mark.parametrize("language", ["en", "ko"])
def test_the_off_domain_halves_are_apart_and_share_the_hard_questions(language: str) -> None:
    fit = load_off_domain(language, "fit")
    report = load_off_domain(language, "report")
    written = json.loads(OFF_DOMAIN_FILE.read_text(encoding="utf-8"))[language]
    assert not {q.text for q in fit} & {q.text for q in report}
    assert len(fit) + len(report) == len(written)
    assert abs(sum(q.shares_words for q in fit) - sum(q.shares_words for q in report)) <= 1


def test_every_set_has_in_domain_near_misses_with_key_terms() -> None:
    domain = json.loads(OFF_DOMAIN_FILE.read_text(encoding="utf-8"))["domain"]
    assert set(domain) == set(SETS)
    for name in SETS:
        questions = load_domain(name)
        assert len(questions) >= 40, name
        assert all(q.key_terms for q in questions), name
        assert len({q.text for q in questions}) == len(questions), name
