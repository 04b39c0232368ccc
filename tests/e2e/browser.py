"""Headless Chromium for the dashboard tests: Debian's ``chromium`` and ``chromedriver``
driven by selenium's Python client (no Selenium Manager: CI and this machine are offline),
and where the screenshots go (``$ZEROFORGE_TEST_OUTPUT`` or ``test-output/`` in the repo)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
REPO = Path(__file__).resolve().parents[2]


def output_dir() -> Path:
    """Where tests leave files for a person to look at."""
    out = Path(os.environ.get("ZEROFORGE_TEST_OUTPUT") or REPO / "test-output")
    out.mkdir(parents=True, exist_ok=True)
    return out


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 4200) -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        assert Path(path).exists(), f"{path} missing: install Debian's chromium and " \
                                    "chromium-driver (scripts/test does)"
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", f"--window-size={width},{height}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def chart_max(driver, chart_id: str) -> float:
    """The largest y value plotly holds for the chart (0 when it has none)."""
    return float(driver.execute_script(
        """const el = document.getElementById('chart-' + arguments[0]);
           if (!el || !el.data) return 0;
           let m = 0;
           for (const tr of el.data) for (const v of (tr.y || [])) if (v > m) m = v;
           return m;""", chart_id))


def wait_for_chart(driver, chart_id: str, timeout: float = 120.0) -> float:
    deadline = time.monotonic() + timeout
    while True:
        top = chart_max(driver, chart_id)
        if top > 0:
            return top
        assert time.monotonic() < deadline, \
            f"chart {chart_id} still empty after {timeout:.0f}s; page state: " + str(
                driver.execute_script("return {polls: window.zfDashboard.polls, errors: "
                                      "window.zfDashboard.errors, last: "
                                      "window.zfDashboard.lastError}"))
        time.sleep(0.5)


def console_errors(driver) -> list[str]:
    return [f"{e.get('level')}: {e.get('message')}" for e in driver.get_log("browser")
            if e.get("level") == "SEVERE"]
