"""How long the TUI takes to switch heads on a 128×128 matrix (target: under 100 ms).

    .venv/bin/python -m benchmarks.tui_switch            # embedded model, examples/sample.txt
    .venv/bin/python -m benchmarks.tui_switch --synthetic  # random activations, no model

Per terminal size and colour mode, three timings of the same head switches:

* ``slice``  – fetching the cached ``[128, 128]`` matrix from the document model;
* ``render`` – pooling, colouring and building the half-block lines (MatrixView.rebuild);
* ``update`` – ``app.select_head``: state, matrix render, info line, document
  pane and grid, i.e. everything a key press does;
* ``draw``   – from there until Textual has written the new frame to the
  (headless) driver: its frame timer, layout if needed, redraw of the dirty
  regions and their terminal encoding;
* ``switch`` – ``update + draw``, the time from the switch to the new frame on
  the terminal (wall clock), and
  ``switch cpu`` the process CPU time over the same span, which does not count
  time lost to other processes on a busy machine;
* ``full redraw`` – for reference, drawing the whole screen again with warm caches;
* ``pilot``  – for reference, a key press through Textual's test pilot, which adds
  idle-detection sleeps of its own.

The matrices of the window are computed once before timing (as in the app,
where all heads of a window come from one forward pass and are cached).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.common import REPO
from headseg.analysis.text import Window
from headseg.tui.app import create_app
from headseg.tui.data import DocumentModel, WindowMatrices
from headseg.tui.precomputed import PrecomputedSource


def synthetic_document(tokens: int = 128, layers: int = 6, heads: int = 12, d: int = 32) -> DocumentModel:
    rng = np.random.default_rng(0)
    z = rng.normal(size=(layers, heads, tokens, d)).astype(np.float32)
    logits = rng.normal(size=(layers, heads, tokens, tokens))
    attn = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    fnorm = rng.uniform(0.5, 2.0, size=(layers, heads, tokens)).astype(np.float32)
    words = [f"w{i}" for i in range(tokens - 2)]
    text = " ".join(words)
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]])
    offsets = np.concatenate([[[0, 0]], np.stack([starts, starts + [len(w) for w in words]], 1), [[len(text)] * 2]])
    special = np.zeros(tokens, bool)
    special[[0, -1]] = True
    sent = np.where(special, -1, np.arange(tokens) // 20)
    w = Window(0, np.arange(tokens), offsets.astype(np.int64), special, sent, ["[CLS]", *words, "[SEP]"], 0, 0, len(text))
    src = PrecomputedSource("synthetic", layers, heads, "synthetic", [WindowMatrices(z, attn.astype(np.float32), fnorm)])
    return DocumentModel(text, [w], src)


def model_document(path: Path) -> DocumentModel:
    from headseg.analysis import load_model
    from headseg.tui.data import ModelSource

    loaded = load_model(None)
    doc = DocumentModel.from_text(path.read_text(encoding="utf-8"), ModelSource(loaded), max_tokens=128)
    if len(doc.window(0)) != 128:
        raise SystemExit(f"{path}: the first window has {len(doc.window(0))} tokens, not 128; use a longer text")
    return doc


def stats(xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    return f"{statistics.median(xs):8.2f} {p95:8.2f} {xs[-1]:8.2f}"


def screen_render(app) -> int:
    """Draw the whole screen as Textual's driver would (compositor → terminal sequence); returns its length."""
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    return len(update.render_segments(app.console))


