"""Synonyms (issue 29, part 4): the Solr-format parser, its bounds, query expansion, and
the file's place at the edges (never a document, never written through the API)."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.model import IndexOptions
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SYNONYMS_FILE, is_document_path
from knowledge.ingest.api_writes import check_write_path
from knowledge.ingest.sources import SynonymsFile
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.ingest.synonyms_file import synonyms_problem
from knowledge.ranking.synonym_expansion import (
    MAX_EXPANDED_TERMS,
    MAX_SYNONYM_RULES,
    MAX_SYNONYMS_BYTES,
    MAX_SYNONYMS_PER_RULE,
    MAX_TERMS_PER_SYNONYM,
    SYNONYM_WEIGHT,
    SynonymsError,
    compiled,
    expand,
    parse_synonyms,
)


def added(text: str, rules: str) -> tuple[str, ...]:
    return expand(text, parse_synonyms(rules)).expanded


def test_an_equivalence_line_expands_every_way_and_a_mapping_one_way() -> None:
    rules = "k8s, kubernetes, kube\ndb => database\n"
    assert added("k8s", rules) == ("kubernet", "kube")
    assert added("kube", rules) == ("k8s", "kubernet")
    assert added("DB", rules) == ("databas",)
    assert added("databases", rules) == ()  # one way


def test_terms_go_through_the_query_analysis() -> None:
    # Stems, stop words, Korean morphemes: the rule matches what the query becomes.
    assert added("Configuring Databases", "database, datastore") == ("datastor",)
    assert added("배포했다", "배포, 디플로이") == ("디", "플로")
    assert added("디플로이는", "배포, 디플로이") == ("배포",)


def test_a_multi_word_synonym_matches_the_same_words_in_order() -> None:
    rules = "dns, domain name system"
    assert added("dns", rules) == ("domain", "name", "system")
    assert added("the domain name system", rules) == ("dns",)
    assert added("system name domain", rules) == ()  # not in order
    assert added("domain names", rules) == ()  # not all of it


def test_typed_terms_weigh_one_added_terms_the_synonym_weight() -> None:
    terms = expand("k8s kubernetes pods", parse_synonyms("k8s, kubernetes\npod, container"))
    assert terms.typed == ("k8s", "kubernet", "pod")
    assert terms.expanded == ("contain",)  # kubernetes was typed: it stays 1.0
    assert terms.weights == {"k8s": 1.0, "kubernet": 1.0, "pod": 1.0, "contain": SYNONYM_WEIGHT}
    assert SYNONYM_WEIGHT < 1.0


def test_comments_blank_lines_and_escapes() -> None:
    rules = "# a comment\n\n   # another\nfoo\\, inc, acme\n"
    assert added("acme", rules) == ("foo", "inc")
    assert parse_synonyms(rules).lines == 1
    assert not parse_synonyms("# nothing\n")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a1 => b1 => c1", "'=>' more than once"),
        ("alpha, , beta", "an empty synonym"),
        ("alpha =>", "an empty synonym"),
        ("=> beta", "an empty synonym"),
        ("k8s, the", "no searchable terms"),
        (", ".join(f"w{n}x" for n in range(MAX_SYNONYMS_PER_RULE + 1)), "at most 32"),
        ("dns, " + " ".join(f"w{n}x" for n in range(MAX_TERMS_PER_SYNONYM + 1)), "at most 8"),
        ("\n".join(f"w{n}x, v{n}x" for n in range(MAX_SYNONYM_RULES + 1)), "more than 10000"),
    ],
)
def test_a_bad_file_is_an_error_naming_the_line(text: str, says: str) -> None:
    with pytest.raises(SynonymsError, match=says):
        parse_synonyms(text.encode("utf-8"))


def test_too_big_or_not_utf8_is_an_error() -> None:
    with pytest.raises(SynonymsError, match=f"at most {MAX_SYNONYMS_BYTES}"):
        parse_synonyms(b"a, b\n" * (MAX_SYNONYMS_BYTES // 5 + 1))
    with pytest.raises(SynonymsError, match="not UTF-8"):
        parse_synonyms(b"caf\xe9, coffee")


def test_a_query_adds_a_bounded_number_of_terms() -> None:
    rules = "hub => " + ", ".join(f"w{n}x" for n in range(30)) + "\n"
    rules += "spoke => " + ", ".join(f"v{n}x" for n in range(30)) + "\n"
    rules += "rim => " + ", ".join(f"u{n}x" for n in range(30)) + "\n"
    assert len(added("hub spoke rim", rules)) == MAX_EXPANDED_TERMS


def test_a_stored_text_that_no_longer_parses_is_no_synonyms_not_an_error() -> None:
    assert not compiled("a => b => c")
    assert not compiled(None)
    assert expand("k8s", compiled("a => b => c")).expanded == ()


def test_the_problem_of_a_bad_file_says_the_last_good_set_stays() -> None:
    text, problem = synonyms_problem(SynonymsFile(b"a => b => c"))
    assert text is None
    assert problem is not None
    assert problem.path == SYNONYMS_FILE
    assert "'=>' more than once" in problem.reason
    assert "the last good set stays in force" in problem.reason
    assert synonyms_problem(SynonymsFile(b"\xef\xbb\xbfk8s, kubernetes\n")) == (
        "k8s, kubernetes\n",
        None,
    )
    assert synonyms_problem(SynonymsFile()) == (None, None)


def test_the_file_is_never_a_document_and_a_listing_reads_it(tmp_path: Path) -> None:
    assert not is_document_path(SYNONYMS_FILE, ("*.txt",))
    assert is_document_path("notes/_synonyms.txt", ("*.txt",))  # only the scope's root
    scope = KnowledgeScope("a", "c")
    folder = tmp_path / "a" / "c"
    folder.mkdir(parents=True)
    (folder / SYNONYMS_FILE).write_text("k8s, kubernetes\n")
    (folder / "doc.txt").write_text("k8s")
    listing = BucketFolderSource(tmp_path).documents(scope, IndexOptions())
    assert [d.path for d in listing] == ["doc.txt"]
    assert getattr(listing, "synonyms", None) == SynonymsFile(b"k8s, kubernetes\n")
    assert getattr(listing, "unread", None) == {}  # not counted as an unread file either


def test_a_write_route_refuses_the_name_and_says_what_it_is() -> None:
    with pytest.raises(ValidationError) as caught:
        check_write_path(SYNONYMS_FILE)
    assert caught.value.field == "path"
    assert "synonyms file" in caught.value.message
    assert check_write_path("notes/_synonyms.txt") == "notes/_synonyms.txt"


def test_per_agent_keyword_tables_expand_the_same(tmp_path: Path) -> None:
    """With ``isolation="agent"`` each agent has its own FTS table (the contract runs the
    shared one): the expanded query is a second MATCH of each, summed per chunk."""
    from knowledge.core.model import SearchMode, SearchQuery
    from knowledge.ingest.pipeline import index_source
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    store = EmbeddedKnowledgeStore(tmp_path / "kb.db", isolation="agent")
    try:
        for agent in ("a", "b"):
            folder = tmp_path / "bucket" / agent / "c"
            folder.mkdir(parents=True)
            (folder / "one.txt").write_text("Notes: k8s rollout plan.")
            (folder / "two.txt").write_text("Notes: kubernetes rollout plan.")
            for n in range(6):
                (folder / f"filler-{n}.txt").write_text(f"Lunch menu {n}: soup and tea.")
        (tmp_path / "bucket" / "a" / "c" / SYNONYMS_FILE).write_text("k8s, kubernetes\n")
        source = BucketFolderSource(tmp_path / "bucket")
        for agent in ("a", "b"):
            index_source(store, KnowledgeScope(agent, "c"), source, IndexOptions())
        query = SearchQuery("k8s", mode=SearchMode.KEYWORD, min_score=0.0)
        found = store.search(KnowledgeScope("a", "c"), query)
        assert [(r.document_path, r.rank_score) for r in found] == [
            ("one.txt", 1.0),
            ("two.txt", 0.5),
        ]
        # The added term is weaker evidence on the absolute scale too.
        assert found[0].score > found[1].score
        assert [r.document_path for r in store.search(KnowledgeScope("b", "c"), query)] == [
            "one.txt"
        ]
    finally:
        store.close()
