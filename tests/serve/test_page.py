"""The viewer page in real Chromium (Playwright): paste, segment, see segments, scores and the plot."""

from __future__ import annotations

import math
import os
import shutil
import threading
import time

import pytest

from .conftest import TOPICS, free_port, needs_serve_extra

pytestmark = pytest.mark.slow

needs_serve_extra()

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
CHROMIUM = "/usr/bin/chromium"
if not shutil.which(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)", allow_module_level=True)

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture()
def live_url(engine):
    """The app on a loopback port in a thread of this process (uvicorn), over the session's engine."""
    import uvicorn

    from headseg.serve.app import create_app

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(engine=engine), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_viewer_page_shows_segments_scores_and_plot(live_url, engine, tmp_path):
    import asyncio

    # no option set: the page's defaults, and the three paragraphs of TOPICS are its three segments
    expected = asyncio.run(engine.runner.segment(TOPICS, {})).to_dict()
    assert [s["start"] for s in expected["segments"]] == [0, *(TOPICS.index(p) for p in TOPICS.split("\n\n")[1:])]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(live_url + "/")
            page.fill("#text", TOPICS)
            page.click("#go")
            page.wait_for_selector("#segments-out .seg", timeout=60_000)
            shown = page.locator("#segments-out .seg").all_inner_texts()
            bars = page.locator("#plot rect.boundary")
            heights = [float(bars.nth(i).get_attribute("height")) for i in range(bars.count())]
            status = page.inner_text("#status")
            shot = os.environ.get("HEADSEG_VIEWER_SCREENSHOT") or str(tmp_path / "viewer.png")
            page.screenshot(path=shot, full_page=True)
        finally:
            browser.close()
    assert not errors
    assert status.startswith("3 segments")
    assert len(shown) == len(expected["segments"]) == 3
    for box, seg in zip(shown, expected["segments"]):
        assert seg["text"].strip()[:40] in box
    for box, seg in zip(shown[1:], expected["segments"][1:]):
        assert f"score {seg['score']:.3f}" in box
    # one bar per boundary, its height the boundary's score on an axis ending at the strongest one rounded
    # up to a tenth (plot height 118 px = 132 - 14)
    scores = [s["score"] for s in expected["segments"][1:]]
    ymax = max(0.1, math.ceil(max(scores) * 10) / 10)
    assert heights == pytest.approx([max(0.0, s) / ymax * 118 for s in scores], abs=1e-3)
    assert os.path.getsize(shot) > 10_000
