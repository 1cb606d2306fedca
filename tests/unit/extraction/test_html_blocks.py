"""HTML's blocks, each with its section, for the markup the block walk treats apart:
headings that close deeper ones, nested lists, table rows whose cells hold blocks of
their own, ``<pre>``, text around dropped elements, a list's own text. The blocks are
the ones the walk gives today, quirks included (a list item's text before a nested
list is a block without its marker): a change here changes what is indexed."""

from __future__ import annotations

from knowledge.extraction import extract_document

PAGE = b"""<html><body><main>
<h1>Guide</h1>intro text<h3>Deep</h3><p>deep para</p>
<h2>Second</h2>
<ul>lead<li>one<ul><li>nested <b>bold</b></li></ul>after nested</li><li></li><li>two</li>tail</ul>
<ol><li>first</li></ol>
<table><caption>Envs</caption><tr><th>Env</th><td><p>cell para</p>loose</td><td></td></tr>
<tr><td></td><td></td></tr><tr>row text<td>x</td>row tail</tr></table>
<p>before <script>x()</script>after the script<span hidden>gone</span> and the rest</p>
<pre>  line one  \n    indented\n\n</pre>after pre
<h1>Top again</h1><dl><dt>term</dt><dd>definition</dd></dl>trailing words
</main></body></html>"""


def test_every_block_kind_keeps_its_text_and_section() -> None:
    extracted = extract_document("guide.html", PAGE, max_bytes=1 << 20)
    second = ["Guide", "Second"]
    assert [(b.text, list(b.section["heading_path"])) for b in extracted.blocks or ()] == [
        ("Guide", ["Guide"]),
        ("intro text", ["Guide"]),
        ("Deep", ["Guide", "Deep"]),
        ("deep para", ["Guide", "Deep"]),
        ("Second", second),
        ("lead", second),
        ("one", second),
        ("  - nested bold", second),
        ("- after nested", second),
        ("- two", second),
        ("tail", second),
        ("- first", second),
        ("Envs", second),
        ("Env | cell para | loose | ", second),
        ("row text | x | row tail", second),
        ("before after the script and the rest", second),
        ("  line one\n    indented", second),
        ("after pre", second),
        ("Top again", ["Top again"]),
        ("term", ["Top again"]),
        ("definition", ["Top again"]),
        ("trailing words", ["Top again"]),
    ]
