#!/usr/bin/env bash
# Debian's Chromium and ChromeDriver for the browser tests of the playground and the console
# (tests/integration/local/test_playground_browser.py, test_console_browser.py; tests/support/chromium.py).
# Does nothing when both are present.
set -euo pipefail
if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    SUDO=sudo
else
    SUDO=
fi
echo "installing Debian chromium and chromium-driver for the browser test ..." >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
test -x /usr/bin/chromium && test -x /usr/bin/chromedriver
