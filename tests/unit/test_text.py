"""knowledge.text: the keyword terms every keyword index and the hashing embedder share."""

from __future__ import annotations

import random
import unicodedata

import pytest

from knowledge.text import is_cjk, tokenize


def _reference_tokenize(text: str) -> list[str]:
    """The rules written out character by character (the implementation takes shortcuts)."""
    import re

    tokens: list[str] = []
    for word in re.findall(r"[^\W_]+", unicodedata.normalize("NFKC", text).lower()):
        runs: list[tuple[bool, str]] = []
        for char in word:
            if runs and runs[-1][0] == is_cjk(char):
                runs[-1] = (runs[-1][0], runs[-1][1] + char)
            else:
                runs.append((is_cjk(char), char))
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
