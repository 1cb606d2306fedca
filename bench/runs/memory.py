"""Peak RSS of indexing one large Markdown file.

Peak memory of indexing one large Markdown file (hashing embedder, embedded store).

Files are generated deterministically (``generate_markdown``: a seeded pseudo-random
vocabulary in headed sections, lists and code fences) under ``bench/data/memory/``. Each
measurement runs in its own process (``bench/probes/memory.py``): peak RSS before
indexing (the interpreter, the imports, an empty store) and after. Measured:

- one file of each size in ``--sizes`` (MB), to see how memory grows with one document;
- ``--files`` files of ``50 / files`` MB each (the same 50 MB split up), to see whether
  memory grows with the corpus (it must not: documents are streamed one at a time).

Writes ``bench/results/memory.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common.environment import DATA_DIR, PROBES_DIR, log, write_result

__all__ = ["add_arguments", "generate_markdown", "main"]

PROBE = PROBES_DIR / "memory.py"
MB = 1_000_000
_SEED = 20_250_301


def _vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "shi", "po", "den", "var", "ex", "qu"]
    words = {"".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(size * 2)}
    return sorted(words)[:size]


def generate_markdown(path: Path, size_bytes: int, seed: int = _SEED) -> int:
    """Write about ``size_bytes`` of Markdown to ``path`` (same seed, same bytes); returns
    the exact size. Streamed to disk, so generating it needs little memory."""
    rng = random.Random(seed)
    words = _vocabulary(rng)
    written = 0
    section = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:

        def emit(text: str) -> None:
            nonlocal written
            out.write(text)
            written += len(text)

        emit(f"# Generated document {seed}\n\n")
        while written < size_bytes:
            section += 1
            emit(f"## Section {section}: {' '.join(rng.choices(words, k=4))}\n\n")
            for _ in range(rng.randint(2, 6)):
                kind = rng.random()
                if kind < 0.1:
                    emit(f"### {' '.join(rng.choices(words, k=3))}\n\n")
                elif kind < 0.2:
                    code = "\n".join(
                        f"    {' '.join(rng.choices(words, k=5))}();" for _ in range(4)
                    )
                    emit(f"```c\n{code}\n```\n\n")
                elif kind < 0.3:
                    items = "".join(f"- {' '.join(rng.choices(words, k=8))}\n" for _ in range(4))
                    emit(items + "\n")
                else:
                    lines = [" ".join(rng.choices(words, k=12)) for _ in range(rng.randint(2, 7))]
                    emit("\n".join(lines) + "\n\n")
    return written


def _corpus(name: str, files: int, total_mb: float) -> tuple[Path, int]:
    folder = DATA_DIR / "memory" / name
    marker = folder / ".complete"
    if marker.is_file():
        return folder, int(marker.read_text())
    size = int(total_mb * MB / files)
    total = 0
    for i in range(files):
        total += generate_markdown(folder / f"doc-{i:04d}.md", size, seed=_SEED + i)
    marker.write_text(str(total))
    return folder, total


def _probe(folder: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kb-memory-") as tmp:
        out = Path(tmp) / "out.json"
        subprocess.run([sys.executable, str(PROBE), str(folder), str(out)], check=True)
        result: dict[str, Any] = json.loads(out.read_text("utf-8"))
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sizes", default="5,12.5,25,50", help="single-file sizes in MB (comma-separated)"
    )
    parser.add_argument("--files", type=int, default=100, help="files the 50 MB corpus has")


def main(args: argparse.Namespace) -> None:
    single: list[dict[str, Any]] = []
    for size in (float(s) for s in args.sizes.split(",")):
        folder, total = _corpus(f"single-{size:g}mb", 1, size)
        log(f"indexing one file of {total / MB:.1f} MB ...")
        result = {"files": 1, "file_mb": round(total / MB, 2), **_probe(folder)}
        result["growth_per_file_mb"] = round(result["growth_mib"] * 2**20 / total, 2)
        log(str(result))
        single.append(result)
    folder, total = _corpus(f"split-{args.files}x", args.files, 50)
    log(f"indexing {args.files} files, {total / MB:.1f} MB in all ...")
    split = {
        "files": args.files,
        "total_mb": round(total / MB, 2),
        "file_mb": round(total / MB / args.files, 2),
        **_probe(folder),
    }
    log(str(split))
    largest = max(single, key=lambda r: r["file_mb"])
    write_result(
        "memory",
        {
            "embedder": "hashing (256 dimensions)",
            "store": "embedded (SQLite file)",
            "generator": "bench.runs.memory.generate_markdown (seeded, deterministic)",
            "single_file": single,
            "split_corpus": split,
            "largest_file": {
                "file_mb": largest["file_mb"],
                "peak_mib": largest["peak_mib"],
                "growth_mib": largest["growth_mib"],
                "growth_over_file_size": largest["growth_per_file_mb"],
            },
        },
    )
