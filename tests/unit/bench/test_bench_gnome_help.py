"""bench.corpora.gnome_help on a hand-made Mallard page: the page's text without its title or its
<info> block (links, credits, the <desc> line), section titles kept as headings."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.corpora.gnome_help import page_text

PAGE = """<?xml version="1.0" encoding="utf-8"?>
<page xmlns="http://projectmallard.org/1.0/" type="topic" id="net-wireless-connect" xml:lang="ko">
  <info>
    <link type="guide" xref="net-wireless"/>
    <credit type="author"><name>그놈 문서 프로젝트</name></credit>
    <desc>인터넷에 연결합니다 — 무선으로.</desc>
  </info>
<title>무선 네트워크 연결</title>
<p>무선 연결이 가능한 컴퓨터를   가지고 있다면 <gui>시스템 메뉴</gui>를 엽니다.</p>
<steps>
  <item><p>Select <gui>Wi-Fi</gui>.</p></item>
  <item><p>암호를 입력하고 <gui>연결</gui>을 누릅니다. <link xref="net-wireless-hidden"/></p></item>
</steps>
<comment><p>편집자 메모</p></comment>
<section id="hidden"><title>숨은 네트워크</title>
<screen>nmcli device wifi
nmcli connection up</screen>
</section>
</page>"""


def test_a_page_loses_its_title_and_info_and_keeps_its_sections() -> None:
    title, text = page_text(PAGE)
    assert title == "무선 네트워크 연결"
    assert "무선 네트워크 연결" not in text  # the title
    assert "인터넷에 연결합니다" not in text  # the <desc> line of <info>
    assert "그놈 문서 프로젝트" not in text  # credits
    assert "편집자 메모" not in text  # an editorial comment
    assert "무선 연결이 가능한 컴퓨터를 가지고 있다면 시스템 메뉴를 엽니다." in text
    assert "- Select Wi-Fi." in text  # a list item, its paragraph on the same line
    assert "- 암호를 입력하고 연결을 누릅니다." in text
    assert "## 숨은 네트워크" in text  # a section's title stays, as a heading
    assert "nmcli device wifi\nnmcli connection up" in text  # a screen keeps its lines