async def measure(doc: DocumentModel, size: tuple[int, int], colors: str, n: int) -> dict:
    app = create_app(document=doc, segmenter=None, color_system=colors, profile=None)
    out = {k: [] for k in ("slice", "render", "update", "draw", "switch", "switch cpu", "full redraw", "pilot")}
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        doc.matrices(0)
        app.select_head(0, 0)
        await pilot.pause()
        mv = app.matrix_view
        L, H = doc.num_layers, doc.num_heads
        heads = [divmod(k % (L * H), H) for k in range(1, n + 1)]
        for layer, head in heads:
            t0 = time.perf_counter()
            m = doc.matrix(0, layer, head, "similarity")
            t1 = time.perf_counter()
            mv.set_matrix(m)
            t2 = time.perf_counter()
            out["slice"].append((t1 - t0) * 1e3)
            out["render"].append((t2 - t1) * 1e3)
        shown: list[float] = []
        display = app._display

        def timed_display(screen, renderable):
            display(screen, renderable)
            shown.append(time.perf_counter())

        app._display = timed_display
        for layer, head in heads:
            await pilot.pause()
            shown.clear()
            c0 = time.process_time()
            t0 = time.perf_counter()
            app.select_head(layer, head)
            t1 = time.perf_counter()
            # Let Textual run: its update timer lays out, redraws the dirty
            # regions and writes them to the (headless) driver via _display.
            deadline = t1 + 5.0
            while not shown and time.perf_counter() < deadline:
                await asyncio.sleep(0.0005)
            t2 = shown[0] if shown else float("nan")
            out["update"].append((t1 - t0) * 1e3)
            out["draw"].append((t2 - t1) * 1e3)
            out["switch"].append((t2 - t0) * 1e3)
            out["switch cpu"].append((time.process_time() - c0) * 1e3)
            await pilot.pause()
            t3 = time.perf_counter()
            screen_render(app)
            out["full redraw"].append((time.perf_counter() - t3) * 1e3)
        app._display = display
        app.select_head(0, 0)
        await pilot.pause()
        for _ in range(max(5, n // 4)):
            t0 = time.perf_counter()
            await pilot.press("full_stop" if app.head < H - 1 else "right_square_bracket")
            await pilot.pause()
            out["pilot"].append((time.perf_counter() - t0) * 1e3)
        lay = mv.layout_
        out["layout"] = f"{lay.tokens}→{lay.bins}" + (f" {app.pooling}-pool" if lay.pooled else "")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", action="store_true", help="random activations instead of the embedded model")
    ap.add_argument("--text", type=Path, default=REPO / "examples" / "sample.txt")
    ap.add_argument("-n", type=int, default=60, help="head switches per configuration")
    args = ap.parse_args()
    doc = synthetic_document() if args.synthetic else model_document(args.text)
    print(f"source: {doc.source.name}; window 0: {len(doc.window(0))} tokens; {doc.num_layers}x{doc.num_heads} heads; "
          f"{args.n} switches per row; times in ms (median / p95 / max)")
    cols = ("slice", "render", "update", "draw", "switch", "switch cpu", "full redraw", "pilot")
    print(f"{'terminal':>9} {'colours':>9} {'matrix':>17} | " + " | ".join(f"{c:^26}" for c in cols))
    worst = worst_cpu = 0.0
    for size in [(120, 40), (200, 60), (240, 80)]:
        for colors in ("truecolor", "256"):
            r = asyncio.run(measure(doc, size, colors, args.n))
            worst = max(worst, statistics.median(r["switch"]))
            worst_cpu = max(worst_cpu, statistics.median(r["switch cpu"]))
            print(f"{size[0]:>4}x{size[1]:<4} {colors:>9} {r['layout']:>17} | " + " | ".join(stats(r[c]) for c in cols))
    print("switch = update (state, matrix render, info line, document pane, grid) + draw (Textual's redraw), wall time;")
    print("switch cpu = the CPU time of the same work (close to the wall time on an idle machine).")
    print("pilot = key press through Textual's test pilot, including its idle-detection sleeps (not app work).")
    print(f"worst median switch: {worst:.1f} ms wall, {worst_cpu:.1f} ms CPU; target under 100 ms: "
          f"{'met' if worst < 100 else 'NOT met'} (wall), {'met' if worst_cpu < 100 else 'NOT met'} (CPU)")


if __name__ == "__main__":
    main()
