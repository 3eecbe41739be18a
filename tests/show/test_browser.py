"""``collc show`` pages in a real browser: Debian's headless Chromium driven by Selenium through the
system chromedriver (Selenium Manager downloads nothing).  Skips, with one reason, only where
chromium or chromedriver is missing (.ci/run installs them)."""

from __future__ import annotations

import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collc.cli import main
from tests.show._pages import show

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                                reason="chromium and chromedriver are not installed (apt-get install chromium "
                                       "chromium-driver)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM or ""
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1400"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def torus_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("browser")
    assert main(["build", "--topology", "torus:4x4", "--algorithm", "swing", "--collective", "allreduce",
                 "-o", str(d / "s.xml")]) == 0
    return show(d / "s.xml", "torus:4x4", d / "s.html", "--no-others")


def _open(driver: Any, page: Path) -> None:
    driver.get_log("browser")        # drop what earlier pages logged
    driver.get(page.as_uri())
    driver.execute_script("return document.readyState")
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert not errors, errors


def _busiest(driver: Any) -> list[int]:
    return list(driver.execute_script(
        "var gd = document.getElementById('fabric');"
        "return gd.data.filter(function (t) { return t.name === 'busiest'; })[0].customdata;"))


def _goto(driver: Any, frame: str) -> None:
    driver.execute_async_script(
        "var done = arguments[arguments.length - 1];"
        "Plotly.animate('fabric', [arguments[0]], {mode: 'immediate', frame: {duration: 0, redraw: true},"
        " transition: {duration: 0}}).then(function () { done(true); });", frame)


def test_links_rows_and_slider(browser: Any, torus_page: Path) -> None:
    _open(browser, torus_page)
    nlinks = browser.execute_script(
        "return document.getElementById('fabric').data.filter(function (t) { return t.name === 'links'; })[0]"
        ".x.length;")
    assert nlinks == 64 == int(browser.find_element("tag name", "body").get_attribute("data-links"))
    # the timeline: 32 tbs per rank on rank 0; every rank's rows when "all" is chosen
    rows = int(browser.find_element("tag name", "body").get_attribute("data-timeline-rows"))
    assert browser.find_element("tag name", "body").get_attribute("data-timeline-shown") == "32"
    from selenium.webdriver.support.ui import Select
    Select(browser.find_element("id", "rank-filter")).select_by_value("all")
    shown = browser.execute_script(
        "var s = {}; document.getElementById('timeline').data.forEach(function (t) {"
        " (t.y || []).forEach(function (y) { s[y] = 1; }); }); return Object.keys(s).length;")
    assert rows == 16 * 32 and shown == rows
    # moving the slider changes which link is marked busiest
    nsteps = int(browser.find_element("tag name", "body").get_attribute("data-steps"))
    seen, colours = set(), set()
    for k in range(nsteps):
        _goto(browser, f"step {k}")
        seen.add(tuple(_busiest(browser)))
        colours.add(tuple(browser.execute_script(
            "return document.getElementById('fabric').data.filter(function (t) { return t.name === 'links'; })[0]"
            ".marker.color;")))
    assert len(colours) > 1 and len(seen) >= 1     # each step colours the links by its own bytes
    _goto(browser, "all steps")                      # the sum over all steps: every link Swing uses
    assert len(set(browser.execute_script(
        "return document.getElementById('fabric').data.filter(function (t) { return t.name === 'links'; })[0]"
        ".marker.color;"))) >= 1
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def _colours(png: bytes) -> int:
    """Distinct RGB(A) colours of a PNG (8-bit, non-interlaced, as Chromium writes it)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    ctype = 6
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, ctype = struct.unpack(">I", body[:4])[0], body[9]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 4 if ctype == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    seen: set[bytes] = set()
    i = 0
    while i < len(raw):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp * 7):
            seen.add(bytes(line[x:x + 3]))
        prev = line
        i += 1 + stride * 7 if False else 1 + stride
    return len(seen)


def test_screenshot_is_not_blank(browser: Any, torus_page: Path) -> None:
    _open(browser, torus_page)
    png = browser.get_screenshot_as_png()
    assert _colours(png) > 20
