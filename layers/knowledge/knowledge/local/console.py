"""The knowledge console's files, served by ``kb serve`` under ``/console/``.

The console is static pages (``static/console/``: HTML, JavaScript modules, one style
sheet; no build step) that talk to the public HTTP API only, so the same files are
published in front of the deployed stack (``knowledge.aws.console_site``). Which request
path is which file is decided once, in ``knowledge.service.console``, for both; ``kb
serve`` answers the ``config.json`` the package ships (no sign-in, same origin).
"""

from __future__ import annotations

from knowledge.service.console import CONSOLE_PATH, console_file

__all__ = ["CONSOLE_PATH", "console_file"]
