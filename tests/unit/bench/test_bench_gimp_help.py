"""bench.corpora.gimp_help on a hand-made help page: the page's text without its title, its
navigation or its neighbours' names, and the title as a query without its number."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.corpora.gimp_help import page_text, query_title

PAGE = """<html><head><title>7.9. 레이어 삭제</title></head><body>
<div class="navheader"><table><tr><th>7.9. 레이어 삭제</th></tr>
<tr><td><a title="7.8. 레이어 병합">이전</a></td></tr></table></div>
<div class="sect2"><div class="titlepage"><h3 class="title">7.9. 레이어 삭제</h3></div>
<p>이 명령은 현재 레이어를   이미지에서 지웁니다.</p>
<div class="sect3"><h4 class="title">7.9.1. 명령 실행</h4>
<ul><li><p>레이어 메뉴에서 실행합니다.</p></li></ul>
<pre>gimp --batch</pre></div></div>
<div class="navfooter"><p>7.10. 텍스트 명령</p></div>
</body></html>"""


def test_a_page_loses_its_title_and_navigation_and_keeps_its_sections() -> None:
    title, text = page_text(PAGE)
    assert title == "7.9. 레이어 삭제"
    assert "삭제" not in text  # the title, in <title>, the header and the heading
    assert "병합" not in text  # the neighbours' names (header link, footer)
    assert "텍스트 명령" not in text
    assert "이 명령은 현재 레이어를 이미지에서 지웁니다." in text
    assert "## 7.9.1. 명령 실행" in text  # a sub-section heading stays
    assert "레이어 메뉴에서 실행합니다." in text  # a list item (as bench/corpora/faq.py renders it)
    assert "gimp --batch" in text


@pytest.mark.parametrize(
    ("title", "query"),
    [
        ("7.9. 레이어 삭제", "레이어 삭제"),
        ("15장. 대화 상자", "대화 상자"),
        ("부\xa0II.\xa0GIMP 마법사가 되려면?", "GIMP 마법사가 되려면?"),
        ("김프 온라인", "김프 온라인"),
        ("2.10의 새로운 점", "2.10의 새로운 점"),
    ],
)
def test_a_title_becomes_a_query_without_its_number(title: str, query: str) -> None:
    assert query_title(title) == query
