"""The viewer page and the API page in real Chromium (Playwright): paste, segment, see segments, scores
and the plot; the headings over it laid out apart; /docs listing the schemas.

Screenshots go to ``tmp_path``, or to the folder ``HEADSEG_PAGE_SHOTS`` names (to look at them).
"""

from __future__ import annotations

import base64
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
def live_url(host):
    """The app on a loopback port in a thread of this process (uvicorn), over the session's host."""
    from headseg.serve.app import create_app

    from .live import serve_in_thread

    with serve_in_thread(create_app(host=host)) as url:
        yield url


def shot(tmp_path, name: str) -> str:
    """Where the screenshot ``name`` goes: ``HEADSEG_PAGE_SHOTS`` if set, else the test's own folder."""
    folder = os.environ.get("HEADSEG_PAGE_SHOTS") or str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, name)


@contextlib.contextmanager
def viewer(url: str, path: str = "/"):
    """The page ``path`` of ``url`` in headless Chromium: ``(page, errors)``, the page's script errors and
    every answer of 400 or more (its own or an asset's) collected as they happen; the browser is closed
    after the block."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("response", lambda r: r.status >= 400 and errors.append(f"HTTP {r.status} {r.url}"))
            page.goto(url + path)
            yield page, errors
        finally:
            browser.close()


def test_viewer_page_shows_segments_scores_and_plot(live_url, host, tmp_path):
    import asyncio

    # no option set: the page's defaults, and the three paragraphs of TOPICS are its three segments
    expected = asyncio.run(host.runner.segment(TOPICS, {})).to_dict()
    assert [s["start"] for s in expected["segments"]] == [0, *(TOPICS.index(p) for p in TOPICS.split("\n\n")[1:])]
    with viewer(live_url) as (page, errors):
        page.fill("#text", TOPICS)
        page.click("#go")
        page.wait_for_selector("#segments-out .seg", timeout=60_000)
        shown = page.locator("#segments-out .seg").all_inner_texts()
        bars = page.locator("#plot rect.boundary")
        heights = [float(bars.nth(i).get_attribute("height")) for i in range(bars.count())]
        status = page.inner_text("#status")
        path = os.environ.get("HEADSEG_VIEWER_SCREENSHOT") or shot(tmp_path, "viewer.png")
        page.screenshot(path=path, full_page=True)
    assert not errors
    assert status.startswith("3 segments")
    assert len(shown) == len(expected["segments"]) == 3
    for box, seg in zip(shown, expected["segments"]):
        assert seg["text"].strip()[:40] in box
    # each boundary's strength: its confidence where the record carries one (issue 48), else its score
    strengths = [("score", s["score"]) if s.get("confidence") is None else ("confidence", s["confidence"])
                 for s in expected["segments"][1:]]
    for box, (name, value) in zip(shown[1:], strengths):
        assert f"{name} {value:.3f}" in box
    # one bar per boundary, its height the boundary's strength on an axis ending at the strongest one rounded
    # up to a tenth (plot height 118 px = 132 - 14)
    scores = [value for _, value in strengths]
    ymax = max(0.1, math.ceil(max(scores) * 10) / 10)
    assert heights == pytest.approx([max(0.0, s) / ymax * 118 for s in scores], abs=1e-3)
    assert os.path.getsize(path) > 10_000


def test_viewer_page_shows_a_tree_as_bands_and_collapsible_nodes(live_url, host, tmp_path):
    """level tree: one band per node (a row per depth), the nodes nested and foldable, the leaves as segments."""
    import asyncio

    from sample_texts import PARAGRAPHS

    text = "\n\n".join(PARAGRAPHS)
    expected = asyncio.run(host.runner.segment(text, {"level": "tree", "max_tokens": 60})).to_dict()
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
        plot_width = page.evaluate("document.getElementById('plot').viewBox.baseVal.width")
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
        page.screenshot(path=shot(tmp_path, "tree.png"), full_page=True)
    assert not errors
    assert status.startswith(f"{len(expected['segments'])} segments (the leaves of a tree of")
    assert leaves_shown == len(expected["segments"])
    # one band per node, in pre-order, at its offsets, one row (8 px) lower per depth
    assert [path for path, *_ in got_bands] == [path for path, _ in nodes]
    for (path, x, width, y), (_, n) in zip(got_bands, nodes):
        assert x == pytest.approx(n["start"] / len(text) * plot_width, abs=1e-3)
        assert width == pytest.approx(max((n["end"] - n["start"]) / len(text) * plot_width, 1), abs=1e-3)
        assert y - got_bands[0][3] == pytest.approx(8 * (n["depth"] - 1))
    for summary, (path, n) in zip(summaries, inner):
        summary = " ".join(summary.split())  # the browser's text collapses runs of spaces
        assert f"node {path} [{n['start']}, {n['end']}) {n['token_count']} tokens {len(n['children'])} parts" in summary
    assert visible_before and not visible_after  # a node folds away its parts


def test_viewer_page_names_the_headings_on_the_plot(live_url, host):
    """Issue 34: Markdown headings above the boundary plot (where a segment opens under a new one) and
    each segment's heading path in its box."""
    import asyncio

    text = ("# Kitchen\n\nBread needs flour, water, salt and yeast. Knead the dough for ten minutes. "
            "Let it rise until it doubles.\n\n# Sky\n\nThe telescope was pointed at Jupiter after sunset. "
            "Its four largest moons appeared as bright points beside the planet.\n")
    # a size limit: two short sections carry too little evidence to part them (issue 48), the limit
    # cuts, and the heading says where
    expected = asyncio.run(host.runner.segment(text, {"structure": "markdown", "max_chars": 160})).to_dict()
    titles = [(t, start) for start, t, _ in opened_headings(expected)]
    assert [t for t, _ in titles] == ["Kitchen", "Sky"]
    with viewer(live_url) as (page, _):
        page.fill("#text", text)
        page.select_option("#opt-structure", "markdown")
        page.fill("#opt-max_chars", "160")
        page.click("#go")
        page.wait_for_selector("#segments-out .seg", timeout=60_000)
        got = page.evaluate(HEADING_BOXES)["labels"]
        boxes = page.locator("#segments-out .seg .head").all_inner_texts()
    assert [g["text"] for g in got] == [t for t, _ in titles] and [g["title"] for g in got] == ["Kitchen", "Sky"]
    for g, (_, start) in zip(got, titles):
        assert g["start"] == start and g["x"] == pytest.approx(start / len(text) * g["width"], abs=0.5)
    for box, seg in zip(boxes, expected["segments"]):
        assert ("§ " + " › ".join(seg["headings"])) in box


