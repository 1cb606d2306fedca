"""The benchmarks, one command per module: ``python -m bench <file name>`` (``_`` or ``-``).

Each module's docstring starts with its one-line help; it exposes ``add_arguments(parser)``
and ``main(args)`` and writes ``bench/results/<name>.json`` (``bench.common.environment.
write_result``). ``bench/__main__.py`` finds the commands from the files.
"""

from __future__ import annotations

__all__: list[str] = []
