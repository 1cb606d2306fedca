"""bench.corpora.gnome_apps_help on hand-made application help: every application's pages in one
collection, each page's title its query, GNOME Help's own guides left out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.corpora.gnome_apps_help import build

_PAGE = """<?xml version="1.0" encoding="utf-8"?>
<page xmlns="http://projectmallard.org/1.0/" type="topic" id="{id}" xml:lang="ko">
<info><desc>{desc}</desc></info>
<title>{title}</title>
<p>{text}</p>
</page>"""


def _page(folder: Path, name: str, title: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    body = _PAGE.format(id=name, desc="링크 옆 설명", title=title, text=text)
    (folder / f"{name}.page").write_text(body, encoding="utf-8")


def test_every_application_in_one_collection_titles_as_queries(tmp_path: Path) -> None:
    root = tmp_path / "help" / "ko"
    long = "편집기에서 글꼴과 색 구성표를 바꾸려면 기본 설정 대화 상자를 엽니다. " * 3
    _page(root / "gedit", "gedit-fonts", "글꼴과 색 바꾸기", long)
    _page(root / "gedit", "gedit-same", "같은 제목", long)
    _page(root / "eog", "eog-same", "같은 제목", long)  # shared by two pages: no query
    _page(root / "eog", "eog-english", "Zoom", "Use the zoom buttons. " * 6)  # distractor
    _page(root / "gnome-help", "net", "무선 네트워크 연결", long)  # gnome-help-ko's own
    target = tmp_path / "set"

    assert build(target, root) == 1

    docs = sorted(p.relative_to(target / "docs").as_posix() for p in target.rglob("*.md"))
    assert docs == ["eog/eog-english.md", "eog/eog-same.md", "gedit/gedit-fonts.md",
                    "gedit/gedit-same.md"]  # fmt: skip
    text = (target / "docs" / "gedit" / "gedit-fonts.md").read_text(encoding="utf-8")
    assert "글꼴과 색 바꾸기" not in text  # the title
    assert "링크 옆 설명" not in text  # the <desc> line of <info>
    lines = (target / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"query": "글꼴과 색 바꾸기", "relevant": ["gedit/gedit-fonts.md"]}
    ]
