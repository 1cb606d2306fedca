"""Per-scope synonyms applied at query time: parsing a scope's synonyms file and
expanding a query's keyword terms with it, the same in every store.

**The file** (``knowledge.core.source.SYNONYMS_FILE``, ``_synonyms.txt`` at the root of a
scope) is in the Solr synonyms format:

- ``k8s, kubernetes`` (equivalence): each term finds the others;
- ``db => database`` (explicit mapping, one way): ``db`` also finds ``database``, a query
  for ``database`` is not expanded; ``a, b => c, d``: ``a`` or ``b`` finds ``c`` and ``d``;
- a line starting with ``#`` is a comment, blank lines are ignored, ``\\`` escapes the
  next character (``\\,`` a comma inside a synonym);
- a synonym may be several words (``dns, domain name system``).

Every synonym goes through the keyword analysis of the query
(``knowledge.ranking.analysis.keyword_terms``: Snowball stems, Korean MeCab-ko morphemes,
CJK bigrams), so ``배포, 디플로이`` matches ``배포했다`` and ``Databases`` matches ``db =>
database``. Solr's ``expand=false`` and its ``=>``-less one-way forms are not supported:
an equivalence line always expands every way.

**Expansion** (``expand``): the query's analysed terms are matched against each rule's
left side as a contiguous run of terms (a multi-word synonym matches the same words in
the query, in order); every rule that matches adds its right side's terms. The typed
terms keep weight 1.0, each added term weighs ``SYNONYM_WEIGHT`` (0.5): a chunk that
holds the word the user typed ranks above one that holds only its synonym. A term both
typed and added counts as typed. A multi-word expansion adds its words as terms (each at
``SYNONYM_WEIGHT``), not as a phrase: the memory store keeps no positions, and this keeps
the three stores' scores the same formula.

**Bounds** (a file past them is rejected whole, with the reason, and the last good set
stays in force: ``parse_synonyms`` raises ``SynonymsError``): ``MAX_SYNONYMS_BYTES``,
``MAX_SYNONYM_RULES`` lines of rules, ``MAX_SYNONYMS_PER_RULE`` synonyms on one line,
``MAX_TERMS_PER_SYNONYM`` analysed terms in one synonym; a query adds at most
``MAX_EXPANDED_TERMS`` terms.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Final

from knowledge.ranking.analysis import keyword_terms

__all__ = [
    "EMPTY",
    "MAX_EXPANDED_TERMS",
    "MAX_SYNONYMS_BYTES",
    "MAX_SYNONYMS_PER_RULE",
    "MAX_SYNONYM_RULES",
    "MAX_TERMS_PER_SYNONYM",
    "SYNONYM_WEIGHT",
    "QueryTerms",
    "SynonymSet",
    "SynonymsError",
    "compiled",
    "expand",
    "parse_synonyms",
]

SYNONYM_WEIGHT: Final = 0.5
"""What a term added by a synonym weighs against a typed term (1.0)."""
MAX_SYNONYMS_BYTES: Final = 256 * 1024
MAX_SYNONYM_RULES: Final = 10_000
MAX_SYNONYMS_PER_RULE: Final = 32
MAX_TERMS_PER_SYNONYM: Final = 8
MAX_EXPANDED_TERMS: Final = 64

Phrase = tuple[str, ...]


class SynonymsError(ValueError):
    """A synonyms file that cannot be used (the message names the line and the problem)."""


@dataclass(frozen=True, slots=True)
class SynonymSet:
    """A parsed synonyms file: for each first term, the rules whose left side starts with
    it (``(left side, terms it adds)``). ``digest`` names the text it was parsed from."""

    rules: Mapping[str, tuple[tuple[Phrase, Phrase], ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    lines: int = 0
    digest: str = ""

    def __bool__(self) -> bool:
        return bool(self.rules)


EMPTY: Final = SynonymSet()


@dataclass(frozen=True, slots=True)
class QueryTerms:
    """A query's keyword terms: the ``typed`` ones (weight 1.0, distinct, in order) and
    the ``expanded`` ones a synonym added (``SYNONYM_WEIGHT`` each), with what matched."""

    typed: tuple[str, ...]
    expanded: tuple[str, ...] = ()
    matches: tuple[tuple[Phrase, Phrase], ...] = ()

    @property
    def weights(self) -> dict[str, float]:
        """Every term with its weight."""
        weights = dict.fromkeys(self.typed, 1.0)
        for term in self.expanded:
            weights.setdefault(term, SYNONYM_WEIGHT)
        return weights

    def to_dict(self) -> dict[str, Any]:
        """The explain trace's ``query.synonyms``."""
        return {
            "weight": SYNONYM_WEIGHT,
            "expanded": list(self.expanded),
            "matches": [{"from": list(left), "adds": list(right)} for left, right in self.matches],
        }


