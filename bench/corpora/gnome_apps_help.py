"""A fourth Korean help-pages known-item benchmark: the Korean help of GNOME applications.

Debian ships each GNOME application's user manual with the application (Mallard ``.page``
XML under ``usr/share/help/ko/<app>/``, translated by the GNOME Korean team): text
editor, image viewer, document viewer, archive manager, calculator, system monitor,
disk usage analyser, terminal, video player, web browser, webcam, disc burner, hex
editor, clocks, logs, music, virtual machines and two games. Unlike GNOME Help (the
desktop, ``bench/corpora/gnome_help.py``) these manuals are mostly about one program's menus,
dialogs, settings and keyboard shortcuts: UI names, compounds and terms of art, the kind
of text where whitespace words were seen to beat morphemes.

``bench/setup.sh`` downloads the packages (``PACKAGES``) with ``apt-get download`` and
unpacks only their ``usr/share/help/ko/`` with ``dpkg-deb`` into
``bench/data/debs/gnome-apps-help-ko/`` (no root install). Pages are turned into
documents and queries exactly as ``bench/corpora/gnome_help.py`` does (the page's title is the
query; the page is indexed without its title and ``<info>``; titles shared by two pages
give no query; untranslated pages stay as distractors), all applications in one
collection, as a team would index every manual it uses.

Built corpora are cached under ``bench/data/gnome-apps-help-ko/``.
"""

from __future__ import annotations

from pathlib import Path

from bench.common.environment import DATA_DIR
from bench.corpora.gnome_help import write_help_pages
from bench.corpora.manpages import Corpus, read_corpus

__all__ = ["HELP_ROOT", "PACKAGES", "build", "load_gnome_apps_help"]

PACKAGES = (
    "baobab", "brasero-common", "cheese-common", "eog", "epiphany-browser-data",
    "evince-common", "file-roller", "gedit-common", "ghex", "gnome-boxes",
    "gnome-calculator", "gnome-clocks", "gnome-logs", "gnome-mines", "gnome-music",
    "gnome-sudoku", "gnome-system-monitor", "gnome-terminal-data", "totem-common",
)  # fmt: skip
"""Debian packages whose Korean help is in the set (bench/setup.sh keeps the same list)."""
HELP_ROOT = DATA_DIR / "debs" / "gnome-apps-help-ko" / "usr" / "share" / "help" / "ko"
EXCLUDED = ("gnome-help", "system-admin-guide")
"""Guides of ``gnome-user-docs``: the gnome-help-ko set (never installed here anyway)."""
NAME = "gnome-apps-help-ko"


def build(target: Path, help_root: Path = HELP_ROOT) -> int:
    """Write the set from ``help_root`` (``<app>/*.page``) into ``target``; the number of
    queries."""
    files = sorted(
        path
        for guide in sorted(help_root.iterdir() if help_root.is_dir() else [])
        if guide.name not in EXCLUDED
        for path in guide.glob("*.page")
    )
    if not files:
        raise SystemExit(f"no GNOME applications' help under {help_root}: run bench/setup.sh")
    return write_help_pages(target, files, NAME)


def load_gnome_apps_help() -> Corpus:
    """The gnome-apps-help-ko corpus, built from the unpacked packages if missing."""
    root = DATA_DIR / NAME
    if not (root / "queries.jsonl").is_file():
        build(root)
    builder = "bench/corpora/gnome_apps_help.py from the Korean help of 19 GNOME applications"
    return read_corpus(root, NAME, None, builder=builder)
