"""The file types the product reads, and those it names and refuses: pure data, no reader.

``SOURCE_TYPE_BY_EXTENSION`` is every extension ``knowledge.extraction`` reads and the
source type it reads it as (the ``format`` metadata of its chunks); ``REFUSED_FORMATS``
the types recognised and refused with a reason; ``TEXT_FILE_NAMES`` the conventional
files without an extension read as text. ``DOCUMENT_PATTERNS`` (the default
``IndexOptions.file_patterns``) selects all three, so a refused file is listed as a
problem instead of being ignored without a word. The readers are
``knowledge.extraction``'s; this module only names the types, so the core's options need
no extraction code.
"""

from __future__ import annotations

__all__ = ["DOCUMENT_PATTERNS", "REFUSED_FORMATS", "SOURCE_TYPE_BY_EXTENSION", "TEXT_FILE_NAMES"]

SOURCE_TYPE_BY_EXTENSION: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".csv": "csv",
    ".html": "html",
    ".htm": "html",
    # Data and configuration a team keeps next to its documents: text, read as text.
    ".json": "text",
    ".yaml": "text",
    ".yml": "text",
    ".xml": "text",
    ".toml": "text",
    # Markup a repository keeps its docs in, read as the text it is (markup and all).
    ".rst": "rst",
    ".adoc": "asciidoc",
}

TEXT_FILE_NAMES: tuple[str, ...] = (
    "README",
    "LICENSE",
    "LICENCE",
    "COPYING",
    "NOTICE",
    "AUTHORS",
    "CHANGELOG",
    "CHANGES",
    "CONTRIBUTING",
    "INSTALL",
    "TODO",
    "Makefile",
    "Dockerfile",
)

# Recognised, so that they are listed and reported, but not extracted: no library in the
# layer reads them (and the layer takes no heavy one for them).
REFUSED_FORMATS: dict[str, str] = {
    ".doc": "legacy Word .doc; convert to .docx",
    ".xls": "legacy Excel .xls; convert to .xlsx",
    ".ppt": "legacy PowerPoint .ppt; convert to .pptx",
    ".odt": "OpenDocument text .odt; save it as .docx",
    ".ods": "OpenDocument spreadsheet .ods; save it as .xlsx",
    ".odp": "OpenDocument presentation .odp; save it as .pptx",
    ".rtf": "Rich Text Format .rtf; save it as .docx",
    ".epub": "EPUB e-book .epub; convert it to .pdf or .html",
    ".eml": "e-mail message .eml; save it as .pdf or .txt",
}

DOCUMENT_PATTERNS: tuple[str, ...] = (
    *(f"*{extension}" for extension in (*SOURCE_TYPE_BY_EXTENSION, *REFUSED_FORMATS)),
    *TEXT_FILE_NAMES,
)
"""The default file patterns: every supported type, plus the types refused with a reason
(legacy Office, OpenDocument, ...) so that they show up as problems ("convert to ...")
instead of being silently ignored, plus the conventional text files without extension."""
