"""knowledge.ranking.analysis: the keyword terms of every keyword index and the hashing embedder."""

from __future__ import annotations

import random
import unicodedata

import pytest

from knowledge.ranking.analysis import (
    ANALYSIS,
    ANALYSIS_VERSION,
    STOP_WORDS,
    has_cjk,
    has_hangul,
    is_cjk,
    keyword_terms,
    tokenize,
)


def _in_cjk_blocks(char: str) -> bool:
    """CJK by the literal block edges below (``CJK_EDGES``), not by the module's ``is_cjk``."""
    return any(first <= char <= last for first, last in CJK_EDGES)


def _reference_tokenize(text: str) -> list[str]:
    """The rules written out character by character (the implementation takes shortcuts)."""
    import re

    tokens: list[str] = []
    for word in re.findall(r"[^\W_]+", unicodedata.normalize("NFKC", text).lower()):
        runs: list[tuple[bool, str]] = []
        for char in word:
            if runs and runs[-1][0] == _in_cjk_blocks(char):
                runs[-1] = (runs[-1][0], runs[-1][1] + char)
            else:
                runs.append((_in_cjk_blocks(char), char))
        for cjk, run in runs:
            if cjk:
                tokens.extend(run[i : i + 2] for i in range(max(0, len(run) - 1)))
            elif len(run) > 1:
                tokens.append(run)
    return tokens


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("Roll back: kubectl rollout-undo, a b", ["roll", "back", "kubectl", "rollout", "undo"]),
        ("snake_case_name x", ["snake", "case", "name"]),
        ("ＦＵＬＬ width ﬁle", ["full", "width", "file"]),  # NFKC first
        ("배포실패", ["배포", "포실", "실패"]),
        ("배포 실패", ["배포", "실패"]),
        ("k8s배포 a배", ["k8s", "배포"]),
        ("デプロイ失敗", ["デプ", "プロ", "ロイ", "イ失", "失敗"]),
        ("", []),
        ("!!! — …", []),
    ],
)
def test_terms(text: str, terms: list[str]) -> None:
    assert tokenize(text) == terms


@pytest.mark.parametrize("char", ["a", "é", "—", "ᄀ", "ア", "一", "가", "豈", "𠀀"])
def test_is_cjk_matches_the_ranges(char: str) -> None:
    assert is_cjk(char) == (char not in "aé—")


def test_tokenize_follows_the_rules_on_random_mixed_text() -> None:
    alphabet = "abcXYZ019 _-.,é—ü가나다アイ一二ＡＢ①\t\n"
    rng = random.Random(20250101)
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert tokenize(text) == _reference_tokenize(text), text


# --- CJK range edges, as literal code points (the module's own tables are not the oracle) ---

# (first, last) code point of each CJK block the tokenizer bigrams, written out by hand
# from the Unicode block chart.
CJK_EDGES = [
    ("\u1100", "\u11ff"),  # Hangul Jamo
    ("\u3040", "\u30ff"),  # Hiragana, Katakana
    ("\u3130", "\u318f"),  # Hangul Compatibility Jamo
    ("\u3400", "\u4dbf"),  # CJK Extension A
    ("\u4e00", "\u9fff"),  # CJK Unified Ideographs
    ("\ua960", "\ua97f"),  # Hangul Jamo Extended-A
    ("\uac00", "\ud7af"),  # Hangul Syllables
    ("\uf900", "\ufaff"),  # CJK Compatibility Ideographs
    ("\U00020000", "\U0002fa1f"),  # Extensions B-F, Compatibility Ideographs Supplement
]
# The code points just outside each block (none of them CJK).
NOT_CJK_NEIGHBOURS = [
    "\u10ff", "\u1200", "\u303f", "\u3100", "\u312f", "\u3190", "\u33ff", "\u4dc0",
    "\u4dff", "\ua000", "\ua95f", "\ua980", "\uabff", "\ud7b0", "\uf8ff", "\ufb00",
    "\U0001ffff", "\U0002fa20",
]  # fmt: skip


