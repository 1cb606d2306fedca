"""Plain baselines the product's modes are compared with, computed in the same run.

- ``fts5_ranking``: SQLite FTS5 BM25 over whole documents with FTS5's own tokenizer
  (``porter unicode61`` for English, ``trigram`` and plain ``unicode61``, whitespace
  words, for Korean), the query's words quoted and OR-ed: what one would get from SQLite
  with no analysis of one's own. With ``analyse`` (the Korean "morphemes only" baseline)
  documents and queries are first turned into ``knowledge.ranking.analysis.keyword_terms`` (MeCab-ko
  morphemes), the rest unchanged: the analysis alone, without the product's ranking.
- ``cosine_ranking``: plain cosine similarity between the query's embedding and every
  chunk's (the product's default chunker, chunk text alone), documents ranked by their
  best chunk: a vector search with no normalisation, floor or fusion.

Benchmark code only: the product's ranking is never computed here.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from knowledge.embedding.base import EmbeddingClient
from knowledge.ingest.chunking import MarkdownSectionChunker

__all__ = ["CosineBaseline", "Fts5Baseline"]

_WORD = re.compile(r"[^\W_]+")


def _documents(docs_dir: Path) -> list[tuple[str, str]]:
    return [
        (path.relative_to(docs_dir).as_posix(), path.read_text(encoding="utf-8"))
        for path in sorted(docs_dir.rglob("*.md"))
    ]


class Fts5Baseline:
    """FTS5 over whole documents with ``tokenizer`` (``porter unicode61``, ``unicode61``
    or ``trigram``), the text first turned into terms by ``analyse`` if given."""

    def __init__(
        self,
        docs_dir: Path,
        tokenizer: str,
        analyse: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self._analyse = analyse
        self._db = sqlite3.connect(":memory:")
        self._db.execute(
            f"CREATE VIRTUAL TABLE d USING fts5(path UNINDEXED, body, tokenize='{tokenizer}')"
        )
        documents = _documents(docs_dir)
        if analyse is not None:
            documents = [(path, " ".join(analyse(body))) for path, body in documents]
        self._db.executemany("INSERT INTO d VALUES (?, ?)", documents)
        self._trigram = tokenizer.startswith("trigram")

    def scores(self, query: str) -> dict[str, float]:
        """Every matching document's BM25 for ``query`` (higher is better), terms as in
        ``ranking``."""
        match = self._match(query)
        if match is None:
            return {}
        rows = self._db.execute("SELECT path, -bm25(d) FROM d WHERE d MATCH ?", (match,))
        return {path: float(score) for path, score in rows}

    def best_score(self, query: str) -> float:
        """The best document's raw BM25 for ``query`` (higher is better; 0.0 when no
        document matches): plain BM25's own confidence, on no fixed scale."""
        match = self._match(query)
        if match is None:
            return 0.0
        row = self._db.execute(
            "SELECT -bm25(d) FROM d WHERE d MATCH ? ORDER BY bm25(d) LIMIT 1", (match,)
        ).fetchone()
        return 0.0 if row is None else float(row[0])

    def _match(self, query: str) -> str | None:
        if self._analyse is not None:
            query = " ".join(self._analyse(query))
        words = [w for w in _WORD.findall(query.lower()) if not self._trigram or len(w) >= 3]
        if not words:
            return None
        return " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(words))

    def ranking(self, query: str, depth: int) -> list[str]:
        match = self._match(query)
        if match is None:
            return []
        rows = self._db.execute(
            "SELECT path FROM d WHERE d MATCH ? ORDER BY bm25(d) LIMIT ?", (match, depth)
        ).fetchall()
        return [row[0] for row in rows]


class CosineBaseline:
    """Cosine over the default chunks' embeddings; documents by their best chunk."""

    def __init__(self, docs_dir: Path, embedder: EmbeddingClient) -> None:
        self._embedder = embedder
        chunker = MarkdownSectionChunker()
        paths: list[str] = []
        texts: list[str] = []
        for path, text in _documents(docs_dir):
            for chunk in chunker.chunk(path, text):
                paths.append(path)
                texts.append(chunk.content)
        self._paths = paths
        self._matrix = self._unit(self._embed(texts))

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = []
        for start in range(0, len(texts), 256):
            vectors.extend(e.vector for e in self._embedder.embed_batch(texts[start : start + 256]))
        return np.asarray(vectors, dtype=np.float64)

    @staticmethod
    def _unit(matrix: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return matrix / norms

    def ranking(self, query: str, depth: int) -> list[str]:
        vector = self._unit(self._embed([query]))[0]
        cosines = self._matrix @ vector
        ranking: list[str] = []
        for index in np.argsort(-cosines, kind="stable"):
            path = self._paths[int(index)]
            if path not in ranking:
                ranking.append(path)
                if len(ranking) == depth:
                    break
        return ranking
