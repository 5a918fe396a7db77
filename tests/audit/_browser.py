"""Open a report page in headless Chromium: the probes' values, the console errors and a
full-page screenshot. Skips without Chromium, and fails instead under ``CI=true``."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.audit.cdp import Browser, find_chromium


def chromium() -> str:
    exe = find_chromium()
    if exe is None:
        msg = "headless Chromium is not installed (apt-get install chromium; scripts/services.sh does it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return exe


def open_page(page: Path, probe: str, *, clicks: tuple[str, ...] = (), after: str = "") -> dict[str, Any]:
    """Load ``page``, evaluate ``probe`` (a JS expression returning JSON text), click each
    selector in ``clicks``, evaluate ``after``; returns {"probe", "after", "errors", "png"}."""
    b = Browser(chromium())
    try:
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            b.call(domain)
        b.call("Page.navigate", url=page.as_uri())
        b.wait_for("Page.loadEventFired")
        info = json.loads(b.call("Runtime.evaluate", returnByValue=True, expression=probe)["result"]["value"])
        shot = b.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        for sel in clicks:
            b.call("Runtime.evaluate", expression=f"document.querySelector({json.dumps(sel)}).click()")
        later = json.loads(b.call("Runtime.evaluate", returnByValue=True, expression=after)["result"]["value"]) if after else None
        errors = b.errors()
    finally:
        b.close()
    return {"probe": info, "after": later, "errors": errors, "png": base64.b64decode(shot["data"])}


def painted(png: bytes, colour: str, tolerance: int = 40) -> int:
    """How many pixels of the screenshot are near ``colour`` (#rrggbb)."""
    import io

    from PIL import Image

    want = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    img = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(n for n, c in img.getcolors(maxcolors=img.width * img.height)
               if all(abs(c[k] - want[k]) < tolerance for k in range(3)))


CHART_PROBE = """JSON.stringify({
    ready: document.documentElement.getAttribute('data-report-ready'),
    charts: Array.from(document.querySelectorAll('svg.chart')).map(function (s) {
        var r = s.getBoundingClientRect(); return [r.width, r.height]; }),
    lines: Array.from(document.querySelectorAll('polyline.series')).map(function (p) { return p.points.numberOfItems; }),
    marks: document.querySelectorAll('a.mark').length,
    rows: document.querySelectorAll('#decisions tbody tr').length,
    width: document.documentElement.scrollWidth, viewport: window.innerWidth})"""
