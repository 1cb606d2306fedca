"""bench.corpora.python_faq on a hand-made Sphinx FAQ page: each question heading gives a
question (without its permalink) and its answer (without the question), read from the
page's main block only (not its table of contents, not the sidebar)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.corpora.python_faq import main_text, questions

ANSWER = "Use the global statement inside the function; a name assigned in a function is local."
PAGE = f"""<!DOCTYPE html><html><head><title>Programming FAQ</title></head><body>
<div class="document"><div class="body" role="main">
<section id="programming-faq">
<h1>Programming FAQ<a class="headerlink" href="#programming-faq">\u00b6</a></h1>
<nav class="contents" id="contents"><p class="topic-title">Contents</p>
<ul><li><a href="#q1">How do I share global variables across modules?</a></li></ul></nav>
<section id="core-language">
<h2>Core Language<a class="headerlink" href="#core-language">\u00b6</a></h2>
<section id="q1">
<h3><a class="toc-backref" href="#id1">How do I share global variables across modules?</a>
<a class="headerlink" href="#q1">\u00b6</a></h3>
<p>{ANSWER}</p>
<div class="highlight"><pre>import config
config.x = 1</pre></div>
</section>
<section id="q2">
<h3>Why is it so?<a class="headerlink" href="#q2">\u00b6</a></h3>
<p>Too short.</p>
</section>
<section id="q3">
<h3>Performance<a class="headerlink" href="#q3">\u00b6</a></h3>
<p>A section whose heading is not a question, however long its text may be, gives none.</p>
</section>
<section id="q4">
<h3>What is the last question of the page?<a class="headerlink" href="#q4">\u00b6</a></h3>
<p>The last answer of the page ends where the main block of the page ends, before the sidebar.</p>
</section></section></section>
</div></div>
<div class="sphinxsidebar" role="navigation"><h3>Table of Contents</h3>
<p>Is this sidebar text part of an answer?</p><h4>Previous topic</h4><p>General FAQ</p>
<h3>This Page</h3></div>
</body></html>"""


def test_each_question_heading_gives_its_question_and_its_answer_without_it() -> None:
    found = questions(PAGE)
    assert [question for question, _ in found] == [
        "How do I share global variables across modules?",
        "What is the last question of the page?",
    ]
    answer = found[0][1]
    assert ANSWER in answer
    assert "```\nimport config\nconfig.x = 1\n```" in answer  # code kept as a fenced block
    assert "share global variables" not in answer  # the question is not handed over
    assert "\u00b6" not in answer


def test_the_last_answer_stops_before_the_sidebar() -> None:
    last = questions(PAGE)[-1][1]
    assert last == (
        "The last answer of the page ends where the main block of the page ends, "
        "before the sidebar."
    )
    assert "sidebar text" not in main_text(PAGE)
    assert "Table of Contents" not in main_text(PAGE)


def test_a_page_without_a_main_block_is_read_whole() -> None:
    page = f"<h3>How do I share global variables across modules?</h3><p>{ANSWER}</p>"
    assert questions(page) == [("How do I share global variables across modules?", ANSWER)]
