"""The viewer page in real Chromium (Playwright): paste, segment, see segments, scores and the plot."""

from __future__ import annotations

import contextlib
import math
import os
import shutil

import pytest

from .conftest import TOPICS, needs_serve_extra

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
    from headseg.serve.app import create_app

    from .live import serve_in_thread

    with serve_in_thread(create_app(engine=engine)) as url:
        yield url


@contextlib.contextmanager
def viewer(url: str):
    """The viewer page of ``url`` in headless Chromium: ``(page, errors)``, the page's script errors
    collected as they happen; the browser is closed after the block."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url + "/")
            yield page, errors
        finally:
            browser.close()


def test_viewer_page_shows_segments_scores_and_plot(live_url, engine, tmp_path):
    import asyncio

    # no option set: the page's defaults, and the three paragraphs of TOPICS are its three segments
    expected = asyncio.run(engine.runner.segment(TOPICS, {})).to_dict()
    assert [s["start"] for s in expected["segments"]] == [0, *(TOPICS.index(p) for p in TOPICS.split("\n\n")[1:])]
    with viewer(live_url) as (page, errors):
        page.fill("#text", TOPICS)
        page.click("#go")
        page.wait_for_selector("#segments-out .seg", timeout=60_000)
        shown = page.locator("#segments-out .seg").all_inner_texts()
        bars = page.locator("#plot rect.boundary")
        heights = [float(bars.nth(i).get_attribute("height")) for i in range(bars.count())]
        status = page.inner_text("#status")
        shot = os.environ.get("HEADSEG_VIEWER_SCREENSHOT") or str(tmp_path / "viewer.png")
        page.screenshot(path=shot, full_page=True)
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


def test_viewer_page_shows_a_tree_as_bands_and_collapsible_nodes(live_url, engine, tmp_path):
    """level tree: one band per node (a row per depth), the nodes nested and foldable, the leaves as segments."""
    import asyncio

    from sample_texts import PARAGRAPHS

    text = "\n\n".join(PARAGRAPHS)
    expected = asyncio.run(engine.runner.segment(text, {"level": "tree", "max_tokens": 60})).to_dict()
    nodes = []

    def walk(items, prefix):
        for i, n in enumerate(items):
            path = f"{prefix}.{i + 1}" if prefix else str(i + 1)
            nodes.append((path, n))
            walk(n["children"], path)

    walk(expected["tree"], "")
    inner = [(path, n) for path, n in nodes if n["children"]]
    assert inner and max(n["depth"] for _, n in nodes) >= 2  # a tree with a level above the leaves
    with viewer(live_url) as (page, errors):
        page.fill("#text", text)
        page.select_option("#opt-level", "tree")
        page.fill("#opt-max_tokens", "60")
        page.click("#go")
        page.wait_for_selector("#segments-out details.node", timeout=60_000)
        bands = page.locator("#plot rect.band")
        got_bands = [(bands.nth(i).get_attribute("data-path"), float(bands.nth(i).get_attribute("x")),
                      float(bands.nth(i).get_attribute("width")), float(bands.nth(i).get_attribute("y")))
                     for i in range(bands.count())]
        folds = [page.locator(f'details.node[data-path="{path}"]') for path, _ in inner]
        summaries = [f.locator(":scope > summary").inner_text() for f in folds]
        leaves_shown = page.locator("#segments-out .seg").count()
        first = folds[0]
        inside = first.locator(".seg").first
        visible_before = inside.is_visible()
        first.locator(":scope > summary").click()
        visible_after = inside.is_visible()
        status = page.inner_text("#status")
        page.screenshot(path=str(tmp_path / "tree.png"), full_page=True)
    assert not errors
    assert status.startswith(f"{len(expected['segments'])} segments (the leaves of a tree of")
    assert leaves_shown == len(expected["segments"])
    # one band per node, in pre-order, at its offsets, one row (8 px) lower per depth
    assert [path for path, *_ in got_bands] == [path for path, _ in nodes]
    for (path, x, width, y), (_, n) in zip(got_bands, nodes):
        assert x == pytest.approx(n["start"] / len(text) * 1000, abs=1e-3)
        assert width == pytest.approx(max((n["end"] - n["start"]) / len(text) * 1000, 1), abs=1e-3)
        assert y - got_bands[0][3] == pytest.approx(8 * (n["depth"] - 1))
    for summary, (path, n) in zip(summaries, inner):
        summary = " ".join(summary.split())  # the browser's text collapses runs of spaces
        assert f"node {path} [{n['start']}, {n['end']}) {n['token_count']} tokens {len(n['children'])} parts" in summary
    assert visible_before and not visible_after  # a node folds away its parts


def test_viewer_page_names_the_headings_on_the_plot(live_url, engine):
    """Issue 34: Markdown headings above the boundary plot (where a segment opens under a new one) and
    each segment's heading path in its box."""
    import asyncio

    text = ("# Kitchen\n\nBread needs flour, water, salt and yeast. Knead the dough for ten minutes. "
            "Let it rise until it doubles.\n\n# Sky\n\nThe telescope was pointed at Jupiter after sunset. "
            "Its four largest moons appeared as bright points beside the planet.\n")
    expected = asyncio.run(engine.runner.segment(text, {"structure": "markdown"})).to_dict()
    titles, last = [], None
    for s in expected["segments"]:
        t = s["headings"][-1] if s["headings"] else None
        if t is not None and t != last:
            titles.append((t, s["start"]))
        last = t
    assert [t for t, _ in titles] == ["Kitchen", "Sky"]
    with viewer(live_url) as (page, _):
        page.fill("#text", text)
        page.select_option("#opt-structure", "markdown")
        page.click("#go")
        page.wait_for_selector("#segments-out .seg", timeout=60_000)
        labels = page.locator("#plot text.heading")
        # the label's own text, without its <title> (the whole path, shown on hover)
        got = [(labels.nth(i).evaluate("e => e.firstChild.textContent"), float(labels.nth(i).get_attribute("x")),
                labels.nth(i).locator("title").text_content()) for i in range(labels.count())]
        boxes = page.locator("#segments-out .seg .head").all_inner_texts()
    assert [t for t, _, _ in got] == [t for t, _ in titles] and [h for *_, h in got] == ["Kitchen", "Sky"]
    for (_, x, _), (_, start) in zip(got, titles):
        assert x == pytest.approx(start / len(text) * 1000 + 2, abs=1e-3)
    for box, seg in zip(boxes, expected["segments"]):
        assert ("§ " + " › ".join(seg["headings"])) in box
