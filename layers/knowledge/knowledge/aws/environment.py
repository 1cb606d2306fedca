"""Reading a Lambda function's settings from its environment variables.

One reader for every function's settings (``knowledge.aws.settings``,
``knowledge.aws.dispatch``): a blank variable counts as unset, and a value that is not a
number names the variable in a ``ConfigurationError``. Stdlib only, so the dispatcher's
cold path stays lean.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from knowledge.core.errors import ConfigurationError

__all__ = ["EnvironmentReader"]


class EnvironmentReader:
    """The variables of ``env`` (default ``os.environ``), read as text or numbers."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = os.environ if env is None else env

    def get(self, name: str) -> str | None:
        """The stripped value, ``None`` when unset or blank."""
        value = self._env.get(name)
        return value.strip() if value is not None and value.strip() else None

    def integer(self, name: str, default: int) -> int:
        text = self.get(name)
        if text is None:
            return default
        try:
            return int(text)
        except ValueError:
            raise ConfigurationError(f"{name}: {text!r} is not an integer") from None

    def number(self, name: str, default: float) -> float:
        text = self.get(name)
        if text is None:
            return default
        try:
            value = float(text)
        except ValueError:
            raise ConfigurationError(f"{name}: {text!r} is not a number") from None
        if not math.isfinite(value):
            raise ConfigurationError(f"{name}: {text!r} is not a finite number")
        return value
