"""Add a part to an Office Open XML file (DOCX, PPTX, XLSX) the way Office writes one.

python-docx and python-pptx cannot write some parts real files have (footnotes, SmartArt
diagram data), so a test adds them: ``with_part`` copies the package, adds the part,
its content type and its relationship from ``owner_rels``, and applies ``edits`` (part
name -> function of its bytes) to the other parts on the way.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Mapping

__all__ = ["with_part"]


def with_part(
    package: bytes,
    *,
    name: str,
    content: str,
    content_type: str,
    owner_rels: str,
    rel_id: str,
    rel_type: str,
    target: str,
    edits: Mapping[str, Callable[[bytes], bytes]] | None = None,
) -> bytes:
    """``package`` with the part ``name`` (``content``) related from ``owner_rels`` as
    ``rel_id`` of ``rel_type`` (``target``: the path relative to the owner)."""
    relationship = f'<Relationship Id="{rel_id}" Type="{rel_type}" Target="{target}"/>'
    override = f'<Override PartName="/{name}" ContentType="{content_type}"/>'
    changes: dict[str, Callable[[bytes], bytes]] = {
        owner_rels: lambda raw: raw.replace(
            b"</Relationships>", relationship.encode() + b"</Relationships>"
        ),
        "[Content_Types].xml": lambda raw: raw.replace(
            b"</Types>", override.encode() + b"</Types>"
        ),
        **(edits or {}),
    }
    source = zipfile.ZipFile(io.BytesIO(package))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as written:
        for info in source.infolist():
            raw = source.read(info)
            change = changes.get(info.filename)
            written.writestr(info.filename, raw if change is None else change(raw))
        written.writestr(name, content)
    return out.getvalue()
