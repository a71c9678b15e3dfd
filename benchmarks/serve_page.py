"""The page of ``elmo serve``: its weight and how soon a browser shows something, measured in headless Chromium.

Starts ``elmo serve`` (the shipped demo biLM, fp32, no API key) on a free loopback port and opens the page in the
system's headless Chromium (Debian's ``chromium`` + ``chromium-driver``, through selenium) ``--rounds`` times, the
browser's cache cleared before each load. The page shows the demo's "bank" example as it loads (6 sentences, 62
occurrences, the top layer), so the time to the first heatmap covers the whole path: the page's files,
``/page/setup.json``, ``GET /v1/model``, ``POST /v1/embed`` (every layer), the cosines and the drawing. Per round it
prints the bytes of the page's files (HTML, CSS, JavaScript, icon, set-up; as sent: the service does not compress),
the bytes of the API answers, the first contentful paint and the first heatmap (the page's own
``performance.mark("elmo:first-heatmap")``), both from the start of navigation; then the medians.

    PYTHONPATH=src .venv/bin/python benchmarks/serve_page.py               # about 30 s
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

from machine import machine_line
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as DriverService
from selenium.webdriver.support.ui import WebDriverWait

MEASURE = """
const paint = performance.getEntriesByName("first-contentful-paint")[0];
const heatmap = performance.getEntriesByName("elmo:first-heatmap")[0];
const navigation = performance.getEntriesByType("navigation")[0];
const resources = performance.getEntriesByType("resource");
const bytes = (entries) => entries.reduce((sum, e) => sum + e.encodedBodySize, 0);
return {
  paint: paint.startTime, heatmap: heatmap.startTime,
  page: navigation.encodedBodySize + bytes(resources.filter((e) => new URL(e.name).pathname.startsWith("/page/"))),
  api: bytes(resources.filter((e) => new URL(e.name).pathname.startsWith("/v1/"))),
  files: 1 + resources.filter((e) => new URL(e.name).pathname.startsWith("/page/")).length,
};
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_service(port: int) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "elmo", "serve", "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
                if response.status == 200:
                    return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("elmo serve was not ready after 120 s")


def browser() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1400", "--no-first-run", "--disable-extensions"):
        options.add_argument(argument)
    return webdriver.Chrome(service=DriverService(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                            options=options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    port = free_port()
    service = start_service(port)
    driver = browser()
    try:
        print(machine_line())
        print(f"chromium: {driver.capabilities.get('browserVersion')}, headless; elmo serve: the demo biLM, fp32, "
              f"loopback; {os.cpu_count()} cores")
        rows = []
        print(f"{'round':>5} {'page files':>10} {'page bytes':>10} {'API bytes':>10} {'first paint ms':>14} "
              f"{'first heatmap ms':>16}")
        for round_ in range(args.rounds):
            driver.get("about:blank")
            driver.execute_cdp_cmd("Network.clearBrowserCache", {})
            driver.get(f"http://127.0.0.1:{port}/")
            WebDriverWait(driver, 60).until(
                lambda d: d.execute_script("return performance.getEntriesByName('elmo:first-heatmap').length"))
            row = driver.execute_script(MEASURE)
            rows.append(row)
            print(f"{round_ + 1:>5} {row['files']:>10} {row['page']:>10,} {row['api']:>10,} {row['paint']:>14.0f} "
                  f"{row['heatmap']:>16.0f}")
        print(f"{'median':>5} {rows[0]['files']:>10} {statistics.median(r['page'] for r in rows):>10,.0f} "
              f"{statistics.median(r['api'] for r in rows):>10,.0f} "
              f"{statistics.median(r['paint'] for r in rows):>14.0f} "
              f"{statistics.median(r['heatmap'] for r in rows):>16.0f}")
    finally:
        driver.quit()
        service.send_signal(signal.SIGTERM)
        service.wait(60)


if __name__ == "__main__":
    main()
