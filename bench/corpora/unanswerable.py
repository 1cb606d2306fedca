"""Abstention sets: questions the indexed documents answer, and questions they do not.

Built from each known-item corpus of the benchmarks (man pages, the Debian FAQ in English
and Korean, the Python FAQ, the Korean GIMP, GNOME and GNOME applications' help). For one
corpus:

- its documents are split by a hash of their relative path (SHA-256, no random state):
  **indexed** (about 2/3) and **held out** (about 1/3). The indexed ones are copied into
  ``bench/data/abstention/<set>/docs/``, the folder a run indexes;
- **answerable** questions are the corpus's queries whose relevant documents are all
  indexed (relevant: those documents);
- **near** (near-miss unanswerable) questions are the corpus's queries whose relevant
  documents are all held out: the domain's words, but their answer is not indexed;
- **off** (off-domain unanswerable) questions are the hand-written lists of
  ``bench/corpora/abstention_questions.json`` (``en`` for the English sets, ``ko`` for the
  Korean ones): cooking, geography, history, sport, medicine, law, money, gardening,
  music, travel, cars, pets, astronomy. About a third of them (``shares_words``) share
  generic words with software documentation ("how do I change the oil filter of my
  car", "천장 선풍기는 어떻게 설치하나요") while asking about something else.
- **domain** (in-domain near-miss unanswerable) questions are the set's hand-written list
  of ``bench/corpora/abstention_questions.json`` (``domain`` → the set's name): what a user of
  that documentation could ask, in its vocabulary (product names, technical words),
  about a feature, tool, platform or task it never covers ("how do I pair a Bluetooth
  headset from the command line", "김프에서 동영상 타임라인 편집은 어떻게 하나요").
  Each names its ``key_terms``, none of which occurs in the set's corpus
  (``domain_term_hits`` checks them against the indexed documents; ``python -m
  bench.corpora.unanswerable`` prints the hits).
  All of a set's domain questions are in it (each set is either fit or report).

The sets either fit a calibration (``FIT_SETS``) or report it (``REPORT_SETS``: never
fitted on); ``CANDIDATE_SETS`` are fit sets the shipped calibration is not fitted on yet
(none now: the Python FAQ, English questions in the asker's own words where the man
pages' are terse NAME lines, was fitted on with the query's script as a calibration
input, docs/ranking.md). Each off-domain list is split in two halves (alternate
questions of each kind, so both halves have as many ``shares_words`` questions), the
first for the fit and candidate sets and the second for the report sets, so no question
is both fitted and reported. Answerable and
near questions are capped at ``MAX_QUESTIONS`` each (an even sample, in corpus order).

``python -m bench.corpora.unanswerable`` builds every set and prints its counts (and any key term
of a domain question found in its indexed documents).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from bench.common.environment import BENCH_DIR, DATA_DIR, log
from bench.corpora.faq import load_faq
from bench.corpora.gimp_help import load_gimp_help
from bench.corpora.gnome_apps_help import load_gnome_apps_help
from bench.corpora.gnome_help import load_gnome_help
from bench.corpora.manpages import Corpus, load_corpus
from bench.corpora.python_faq import load_python_faq

__all__ = [
    "ABSTENTION_DIR",
    "CANDIDATE_SETS",
    "FIT_SETS",
    "MAX_QUESTIONS",
    "OFF_DOMAIN_FILE",
    "REPORT_SETS",
    "SETS",
    "AbstentionSet",
    "Question",
    "domain_term_hits",
    "even_sample",
    "is_indexed",
    "load_domain",
    "load_off_domain",
    "load_set",
]

ABSTENTION_DIR = DATA_DIR / "abstention"
OFF_DOMAIN_FILE = Path(__file__).resolve().parent / "abstention_questions.json"
MAX_QUESTIONS = 200
"""At most this many answerable, and this many near, questions per set."""
DEFAULT_MANPAGES_LIMIT = 300

FIT_SETS = ("manpages", "python-faq", "faq-ko", "gimp-help-ko")
REPORT_SETS = ("faq-en", "gnome-help-ko", "gnome-apps-help-ko")
CANDIDATE_SETS: tuple[str, ...] = ()
"""Fit sets not yet fitted on: built with the fit sets' half of the off-domain questions and
recorded by ``python -m bench relevance``, but not in the shipped calibration (moving one
into ``FIT_SETS`` and running ``python -m bench relevance-fit`` makes it a fit set)."""
SETS = FIT_SETS + REPORT_SETS + CANDIDATE_SETS

T = TypeVar("T")
Kind = Literal["answerable", "near", "off", "domain"]
Role = Literal["fit", "report"]


@dataclass(frozen=True, slots=True)
class Question:
    """One question of a set: ``relevant`` is empty for an unanswerable one (for a near
    one, ``held_out`` names the documents that would have answered it; for a domain one,
    ``key_terms`` its distinctive terms, absent from the corpus)."""

    text: str
    kind: Kind
    relevant: tuple[str, ...] = ()
    held_out: tuple[str, ...] = ()
    shares_words: bool = False
    key_terms: tuple[str, ...] = ()

    @property
    def answerable(self) -> bool:
        return self.kind == "answerable"

    def to_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = {"text": self.text, "kind": self.kind}
        if self.kind == "answerable":
            record["relevant"] = list(self.relevant)
        elif self.kind == "near":
            record["held_out"] = list(self.held_out)
        elif self.kind == "domain":
            record["key_terms"] = list(self.key_terms)
        else:
            record["shares_words"] = self.shares_words
        return record


@dataclass(frozen=True, slots=True)
class AbstentionSet:
    """A corpus split into indexed and held-out documents, with its four kinds of
    questions (module docstring)."""

    name: str
    language: str
    role: Role
    corpus: str
    docs_dir: Path
    indexed: tuple[str, ...]
    held_out: tuple[str, ...]
    questions: tuple[Question, ...]
    corpus_queries: int
    mixed_queries: int
    """Corpus queries with relevant documents on both sides of the split (not used)."""

    def of_kind(self, kind: Kind) -> tuple[Question, ...]:
        return tuple(q for q in self.questions if q.kind == kind)

    def counts(self) -> dict[str, int]:
        return {
            "indexed_documents": len(self.indexed),
            "held_out_documents": len(self.held_out),
            "answerable": len(self.of_kind("answerable")),
            "near": len(self.of_kind("near")),
            "off": len(self.of_kind("off")),
            "off_shares_words": sum(q.shares_words for q in self.of_kind("off")),
            "domain": len(self.of_kind("domain")),
        }

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "language": self.language,
            "role": self.role,
            "corpus": self.corpus,
            "docs_dir": _shown(self.docs_dir),
            "split": "sha256(relative path) % 3 != 0: indexed; == 0: held out",
            "max_questions": MAX_QUESTIONS,
            "corpus_queries": self.corpus_queries,
            "mixed_queries": self.mixed_queries,
            **self.counts(),
        }


def _shown(path: Path) -> str:
    try:
        return path.relative_to(BENCH_DIR.parent).as_posix()
    except ValueError:
        return str(path)


def is_indexed(relative_path: str) -> bool:
    """The split: a document is held out when the SHA-256 of its relative path (POSIX,
    UTF-8) is 0 modulo 3, indexed otherwise (about 2/3)."""
    digest = hashlib.sha256(relative_path.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % 3 != 0


def even_sample(items: Sequence[T], cap: int) -> list[T]:
    """At most ``cap`` of ``items``, evenly spread over them, in their order."""
    if len(items) <= cap:
        return list(items)
    return [items[i * len(items) // cap] for i in range(cap)]


def load_off_domain(language: str, role: Role) -> list[Question]:
    """The half of the ``language`` off-domain list that goes with ``role`` sets: of each
    kind (``shares_words`` or not), the questions at even positions fit, the odd ones
    report."""
    data = json.loads(OFF_DOMAIN_FILE.read_text(encoding="utf-8"))
    items: list[dict[str, Any]] = data[language]
    wanted = 0 if role == "fit" else 1
    questions: list[Question] = []
    for shares in (False, True):
        of_kind = [item for item in items if bool(item["shares_words"]) is shares]
        questions.extend(
            Question(item["text"], "off", shares_words=shares)
            for position, item in enumerate(of_kind)
            if position % 2 == wanted
        )
    return questions


def load_domain(name: str) -> list[Question]:
    """The in-domain near-miss questions of the set ``name`` (all of them), in file order."""
    data = json.loads(OFF_DOMAIN_FILE.read_text(encoding="utf-8"))
    items: list[dict[str, Any]] = data.get("domain", {}).get(name, [])
    return [
        Question(item["text"], "domain", key_terms=tuple(item.get("key_terms") or ()))
        for item in items
    ]


def _term_pattern(term: str) -> re.Pattern[str]:
    """A case-insensitive pattern of ``term``: a whole word for an ASCII term (so "awk"
    does not match "hawk"), a substring otherwise (Korean nouns take particles)."""
    if term.isascii():
        return re.compile(rf"(?<![A-Za-z0-9]){re.escape(term)}(?![A-Za-z0-9])", re.IGNORECASE)
    return re.compile(re.escape(term), re.IGNORECASE)


def domain_term_hits(abstention: AbstentionSet) -> dict[str, list[str]]:
    """The key terms of the set's domain questions that occur in its indexed documents:
    ``"<question> / <term>"`` → the documents (relative paths); empty when none does."""
    texts = {
        relative: (abstention.docs_dir / relative).read_text(encoding="utf-8", errors="replace")
        for relative in abstention.indexed
    }
    hits: dict[str, list[str]] = {}
    for question in abstention.of_kind("domain"):
        for term in question.key_terms:
            pattern = _term_pattern(term)
            found = [relative for relative, text in texts.items() if pattern.search(text)]
            if found:
                hits[f"{question.text} / {term}"] = found
    return hits


_LOADERS: dict[str, tuple[str, Callable[[int | None], Corpus]]] = {
    "manpages": ("en", load_corpus),
    "faq-en": ("en", lambda _limit: load_faq("en")),
    "faq-ko": ("ko", lambda _limit: load_faq("ko")),
    "python-faq": ("en", lambda _limit: load_python_faq()),
    "gimp-help-ko": ("ko", lambda _limit: load_gimp_help()),
    "gnome-help-ko": ("ko", lambda _limit: load_gnome_help()),
    "gnome-apps-help-ko": ("ko", lambda _limit: load_gnome_apps_help()),
}


def load_set(name: str, manpages_limit: int | None = DEFAULT_MANPAGES_LIMIT) -> AbstentionSet:
    """The abstention set ``name`` (one of ``SETS``), its docs folder written if missing or
    stale. ``manpages_limit`` applies to the man pages only (``None``: all pages)."""
    if name not in _LOADERS:
        raise SystemExit(f"unknown abstention set {name!r}: one of {', '.join(SETS)}")
    language, loader = _LOADERS[name]
    role: Role = "report" if name in REPORT_SETS else "fit"
    corpus = loader(manpages_limit)
    documents = sorted(
        path.relative_to(corpus.docs_dir).as_posix() for path in corpus.docs_dir.rglob("*.md")
    )
    indexed = tuple(p for p in documents if is_indexed(p))
    held_out = tuple(p for p in documents if not is_indexed(p))
    answerable: list[Question] = []
    near: list[Question] = []
    mixed = 0
    for query in corpus.queries:
        inside = [is_indexed(p) for p in query.relevant]
        if inside and all(inside):
            answerable.append(Question(query.text, "answerable", relevant=query.relevant))
        elif inside and not any(inside):
            near.append(Question(query.text, "near", held_out=query.relevant))
        else:
            mixed += 1
    questions = (
        even_sample(answerable, MAX_QUESTIONS)
        + even_sample(near, MAX_QUESTIONS)
        + load_off_domain(language, role)
        + load_domain(name)
    )
    docs_dir = ABSTENTION_DIR / name / "docs"
    _write_docs(corpus.docs_dir, indexed, docs_dir)
    built = AbstentionSet(
        name=name,
        language=language,
        role=role,
        corpus=corpus.name,
        docs_dir=docs_dir,
        indexed=indexed,
        held_out=held_out,
        questions=tuple(questions),
        corpus_queries=len(corpus.queries),
        mixed_queries=mixed,
    )
    listing = {**built.describe(), "questions": [q.to_dict() for q in built.questions]}
    (docs_dir.parent / "set.json").write_text(
        json.dumps(listing, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return built


def _digest(source: Path, documents: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for relative in documents:
        digest.update(relative.encode("utf-8") + b"\0")
        digest.update(hashlib.sha256((source / relative).read_bytes()).digest())
    return digest.hexdigest()


def _write_docs(source: Path, documents: Sequence[str], target: Path) -> None:
    """Copy ``documents`` (relative to ``source``) into ``target``, unless ``target``
    already holds exactly them (``manifest.json``: their paths' and bytes' digest)."""
    manifest = target.parent / "manifest.json"
    digest = _digest(source, documents)
    if (
        target.is_dir()
        and manifest.is_file()
        and json.loads(manifest.read_text(encoding="utf-8")).get("digest") == digest
    ):
        return
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    for relative in documents:
        destination = partial / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, destination)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    manifest.write_text(
        json.dumps({"source": str(source), "documents": len(documents), "digest": digest}) + "\n",
        encoding="utf-8",
    )
    log(f"wrote {len(documents)} indexed documents to {_shown(target)}")


def main(argv: Sequence[str] = ()) -> None:
    names = list(argv) or list(SETS)
    print(f"{'set':<20} {'role':<7} {'lang':<5} {'indexed':>8} {'held':>6} "
          f"{'answer':>7} {'near':>5} {'off':>4} {'(hard)':>7} {'domain':>7}")  # fmt: skip
    for name in names:
        built = load_set(name)
        counts = built.counts()
        print(
            f"{name:<20} {built.role:<7} {built.language:<5} "
            f"{counts['indexed_documents']:>8} {counts['held_out_documents']:>6} "
            f"{counts['answerable']:>7} {counts['near']:>5} {counts['off']:>4} "
            f"{counts['off_shares_words']:>7} {counts['domain']:>7}"
        )
        for hit, documents in domain_term_hits(built).items():
            print(f"  domain key term in indexed documents: {hit}: {', '.join(documents[:3])}")


if __name__ == "__main__":
    main(sys.argv[1:])