@pytest.mark.parametrize("char", [c for edge in CJK_EDGES for c in edge])
def test_first_and_last_character_of_every_cjk_block_is_cjk(char: str) -> None:
    assert is_cjk(char), f"U+{ord(char):04X}"


@pytest.mark.parametrize("char", NOT_CJK_NEIGHBOURS)
def test_characters_just_outside_the_cjk_blocks_are_not(char: str) -> None:
    assert not is_cjk(char), f"U+{ord(char):04X}"


def test_ascii_and_latin_are_not_cjk() -> None:
    for char in "aZ09_-é\u00ff\u0100":
        assert not is_cjk(char)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("배포실패", ["배포", "포실", "실패"]),  # Hangul syllables: bigrams
        ("東京都", ["東京", "京都"]),  # Han: bigrams
        ("カタカナ", ["カタ", "タカ", "カナ"]),  # Katakana: bigrams
        ("k8s배포", ["k8s", "배포"]),  # Latin run split from the CJK run
        ("\uac00\ud7a3", ["\uac00\ud7a3"]),  # first and last Hangul syllable: one bigram
        ("a\u4e00\u9fffb", ["\u4e00\u9fff"]),  # single Latin letters each side are dropped
    ],
)
def test_cjk_runs_become_bigrams(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


# --- keyword analysis: stems and stop words --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Inflections meet at one Snowball stem; stop words go.
        ("How do I configure the running processes?", ["configur", "run", "process"]),
        ("configured configuration configures", ["configur", "configur", "configur"]),
        ("Packages package packaging", ["packag", "packag", "packag"]),
        # Han and Kana keep their bigrams; Latin next to them is stemmed.
        ("東京都 deployments", ["東京", "京都", "deploy"]),
        ("k8s東京", ["k8s", "東京"]),
        # Hangul becomes its content morphemes (below); Latin next to it is stemmed.
        ("배포실패 deployments", ["배포", "실패", "deploy"]),
        ("k8s배포", ["k8s", "배포"]),
        # Only stop words: no terms at all (such a query matches nothing in keyword mode).
        ("what is it", []),
    ],
)
def test_keyword_terms_stem_english_and_drop_stop_words(text: str, expected: list[str]) -> None:
    assert keyword_terms(text) == expected


def test_keyword_terms_of_a_query_meet_those_of_the_text_in_another_form() -> None:
    document = set(keyword_terms("The installer detected the network interfaces."))
    assert set(keyword_terms("detecting a network interface")) <= document


def test_keyword_terms_are_the_same_in_every_thread() -> None:
    import threading

    words = "running processes configured installations packaging debian " * 50
    expected = keyword_terms(words)
    seen: list[list[str]] = []

    def work() -> None:
        for _ in range(20):
            seen.append(keyword_terms(words))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 80
    assert all(terms == expected for terms in seen)


def test_stop_words_are_lower_case_tokenizer_terms() -> None:
    # Each stop word must be a term tokenize can produce, or it would never be dropped.
    assert all(tokenize(word) == [word] for word in STOP_WORDS)
    assert ANALYSIS.endswith(f"v{ANALYSIS_VERSION}")


def test_has_cjk() -> None:
    assert all(has_cjk(text) for text in ("배포 실패", "deploy 失敗", "カタカナ"))
    assert not has_cjk("deploy failed, café")


def test_each_thread_builds_its_stemmer_once() -> None:
    import threading

    from knowledge.ranking import analysis as text

    mine = text._stemmer()
    assert text._stemmer() is mine  # kept for this thread
    assert mine.stemWord("processes") == "process"
    theirs: list[object] = []
    stems: list[str] = []

    def work() -> None:
        theirs.extend([text._stemmer(), text._stemmer()])
        stems.append(keyword_terms("configured")[0])

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert stems == ["configur"]  # a fresh thread builds a working stemmer
    assert theirs[0].stemWord("processes") == "process"  # type: ignore[attr-defined]
    assert theirs[0] is theirs[1]  # kept for that thread
    assert theirs[0] is not mine  # its own (PyStemmer objects are not thread-safe)


