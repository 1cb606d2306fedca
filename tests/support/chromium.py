"""Debian's Chromium under Selenium for the browser tests of ``kb serve``'s pages.

Chromium and ChromeDriver come from ``tools/browser/install.sh`` (``make test`` runs it);
a missing browser is a failure, not a skip. The browser's console is kept (``severe``
entries are the pages' JavaScript errors), so a test can fail on a script error.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

__all__ = ["CHROMEDRIVER", "CHROMIUM", "chromium", "wait"]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def chromium(
    profile: Path, *, width: int = 1280, height: int = 900, flags: Sequence[str] = ()
) -> webdriver.Chrome:
    """A headless Chromium with its own profile folder and a window of ``width`` x
    ``height``; ``flags``: more of Chromium's command-line switches."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if shutil.which(p) is None]
    assert not missing, f"missing {missing}: run tools/browser/install.sh (make test does)"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
        *flags,
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))


def wait(driver: WebDriver, seconds: float = 30.0) -> WebDriverWait[WebDriver]:
    # A condition that reads a list while the page renders it again finds an element
    # already replaced: that is "not yet", so the wait polls again.
    return WebDriverWait(driver, seconds, ignored_exceptions=(StaleElementReferenceException,))