def _split(line: str, separator: str) -> list[str]:
    """``line`` cut at each unescaped ``separator``, escapes kept for the next split."""
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\" and i + 1 < len(line):
            current.append(line[i : i + 2])
            i += 2
            continue
        if line.startswith(separator, i):
            parts.append("".join(current))
            current = []
            i += len(separator)
            continue
        current.append(char)
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _phrases(side: str, number: int) -> list[Phrase]:
    members = _split(side, ",")
    if len(members) > MAX_SYNONYMS_PER_RULE:
        raise SynonymsError(
            f"line {number}: {len(members)} synonyms, at most {MAX_SYNONYMS_PER_RULE} on one line"
        )
    phrases: list[Phrase] = []
    for member in members:
        word = _unescape(member).strip()
        if not word:
            raise SynonymsError(f"line {number}: an empty synonym (two commas, or one at an end)")
        terms = tuple(keyword_terms(word))
        if not terms:
            raise SynonymsError(
                f"line {number}: '{word[:60]}' has no searchable terms (stop words or "
                "one-letter words only)"
            )
        if len(terms) > MAX_TERMS_PER_SYNONYM:
            raise SynonymsError(
                f"line {number}: '{word[:60]}' has {len(terms)} terms, "
                f"at most {MAX_TERMS_PER_SYNONYM} in one synonym"
            )
        if terms not in phrases:
            phrases.append(terms)
    return phrases


def parse_synonyms(data: bytes | str) -> SynonymSet:
    """Parse a synonyms file (module docstring); ``SynonymsError`` for one that is too big,
    not UTF-8, holds too many rules or a line that is not a rule."""
    if isinstance(data, bytes):
        if len(data) > MAX_SYNONYMS_BYTES:
            raise SynonymsError(f"is {len(data)} bytes, at most {MAX_SYNONYMS_BYTES}")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SynonymsError(f"is not UTF-8 text (byte {exc.start})") from None
    else:
        text = data
        if len(text.encode("utf-8")) > MAX_SYNONYMS_BYTES:
            raise SynonymsError(f"is larger than {MAX_SYNONYMS_BYTES} bytes")
    return _compiled(text)


@lru_cache(maxsize=64)
def _compiled(text: str) -> SynonymSet:
    """``text`` parsed; cached (a store hands the same text to every search of a scope)."""
    rules: dict[str, dict[Phrase, dict[str, None]]] = {}
    count = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        count += 1
        if count > MAX_SYNONYM_RULES:
            raise SynonymsError(f"more than {MAX_SYNONYM_RULES} rules (line {number})")
        sides = _split(line, "=>")
        if len(sides) > 2:
            raise SynonymsError(f"line {number}: '=>' more than once")
        if len(sides) == 2:
            left, right = _phrases(sides[0], number), _phrases(sides[1], number)
            pairs = [(source, right) for source in left]
        else:
            members = _phrases(sides[0], number)
            pairs = [(source, [m for m in members if m != source]) for source in members]
        for source, targets in pairs:
            adds = rules.setdefault(source[0], {}).setdefault(source, {})
            for target in targets:
                adds.update(dict.fromkeys(t for t in target if t not in source))
    frozen = {
        first: tuple((source, tuple(adds)) for source, adds in by_source.items() if adds)
        for first, by_source in rules.items()
    }
    return SynonymSet(
        MappingProxyType({first: found for first, found in frozen.items() if found}),
        count,
        hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )


def compiled(text: str | None) -> SynonymSet:
    """The set of a stored synonyms text (already checked when it was stored); ``EMPTY``
    for none, or for a text that no longer parses (never a failed search)."""
    if not text:
        return EMPTY
    try:
        return _compiled(text)
    except SynonymsError:
        return EMPTY


def expand(text: str, synonyms: SynonymSet | None) -> QueryTerms:
    """The keyword terms of ``text`` with what ``synonyms`` add (module docstring)."""
    terms = keyword_terms(text)
    typed = tuple(dict.fromkeys(terms))
    if not synonyms or not terms:
        return QueryTerms(typed)
    return _expanded(tuple(terms), typed, synonyms)


def _expanded(terms: Sequence[str], typed: tuple[str, ...], synonyms: SynonymSet) -> QueryTerms:
    added: dict[str, None] = {}
    matches: list[tuple[Phrase, Phrase]] = []
    seen = set(typed)
    for i, term in enumerate(terms):
        for source, adds in synonyms.rules.get(term, ()):
            if tuple(terms[i : i + len(source)]) != source:
                continue
            new = tuple(t for t in adds if t not in seen and t not in added)
            if (source, adds) not in matches:
                matches.append((source, adds))
            for t in new:
                if len(added) >= MAX_EXPANDED_TERMS:
                    break
                added[t] = None
    return QueryTerms(typed, tuple(added), tuple(matches))
