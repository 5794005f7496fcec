"""Driving the system's Chromium (Debian's ``chromium`` and ``chromium-driver``) headless
with Selenium, against a dashboard served by wsgiref in a thread."""

from __future__ import annotations

import os
import shutil
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from venturi.dashboard import Dashboard

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
DRIVER = "chromedriver"


def chromium_paths() -> tuple[str, str]:
    """The browser and its driver; under CI (CI=true) a missing one fails the test,
    elsewhere it skips it (install them with apt-get install chromium chromium-driver)."""
    browser = next((p for p in CHROMIUM if os.path.exists(p)), None)
    driver = shutil.which(DRIVER) or (
        "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None
    )
    if browser is None or driver is None:
        missing = "chromium" if browser is None else "chromium-driver"
        message = f"{missing} is not installed (apt-get install -y chromium chromium-driver)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return browser, driver


@contextmanager
def browser() -> Iterator[webdriver.Chrome]:
    binary, driver = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in (
        "--headless=new",
        "--window-size=1280,800",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(flag)
    chrome = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    try:
        chrome.set_window_size(1280, 800)
        yield chrome
    finally:
        chrome.quit()


class _Threading(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Silent(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def served(app: Dashboard) -> Iterator[str]:
    """``app`` served on a free local port; yields its base URL."""
    server = make_server("127.0.0.1", 0, app, _Threading, _Silent)
    thread = threading.Thread(target=server.serve_forever, name="dashboard-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
