"""The layer reads as modules of one idea each: none over 500 lines (issue 27's bar, kept
by a test so that a merge that grows one past it fails here, not in a later review)."""

from __future__ import annotations

from pathlib import Path

LAYER = Path(__file__).resolve().parents[2] / "layers" / "knowledge" / "knowledge"
MAX_LINES = 500


def test_no_module_of_the_layer_is_over_500_lines() -> None:
    modules = sorted(LAYER.rglob("*.py"))
    assert len(modules) > 100  # the layer was found
    sizes = {
        p.relative_to(LAYER).as_posix(): len(p.read_text("utf-8").splitlines()) for p in modules
    }
    over = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert over == {}, f"split these modules (at most {MAX_LINES} lines each): {over}"