def opened_headings(record: dict) -> list[tuple[int, str, str]]:
    """``(start, heading, path)`` of each segment that opens under a new heading: the labels the page shows,
    the path joined by " › "."""
    out, last = [], None
    for s in record["segments"]:
        t = s["headings"][-1] if s["headings"] else None
        if t is not None and t != last:
            out.append((s["start"], t, " › ".join(s["headings"])))
        last = t
    return out


#: the heading labels' boxes, relative to their strip, and the plot's edges and width (its viewBox's and its
#: own), in CSS pixels
HEADING_BOXES = """() => {
  const strip = document.getElementById("headings").getBoundingClientRect();
  const plot = document.getElementById("plot").getBoundingClientRect();
  const labels = [...document.querySelectorAll("#headings .heading")].map((e) => {
    const r = e.getBoundingClientRect();
    return {text: e.textContent, title: e.title, start: Number(e.dataset.start), x: r.left - strip.left,
            left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: strip.width,
            clipped: e.scrollWidth > e.clientWidth};
  });
  const svg = document.getElementById("plot");
  return {labels, plotTop: plot.top, plotLeft: plot.left, plotRight: plot.right,
          plotUnits: svg.viewBox.baseVal.width, plotPixels: svg.clientWidth};
}"""


def many_headings(n: int) -> str:
    """A Markdown document of ``n`` sections under long headings at three levels, the bodies of different
    lengths (so some boundaries crowd together), every section about one thing."""
    things = ["bees and their hive", "bread and its dough", "rivers in flood", "phones and their batteries",
              "budgets of a town", "stars over the desert", "soil in a garden", "chords of a song"]
    parts = []
    for i in range(n):
        thing = things[i % len(things)]
        body = " ".join(f"This part is about {thing}, point {j + 1}." for j in range(1 + (i * 7) % 4))
        parts.append(f"{'#' * (1 + i % 3)} Section {i + 1}: a long heading about {thing}\n\n{body}\n")
    return "\n".join(parts)


def test_viewer_page_lays_out_many_headings_apart_from_each_other_and_the_axis(live_url, host, tmp_path):
    """Issue 49 item 19: with 40 headings, no label covers another or the plot; each starts at its boundary,
    and a shortened one keeps its whole path in its title."""
    import asyncio

    text = many_headings(40)
    # templated sections that come back every eighth carry little evidence (issue 48): a size limit cuts
    record = asyncio.run(host.runner.segment(text, {"structure": "markdown", "max_chars": 200})).to_dict()
    opened = [(start, path) for start, _, path in opened_headings(record)]
    assert len(opened) >= 30  # crowded enough that labels in one row would collide
    with viewer(live_url) as (page, errors):
        page.fill("#text", text)
        page.select_option("#opt-structure", "markdown")
        page.fill("#opt-max_chars", "200")
        page.click("#go")
        page.wait_for_selector("#segments-out .seg", timeout=60_000)
        wide = page.evaluate(HEADING_BOXES)
        page.screenshot(path=shot(tmp_path, "headings.png"))
        page.set_viewport_size({"width": 700, "height": 900})  # placed again at the new width
        page.wait_for_function("document.getElementById('headings').clientWidth < 700")
        # the plot is redrawn on resize too, a moment later: measure once it has been (it raced in CI)
        page.wait_for_function("(() => { const s = document.getElementById('plot');"
                               " return s.viewBox.baseVal.width === s.clientWidth; })()")
        narrow = page.evaluate(HEADING_BOXES)
        page.screenshot(path=shot(tmp_path, "headings-narrow.png"))
    assert not errors
    assert narrow["labels"][0]["width"] < wide["labels"][0]["width"]
    for boxes in (wide, narrow):
        check_labels(boxes, opened, len(text))


