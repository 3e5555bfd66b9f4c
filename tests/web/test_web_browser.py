"""The dashboard in headless Chromium (Debian's /usr/bin/chromium, driven by Playwright without a
downloaded browser) against a real `gpuhealth serve` replaying a generated trace in real time.
Screenshots go to tests/web/artifacts/ (git-ignored); with GPUHEALTH_UPDATE_SCREENSHOT=1 the
1280 px one also replaces docs/img/dashboard.png (the README's picture)."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from web_fakes import ARTIFACTS, H100_MODEL, REPO, record_bundle, serve_process, tool, write_fleet_trace

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]
VIEWPORTS = [(375, 812), (1280, 800)]


def until(page, expression: str, timeout: float) -> None:
    """Poll a page expression (page.wait_for_function evaluates strings, which the page's CSP forbids)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {expression}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    trace = write_fleet_trace(tmp / "fleet.jsonl", gpus=8, seconds=900, moving=True)
    bundle = record_bundle(tmp / "bundle")
    with serve_process(tmp, "--source", f"replay:{trace}", "--check-from", str(bundle), "--check-rate", "1s") as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    executable = tool(CHROMIUM)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # the test extra installs it
        pytest.fail("playwright is not installed: pip install -e '.[test]'")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.mark.parametrize("width,height", VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def test_dashboard(served, browser, width, height):
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": width, "height": height})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: problems.append(f"off-site request {r.url}") if not r.url.startswith(served)
            else None)
    try:
        page.goto(served + "/")
        # the trace's eight GPUs, each with its four charts
        until(page, "document.querySelectorAll('.gpu-card').length === 8", 15)
        # charts draw after the cards appear; on a loaded machine that takes a moment
        until(page, "document.querySelectorAll('.gpu-card .chart-plot canvas').length === 32", 15)
        assert page.locator(".gpu-card[data-gpu='7'] .gpu-title").inner_text() == "GPU 7"
        until(page, "document.getElementById('verdict').textContent !== '…'", 10)
        # a chart moves when new samples arrive
        chart = ".gpu-card[data-gpu='0'] .chart[data-metric='temperature_c'] .chart-plot"
        until(page, f"Number(document.querySelector(\"{chart}\").dataset.lastT || 0) > 0", 10)
        before = float(page.get_attribute(chart, "data-last-t"))
        points = int(page.get_attribute(chart, "data-points"))
        until(page, f"Number(document.querySelector(\"{chart}\").dataset.lastT) > {before}", 10)
        assert int(page.get_attribute(chart, "data-points")) > points
        assert page.locator("#live").inner_text() == "live"
        assert not page.locator("#token-form").is_visible()  # loopback: no token asked for
        # one button: Check now shows the findings with their fixes
        page.click("#check-now")
        page.wait_for_selector("#findings .finding", timeout=60000)
        findings = page.locator("#findings").inner_text()
        assert "GH301" in findings and "fix" in findings
        assert page.locator("#findings .finding .fix code").count() >= 1
        until(page, "document.getElementById('verdict').textContent === 'BROKEN'", 10)
        until(page, f"document.querySelector(\".gpu-card[data-gpu='0'] .gpu-model\")"
                               f".textContent.includes('{H100_MODEL}')", 10)
        # the Xid alert from the trace is in the feed
        assert "xid[79]" in page.locator("#alerts").inner_text()
        # usable at this width: nothing wider than the viewport, the button in view
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        box = page.locator("#check-now").bounding_box()
        assert box and box["x"] + box["width"] <= width and box["height"] >= 40
        page.evaluate("window.scrollTo(0, 0)")
        shot = ARTIFACTS / f"dashboard-{width}x{height}.png"
        page.screenshot(path=str(shot), full_page=width == 1280)
        if width == 1280 and os.environ.get("GPUHEALTH_UPDATE_SCREENSHOT"):  # refresh the README's picture
            (REPO / "docs" / "img").mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, REPO / "docs" / "img" / "dashboard.png")
    finally:
        page.close()
    assert problems == []
