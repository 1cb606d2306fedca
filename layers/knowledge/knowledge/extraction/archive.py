"""Office files are zip archives: check one before a library opens it.

``check_office_archive`` decompresses every member in 1 MiB steps and counts the bytes
it actually gets (the sizes a zip *declares* can lie), stopping as soon as the total
passes ``limits.max_unpacked_bytes``. Memory stays at one step; time is bounded by the
cap. Over the cap, an archive that expands more than ``_BOMB_RATIO`` times its size is an
``archive bomb``, a merely big one is ``too large``. A password-protected Office file is
not a zip but an OLE container: that is said as such.

``open_office_package`` is how docx, pptx and xlsx open their file: the archive check,
then the library (imported on first use), with what it raises on a damaged package
said as ``corrupt``; ``core_title`` reads the title from the core properties.
"""

from __future__ import annotations

import io
import logging
import zipfile
import zlib
from collections.abc import Callable
from typing import IO, Any, TypeVar

from knowledge.core.errors import ExtractionError
from knowledge.extraction.base import (
    REASON_ARCHIVE_BOMB,
    ExtractionLimits,
    corrupt,
    human_size,
    too_large,
)

__all__ = ["check_office_archive", "core_title", "open_office_package"]

T = TypeVar("T")
_LOG = logging.getLogger("knowledge.extraction")
# What the libraries raise on a damaged package: lxml's XMLSyntaxError is a SyntaxError,
# a missing part a KeyError.
_UNREADABLE: tuple[type[Exception], ...] = (KeyError, ValueError, SyntaxError)

_STEP = 1024 * 1024
_MAX_MEMBERS = 10_000
# Office XML compresses about 5-20x; a bomb, hundreds or thousands of times.
_BOMB_RATIO = 100
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def check_office_archive(data: bytes, limits: ExtractionLimits, kind: str) -> None:
    """Raise ``ExtractionError`` unless ``data`` is a zip that unpacks within the limits."""
    if data.startswith(_OLE_MAGIC):
        raise corrupt(
            f"not a {kind} zip package but an OLE container: a password-protected (encrypted)"
            " or legacy Office file; remove the password or save it as ." + kind
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError) as exc:
        raise corrupt(f"not a valid {kind} file (zip: {exc})") from exc
    with archive:
        members = archive.infolist()
        if len(members) > _MAX_MEMBERS:
            raise ExtractionError(
                f"{REASON_ARCHIVE_BOMB}: {len(members)} files in the archive "
                f"(at most {_MAX_MEMBERS})"
            )
        cap = limits.max_unpacked_bytes
        total = 0
        for member in members:
            try:
                with archive.open(member) as stream:
                    while step := stream.read(_STEP):
                        total += len(step)
                        if total > cap:
                            raise _over_cap(len(data), cap)
            except ExtractionError:
                raise
            except RuntimeError as exc:  # an encrypted member
                raise corrupt(f"encrypted zip member '{member.filename}'") from exc
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as exc:
                raise corrupt(f"damaged zip member '{member.filename}' ({exc})") from exc


def _over_cap(packed: int, cap: int) -> ExtractionError:
    if cap >= _BOMB_RATIO * max(packed, 1):
        return ExtractionError(
            f"{REASON_ARCHIVE_BOMB}: {human_size(packed)} expands to more than "
            f"{human_size(cap)} (over {cap // max(packed, 1)}x)"
        )
    return too_large(f"more than {human_size(cap)} uncompressed")


def open_office_package(
    data: bytes,
    limits: ExtractionLimits,
    kind: str,
    description: str,
    load: Callable[[], tuple[Callable[[IO[bytes]], T], tuple[type[Exception], ...]]],
    *,
    reason: str | None = None,
) -> T:
    """Check the archive, then open it with the opener ``load`` returns (``load`` imports
    the library, so it is imported only when such a file comes); the opener's errors
    (``KeyError``, ``ValueError``, ``SyntaxError`` and those ``load`` names) are
    ``corrupt``: "not a readable <description>" with the library's error, or ``reason``
    when given (a plain sentence for users; the library's error is then logged only)."""
    check_office_archive(data, limits, kind)
    opener, errors = load()
    try:
        return opener(io.BytesIO(data))
    except (*_UNREADABLE, *errors) as exc:
        if reason is not None:
            _LOG.warning("the %s library could not open a document", kind, exc_info=exc)
            raise corrupt(reason) from exc
        raise corrupt(f"not a readable {description} ({type(exc).__name__}: {exc})") from exc


def core_title(properties: Any) -> str | None:
    """The title of the package's core properties, or None when it is blank."""
    return (properties.title or "").strip() or None