def check_labels(boxes: dict, opened: list[tuple[int, str]], length: int) -> None:
    """The labels are the headings ``opened`` (start, path), each at its boundary, over the plot and inside
    its width, none covering another, in more than one row, some shortened."""
    labels = boxes["labels"]
    assert [(g["start"], g["title"]) for g in labels] == opened
    assert boxes["plotUnits"] == boxes["plotPixels"]  # the plot is drawn at its size: its text not stretched
    for g in labels:
        assert g["x"] == pytest.approx(g["start"] / length * g["width"], abs=0.5)
        assert g["bottom"] <= boxes["plotTop"] + 0.5  # over the plot, never on it
        assert boxes["plotLeft"] - 0.5 <= g["left"] and g["right"] <= boxes["plotRight"] + 0.5
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            apart = a["right"] <= b["left"] + 0.5 or b["right"] <= a["left"] + 0.5 or \
                a["bottom"] <= b["top"] + 0.5 or b["bottom"] <= a["top"] + 0.5
            assert apart, (a, b)
    assert len({g["top"] for g in labels}) > 1  # staggered: more than one row was needed
    assert any(g["clipped"] for g in labels)  # and some were shortened, their titles whole (checked above)


def test_viewer_page_opens_with_the_sample_and_its_own_icon(live_url):
    """Issue 49 item 19: not an empty text area; the Sample button brings the bundled sample back; the icon
    is inline, so no /favicon.ico is asked for (a 404 before)."""
    from headseg import sample_text

    with viewer(live_url) as (page, errors):
        opened = page.input_value("#text")
        page.fill("#text", "something else")
        page.click("#sample")
        reloaded = page.input_value("#text")
        icon = page.get_attribute("link[rel=icon]", "href")
    assert opened == reloaded == sample_text()
    assert not errors
    kind, _, data = icon.partition(",")
    assert kind == "data:image/svg+xml;base64" and base64.b64decode(data).startswith(b"<svg ")


def test_viewer_page_shows_confidence_where_records_carry_it(live_url, host, tmp_path):
    """Issue 49 item 19: a record's ``confidence`` (when its segments carry one) is what the boxes, the
    bars and the legend show, whatever the record's scores; without it, the score."""
    import asyncio

    record = asyncio.run(host.runner.segment(TOPICS, {})).to_dict()
    confident = [0.5 + 0.1 * i for i in range(len(record["segments"]))]
    record["segments"] = [{**s, "confidence": c} for s, c in zip(record["segments"], confident)]
    with viewer(live_url) as (page, errors):
        page.evaluate("([record, text]) => show(record, text)", [record, TOPICS])
        heads = page.locator("#segments-out .seg .head").all_inner_texts()
        bars = page.locator("#plot rect.boundary")
        heights = [float(bars.nth(i).get_attribute("height")) for i in range(bars.count())]
        titles = [bars.nth(i).locator("title").text_content() for i in range(bars.count())]
        measure = page.inner_text("#measure")
    assert not errors
    assert measure == "confidence"
    for head, s, c in zip(heads[1:], record["segments"][1:], confident[1:]):
        assert f"confidence {c:.3f}" in head and "score" not in head
    ymax = max(0.1, math.ceil(max(confident[1:]) * 10) / 10)
    assert heights == pytest.approx([c / ymax * 118 for c in confident[1:]], abs=1e-3)
    assert all("confidence" in t for t in titles)


def test_docs_page_lists_the_version_operations_and_schemas(live_url, tmp_path):
    """Issue 49 item 20: /docs says the package's version, renders each schema as a table (code as code,
    nothing wider than the page), and links the operation to its request and answer schemas."""
    from importlib.metadata import version

    import httpx

    spec = httpx.get(live_url + "/openapi.json").json()
    with viewer(live_url, "/docs") as (page, errors):
        page.wait_for_selector("#schema-Segmentation", timeout=10_000)
        title = page.inner_text("#title")
        names = page.eval_on_selector_all("#schemas > details", "els => els.map((e) => e.id)")
        fields = {name: page.eval_on_selector_all(f"#schema-{name} > div > table > tr > td.name",
                                                  "els => els.map((e) => e.firstChild.textContent)")
                  for name in spec["components"]["schemas"]}
        links = page.eval_on_selector_all("#paths a", "els => els.map((e) => e.getAttribute('href'))")
        visible = page.inner_text("body")
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        page.screenshot(path=shot(tmp_path, "docs.png"), full_page=True)
    assert not errors
    assert title == f"headseg {version('headseg')}"
    assert names == [f"schema-{n}" for n in spec["components"]["schemas"]]
    for name, schema in spec["components"]["schemas"].items():
        assert fields[name] == list(schema["properties"])
    assert {"#schema-SegmentRequest", "#schema-Segmentation", "#schema-DocumentError", "#schema-Refusal"} <= set(links)
    assert "``" not in visible and "`" not in visible  # docstring and help markup rendered, not shown
    assert widths[0] <= widths[1]  # no line runs off the page
