"""Files made by real tools (pandoc, groff; see tests/data/documents/README.md), so the
extractors are not only tested on what their own libraries write."""

from __future__ import annotations

from pathlib import Path

from knowledge.core.model import DocumentChunk
from knowledge.extraction import extract_document
from knowledge.ingest.chunking import MarkdownSectionChunker

DATA = Path(__file__).parents[2] / "data" / "documents"


def chunks(name: str) -> list[DocumentChunk]:
    document = extract_document(name, (DATA / name).read_bytes())
    assert document.blocks is not None
    return list(
        MarkdownSectionChunker().chunk_blocks(
            name, document.blocks, title=document.title, position_key=document.position_key
        )
    )


def test_groff_pdf_pages_are_cited() -> None:
    found = chunks("runbooks.pdf")
    first = next(c for c in found if "Multi-AZ failover" in c.content)
    assert first.metadata["page"] == 1
    later = next(c for c in found if "14:47 error rate back" in c.content)
    assert later.metadata["page"] == 2
    assert {c.metadata.get("page_end") for c in found} <= {None, 2}
    assert any(c.metadata.get("page_end") == 2 for c in found)


def test_pandoc_docx_headings_become_the_heading_path() -> None:
    found = chunks("database-failover.docx")
    forced = next(c for c in found if "--force-failover" in c.content)
    assert forced.metadata["heading_path"] == [
        "Database failover (PostgreSQL on Amazon RDS)",
        "Forced failover",
    ]
    symptoms = next(c for c in found if "could not connect to server" in c.content)
    assert "- Connection errors could not connect to server" in symptoms.content


def test_pandoc_pptx_slides_are_sections_with_their_titles() -> None:
    found = chunks("deploy-rollback.pptx")
    titles = [(c.metadata["slide"], c.metadata["heading_path"]) for c in found]
    assert (3, ["Decide quickly"]) in titles
    assert (5, ["Roll back a Helm release"]) in titles
    helm = next(c for c in found if c.metadata["slide"] == 5)
    assert "helm history checkout-api" in helm.content


def test_pandoc_html_has_its_title_and_sections() -> None:
    found = chunks("on-call.html")
    assert {c.metadata["title"] for c in found} == {"On-call"}
    assert ["On-call handbook", "Escalation"] in [c.metadata["heading_path"] for c in found]
