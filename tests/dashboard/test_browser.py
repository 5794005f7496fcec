"""The dashboard in a real browser (headless Chromium): every page loads and is
screenshotted at 1280x800, filters and a job's page work, each action changes the
tables and the page, the overview updates live, and CSRF and read-only refuse."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from tests.dashboard.browser import browser, served
from tests.dashboard.scene import Scene
from tests.support import wait_until
from venturi.dashboard import Dashboard
from venturi.models import JobStatus

pytestmark = pytest.mark.slow


@pytest.fixture
def chrome() -> Iterator[webdriver.Chrome]:
    with browser() as driver:
        yield driver


@pytest.fixture
def site(scene: Scene) -> Iterator[str]:
    # Live pages refresh rarely here, so no update replaces an element a test acts on.
    with served(Dashboard(scene.queue, refresh_seconds=600, page_size=5)) as url:
        yield url


def text_of(chrome: webdriver.Chrome, css: str) -> str:
    return str(chrome.find_element(By.CSS_SELECTOR, css).text)


def notice(chrome: webdriver.Chrome) -> str:
    return wait_until(lambda: _notice(chrome), 10, what="a notice on the page")


def _notice(chrome: webdriver.Chrome) -> str | None:
    """The notice's text, or None while there is none, or while the page it was found on
    is being replaced (the action's redirect; the element is then stale, or its node no
    longer belongs to the document): the next try reads the new page."""
    try:
        found = chrome.find_elements(By.ID, "notice")
        return str(found[0].text) if found else None
    except WebDriverException:
        return None


def test_every_page_loads_and_is_screenshotted(
    chrome: webdriver.Chrome, site: str, scene: Scene, tmp_path: Path
) -> None:
    pages = {
        "overview": ("/", "Overview"),
        "jobs": ("/jobs", "Jobs"),
        "job": (f"/jobs/{scene.ids['dead']}", "Job"),
        "dead": ("/dead", "Dead letters"),
        "workers": ("/workers", "Workers"),
        "kinds": ("/kinds", "Kinds: pauses, limits and fair share"),
        "schedules": ("/schedules", "Schedules"),
        "workflows": ("/workflows", "Workflows"),
        "workflow": (f"/workflows/{scene.workflow_id}", "Workflow"),
    }
    for name, (path, heading) in pages.items():
        chrome.get(site + path)
        assert text_of(chrome, "h1").startswith(heading), name
        assert chrome.get_window_size() == {"width": 1280, "height": 800}
        shot = tmp_path / f"{name}.png"
        assert chrome.save_screenshot(str(shot)), name
        assert shot.stat().st_size > 5000, f"{name}: an empty screenshot"


def test_filter_jobs_and_open_one(chrome: webdriver.Chrome, site: str, scene: Scene) -> None:
    chrome.get(site + "/jobs")
    Select(chrome.find_element(By.ID, "status")).select_by_value("dead")
    kind = chrome.find_element(By.ID, "kind")
    kind.send_keys("report")
    kind.send_keys(Keys.ENTER)
    wait_until(lambda: "status=dead" in chrome.current_url, 10, what="the filtered page")
    rows = chrome.find_elements(By.CSS_SELECTOR, "#jobs-table tbody tr[data-id]")
    assert [r.get_attribute("data-id") for r in rows] == [str(scene.ids["dead_report"])]
    rows[0].find_element(By.TAG_NAME, "a").click()
    wait_until(lambda: "/jobs/" in chrome.current_url, 10, what="the job's page")
    assert "disk full" in text_of(chrome, "#journal")
    chrome.get(site + "/jobs?find=invoice:7")
    rows = chrome.find_elements(By.CSS_SELECTOR, "#jobs-table tbody tr[data-id]")
    assert [r.get_attribute("data-id") for r in rows] == [str(scene.ids["pending"])]


def click(chrome: webdriver.Chrome, label: str) -> None:
    """Click the button and wait until its page has been replaced (the action's redirect)
    and the next one has loaded, so that a notice read next is the new page's, not the one
    the button was on. The page is marked before the click: a new page has a new window."""
    chrome.execute_script("window.pageBeforeClick = true;")
    chrome.find_element(By.XPATH, f"//button[normalize-space()='{label}']").click()
    wait_until(lambda: _replaced(chrome), 10, what=f"the page after {label!r}")


def _replaced(chrome: webdriver.Chrome) -> bool:
    """Whether the marked page is gone and its successor loaded. While the browser is
    between the two, a script or an element may fail to answer; the next try asks again."""
    try:
        return bool(
            chrome.execute_script(
                "return window.pageBeforeClick === undefined && document.readyState === 'complete';"
            )
        )
    except WebDriverException:
        return False


def test_each_action_changes_the_tables_and_the_page(
    chrome: webdriver.Chrome, site: str, scene: Scene
) -> None:
    ids = scene.ids
    chrome.get(f"{site}/jobs/{ids['pending']}")
    click(chrome, "Cancel job")
    assert notice(chrome) == f"cancelled {ids['pending']}"
    assert scene.status(ids["pending"]) is JobStatus.CANCELLED
    assert "cancelled" in text_of(chrome, "#job-status")

    chrome.get(f"{site}/jobs/{ids['completed']}")
    # Keyboard only: focus the button and press Enter.
    button = chrome.find_element(By.XPATH, "//button[normalize-space()='Requeue job']")
    button.send_keys(Keys.ENTER)
    assert notice(chrome) == f"requeued {ids['completed']}"
    assert scene.status(ids["completed"]) is JobStatus.PENDING

    chrome.get(f"{site}/jobs/{ids['scheduled']}")
    click(chrome, "Run now")
    assert notice(chrome).endswith("is due now")
    record = scene.queue.get(ids["scheduled"])
    assert record is not None and record.visible_at <= scene.queue.store.now()

    chrome.get(f"{site}/dead")
    click(chrome, "Requeue all dead mail jobs…")
    wait_until(lambda: chrome.find_elements(By.ID, "confirm"), 10, what="the confirmation")
    assert scene.status(ids["dead"]) is JobStatus.DEAD  # only asked so far
    chrome.find_element(By.ID, "confirm").click()
    assert notice(chrome) == "requeued 2 dead mail jobs"
    assert scene.status(ids["dead"]) is JobStatus.PENDING
    assert "bad address" not in str(chrome.find_element(By.TAG_NAME, "main").text)

    chrome.get(f"{site}/kinds")
    click(chrome, "Pause report")
    assert notice(chrome) == "paused report"
    assert scene.queue.paused() == {"report"}
    click(chrome, "Resume report")
    assert notice(chrome) == "resumed report"
    assert scene.queue.paused() == set()


def pending_shown(chrome: webdriver.Chrome) -> str:
    # Read in one script: the live update replaces the cell's element at any moment.
    return str(
        chrome.execute_script(
            "const cell = document.querySelector("
            '\'tr[data-kind="mail"] td[data-field="pending"]\');'
            "return cell ? cell.textContent.trim() : '';"
        )
    )


def test_the_overview_updates_live_and_can_be_paused(
    chrome: webdriver.Chrome, scene: Scene
) -> None:
    with served(Dashboard(scene.queue, refresh_seconds=0.3)) as site:
        watch_live_updates(chrome, site, scene)


def watch_live_updates(chrome: webdriver.Chrome, site: str, scene: Scene) -> None:
    chrome.get(site + "/")
    chrome.execute_script("window.sameDocument = true;")
    assert pending_shown(chrome) == "1"
    scene.queue.enqueue("mail", {"n": 10})
    wait_until(lambda: pending_shown(chrome) == "2", 15, what="the live update")
    toggle = chrome.find_element(By.ID, "live-toggle")
    toggle.click()
    assert toggle.get_attribute("aria-pressed") == "true"
    assert text_of(chrome, "#live-state") == "Live updates paused"
    scene.queue.enqueue("mail", {"n": 11})
    toggle.click()  # resuming refreshes at once
    wait_until(lambda: pending_shown(chrome) == "3", 15, what="the update after resuming")
    assert chrome.execute_script("return window.sameDocument === true;")  # never reloaded


def test_a_post_without_the_csrf_token_is_refused(
    chrome: webdriver.Chrome, site: str, scene: Scene
) -> None:
    chrome.get(f"{site}/jobs/{scene.ids['pending']}")
    chrome.execute_script(
        "document.querySelectorAll('input[name=csrf_token]').forEach(e => e.remove());"
    )
    click(chrome, "Cancel job")
    wait_until(lambda: "CSRF" in chrome.page_source, 10, what="the refusal")
    assert scene.status(scene.ids["pending"]) is JobStatus.PENDING


def test_read_only_mode_refuses_actions(
    chrome: webdriver.Chrome, scene: Scene, tmp_path: Path
) -> None:
    with served(Dashboard(scene.queue, read_only=True)) as site:
        chrome.get(f"{site}/jobs/{scene.ids['pending']}")
        button = chrome.find_element(By.XPATH, "//button[normalize-space()='Cancel job']")
        assert not button.is_enabled()
        assert text_of(chrome, "#read-only") == "read-only"
        chrome.save_screenshot(str(tmp_path / "read-only.png"))
        chrome.execute_script(
            "const f = document.createElement('form'); f.method = 'post';"
            f"f.action = '/jobs/{scene.ids['pending']}/cancel';"
            "document.body.appendChild(f); f.submit();"
        )
        wait_until(lambda: "read-only" in chrome.page_source, 10, what="the refusal")
        assert "actions are off" in chrome.page_source
    assert scene.status(scene.ids["pending"]) is JobStatus.PENDING
