"""Without Chromium the browser tests skip on a developer's machine but fail under CI."""

from __future__ import annotations

import pytest

from tests.dashboard import browser


def test_a_missing_browser_fails_under_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(browser, "CHROMIUM", ("/nonexistent/chromium",))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="chromium is not installed"):
        browser.chromium_paths()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        browser.chromium_paths()
