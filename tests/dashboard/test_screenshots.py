"""The documentation's dashboard screenshots, taken in headless Chromium from a queue
with jobs in every state. Every run takes and checks them in a temporary directory;
with ``VENTURI_DOCS_SCREENSHOTS=1`` they are also written to docs/_static/screenshots
(commit them when the pages change), so an ordinary run leaves the tree clean."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from tests.dashboard.browser import browser, served
from tests.dashboard.scene import Scene
from venturi.dashboard import Dashboard

pytestmark = pytest.mark.slow

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "_static" / "screenshots"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REGENERATE_ENV = "VENTURI_DOCS_SCREENSHOTS"


def test_overview_and_job_pages_are_taken_for_the_docs(scene: Scene, tmp_path: Path) -> None:
    pages = {
        "dashboard-overview.png": ("/", "Overview"),
        "dashboard-job.png": (f"/jobs/{scene.ids['dead']}", "Job"),
    }
    app = Dashboard(scene.queue, allow_anonymous=True)
    with served(app) as url, browser() as chrome:
        chrome.set_window_size(1280, 900)
        for name, (path, heading) in pages.items():
            chrome.get(url + path)
            assert chrome.find_element(By.CSS_SELECTOR, "h1").text.startswith(heading), name
            shot = tmp_path / name
            assert chrome.save_screenshot(str(shot)), name
            data = shot.read_bytes()
            assert data.startswith(PNG_SIGNATURE), f"{name} is not a PNG"
            assert len(data) > 5000, f"{name}: an empty screenshot"
    if os.environ.get(REGENERATE_ENV) == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for name in pages:
            shutil.copyfile(tmp_path / name, SCREENSHOTS / name)
