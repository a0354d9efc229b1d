"""The shared `browser` fixture drives Debian's Chromium through Playwright: a page it renders runs
its script (so the rating page and the Prefect UI tests can rely on it)."""

import pytest


@pytest.mark.slow
def test_browser_renders_and_runs_script(browser):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_content("<p id=out>0</p><script>document.getElementById('out').textContent = 6 * 7"
                         "</script>")
        assert page.locator("#out").text_content() == "42"
    finally:
        context.close()