def test_analysis_name_and_version_are_pinned() -> None:
    # Changing either invalidates every keyword index: only on purpose.
    # Version 4: the title and heading terms next to the text (knowledge.ranking.headings);
    # version 5: OpenSearch holds them and the text's in one field, as FTS5 does.
    assert (ANALYSIS_VERSION, ANALYSIS) == (6, "english-snowball-mecab-ko-v6")


_WITHOUT_MECAB = """
import json, sys
sys.modules["mecab"] = None  # as on CPython 3.13, where python-mecab-ko is not installed
from knowledge.ranking import analysis as text
print(json.dumps([text.KOREAN_MORPHEMES, text.ANALYSIS,
                  text.keyword_terms("배포실패 데비안은 한 k8s배포 Deploying"),
                  sys.modules["mecab"] is not None]))
"""


def test_without_mecab_hangul_is_bigrams_and_the_analysis_says_so() -> None:
    import json
    import subprocess
    import sys

    probe = subprocess.run(
        [sys.executable, "-c", _WITHOUT_MECAB],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    morphemes, analysis, terms, loaded = json.loads(probe.stdout)
    assert morphemes is False
    assert analysis == "english-snowball-hangul-bigrams-v6"  # never the MeCab-ko one
    assert terms == ["배포", "포실", "실패", "데비", "비안", "안은", "k8s", "배포", "deploy"]
    assert loaded is False


# --- keyword analysis: Korean morphemes (MeCab-ko) ----------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Particles and endings go; nouns and stems stay.
        ("데비안은 리눅스 배포판입니다.", ["데비안", "리눅스", "배포판"]),
        ("패키지를 설치했다", ["패키지", "설치"]),
        # A compound written without spaces gives the terms of the words written apart.
        ("배포실패", ["배포", "실패"]),
        ("배포 실패", ["배포", "실패"]),
        # A compound the dictionary marks as one gives its parts and itself.
        ("데이터베이스", ["데이터", "베이스", "데이터베이스"]),
        # "안은" (inside + topic particle) is the noun 안, not a piece of 데비안은.
        ("상자 안은 조용하다", ["상자", "안", "조용"]),
    ],
)
def test_hangul_becomes_its_content_morphemes(text: str, expected: list[str]) -> None:
    assert keyword_terms(text) == expected


def test_korean_inflections_of_a_query_meet_those_of_the_text() -> None:
    text = set(keyword_terms("패키지를 설치하려면 먼저 저장소를 추가했습니다."))
    query = set(keyword_terms("패키지 설치 방법은?"))
    assert {"패키지", "설치"} <= text & query


def test_a_query_word_does_not_match_a_bigram_of_another_word() -> None:
    # Bigrams made "데비안은" share "안은" with "상자 안은": morphemes do not.
    assert not set(keyword_terms("데비안은")) & set(keyword_terms("상자 안은 조용하다"))


def test_keyword_terms_of_mixed_text_keep_every_script() -> None:
    text = "Debian 패키지를 설치했다: dpkg-reconfigure k8s배포 東京都"
    assert keyword_terms(text) == [
        "debian",
        "패키지",
        "설치",
        "dpkg",
        "reconfigur",
        "k8s",
        "배포",
        "東京",
        "京都",
    ]


def test_korean_terms_are_the_same_in_every_thread() -> None:
    import threading

    text = "데비안 패키지를 설치했습니다"
    mine = keyword_terms(text)
    theirs: list[list[str]] = []
    thread = threading.Thread(target=lambda: theirs.append(keyword_terms(text + " 다시")))
    thread.start()
    thread.join()
    assert theirs[0][: len(mine)] == mine


def test_has_cjk_at_the_edges_of_the_blocks() -> None:
    for first, last in CJK_EDGES:
        assert has_cjk("x" + first), f"U+{ord(first):04X}"
        assert has_cjk(last + "x"), f"U+{ord(last):04X}"
    assert not any(has_cjk("a" + char + "b") for char in NOT_CJK_NEIGHBOURS)


def test_has_hangul() -> None:
    assert has_hangul("배포 실패")
    assert has_hangul("k8s배포")
    assert has_hangul("ㄱ")  # a compatibility jamo
    assert not has_hangul("deploy 失敗 カタカナ café")
    assert not has_hangul("")


def test_each_thread_opens_its_mecab_tagger_once() -> None:
    import threading

    from knowledge.ranking import analysis as text

    mine = text._mecab()
    assert [m.surface for m in mine.parse("배포")] == ["배포"]  # a working tagger
    assert text._mecab() is mine  # kept for this thread
    theirs: list[object] = []
    surfaces: list[list[str]] = []

    def work() -> None:
        theirs.extend([text._mecab(), text._mecab()])
        # The thread's own tagger (the analysis of a run is cached, so keyword_terms of a
        # word already seen would not reach it): it must work too.
        surfaces.append([str(m.surface) for m in theirs[0].parse("설치")])  # type: ignore[attr-defined]

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert surfaces == [["설치"]]  # a fresh thread opens a working tagger
    assert theirs[0] is theirs[1]  # kept for that thread
    assert theirs[0] is not mine  # its own


def test_has_module_finds_a_module_and_a_blocked_one_is_missing() -> None:
    import sys

    from knowledge.ranking import analysis as text

    assert text._has_module("json") is True
    assert text._has_module("knowledge_no_such_module") is False
    sys.modules["knowledge_blocked_module"] = None  # type: ignore[assignment]
    try:
        assert text._has_module("knowledge_blocked_module") is False
    finally:
        del sys.modules["knowledge_blocked_module"]


def test_a_one_letter_latin_part_of_a_hangul_word_is_dropped() -> None:
    # One character is not a term, also when it is glued to Hangul.
    assert keyword_terms("x배포") == keyword_terms("배포") == ["배포"]


def test_has_module_is_false_when_the_lookup_fails() -> None:
    import sys
    import types

    from knowledge.ranking import analysis as text

    # A parent package that does not exist: find_spec raises ModuleNotFoundError.
    assert text._has_module("knowledge_no_such_package.sub") is False
    # A module in sys.modules without a spec: find_spec raises ValueError.
    sys.modules["knowledge_spec_less_module"] = types.ModuleType("knowledge_spec_less_module")
    try:
        assert text._has_module("knowledge_spec_less_module") is False
    finally:
        del sys.modules["knowledge_spec_less_module"]


def test_a_two_letter_latin_part_of_a_hangul_word_is_a_term() -> None:
    # Two characters are a term, also when they are glued to Hangul.
    assert keyword_terms("db배포") == ["db", "배포"]


def test_an_inflected_verb_or_adjective_gives_its_stem() -> None:
    # MeCab-ko reads "갔다" as 갔 (가/VV + 았/EP, one inflected form) + 다: the term is the
    # stem 가, never the inflected surface 갔; likewise for adjectives.
    assert keyword_terms("갔다 아름다운 가르쳐 예뻤다") == ["가", "아름답", "가르치", "예쁘"]
    assert keyword_terms("집에 갔다") == ["집", "가"]


def test_a_dropped_morpheme_inside_a_run_does_not_end_it() -> None:
    # Written without spaces, a particle (를) or an adverb (다시) sits between content
    # morphemes of one run: it is dropped and the analysis goes on after it.
    assert keyword_terms("패키지를설치했다") == ["패키지", "설치"]
    assert keyword_terms("다시설치") == ["설치"]


def test_a_pre_analysed_word_is_kept_whole() -> None:
    # mecab-ko-dic lists some words as "Preanalysis" with their parts in the expression
    # (월드/NNG+와이드/NNG+웹/NNG): neither Compound nor Inflect, so the surface is the term.
    assert keyword_terms("월드와이드웹") == ["월드와이드웹"]
    assert keyword_terms("하체비만") == ["하체비만"]
