"""Heatmap maths and colours of the TUI (no app needed)."""

from __future__ import annotations

import numpy as np
import pytest
from rich.color import ColorType

from headseg.analysis.errors import InputError
from headseg.tui.heatmap import (
    LEVELS,
    HeatmapRenderer,
    bin_edges,
    downsample,
    fit_layout,
    make_palette,
    palette_rgb,
    quantize,
    resolve_color_system,
    value_range,
)


def cells(line):
    """(fg, bg) of every drawn column of a line of segments (runs expanded)."""
    return [(seg.style.color, seg.style.bgcolor) for seg in line for _ in seg.text]


@pytest.mark.parametrize("n,bins", [(128, 40), (10, 3), (7, 7), (33, 16), (5, 1)])
def test_bin_edges_cover_every_row_once(n, bins):
    e = bin_edges(n, bins)
    assert e[0] == 0 and e[-1] == n and len(e) == bins + 1
    assert np.all(np.diff(e) >= 1)
    sizes = np.diff(e)
    assert sizes.max() - sizes.min() <= 1


def test_bin_edges_refuses_more_bins_than_rows():
    with pytest.raises(InputError):
        bin_edges(4, 5)


@pytest.mark.parametrize("how", ["max", "mean"])
def test_downsample_matches_explicit_blocks(how):
    rng = np.random.default_rng(3)
    m = rng.normal(size=(37, 37))
    bins = 10
    e = bin_edges(37, bins)
    want = np.empty((bins, bins))
    for a in range(bins):
        for b in range(bins):
            block = m[e[a] : e[a + 1], e[b] : e[b + 1]]
            want[a, b] = block.max() if how == "max" else block.mean()
    np.testing.assert_allclose(downsample(m, bins, how), want, rtol=0, atol=1e-12)


def test_downsample_is_identity_when_it_fits():
    m = np.arange(16.0).reshape(4, 4)
    np.testing.assert_array_equal(downsample(m, 4), m)
    np.testing.assert_array_equal(downsample(m, 9), m)
    with pytest.raises(InputError):
        downsample(np.ones((8, 8)), 4, "median")


def test_value_range_ignores_the_zero_diagonal():
    m = np.array([[0.0, 2.0, 3.0], [2.0, 0.0, 5.0], [3.0, 5.0, 0.0]])
    assert value_range(m, ignore_diagonal=True) == (2.0, 5.0)
    assert value_range(m, ignore_diagonal=False) == (0.0, 5.0)


def test_quantize_levels_and_clipping():
    q = quantize(np.array([-1.0, 0.0, 0.5, 0.999, 1.0, 2.0]), 0.0, 1.0, levels=4)
    assert q.tolist() == [0, 0, 2, 3, 3, 3]
    assert quantize(np.ones(3), 1.0, 1.0).tolist() == [0, 0, 0]


def test_colour_systems_truecolor_and_explicit_256_fallback():
    rgb = palette_rgb()
    assert rgb.shape == (LEVELS, 3)
    assert tuple(rgb[0]) == (68, 1, 84) and tuple(rgb[-1]) == (253, 231, 37)
    true = make_palette("truecolor")
    eight = make_palette("256")
    assert len(true) == len(eight) == 2 * LEVELS + 1
    assert {c.type for c in true} == {ColorType.TRUECOLOR}
    assert {c.type for c in eight} == {ColorType.EIGHT_BIT}
    assert all(16 <= c.number <= 255 for c in eight)
    # The 256-colour entry is the nearest cube colour: close to the true one.
    for c_true, c_256 in zip(true, eight):
        a = np.array(c_true.triplet, float)
        b = np.array(c_256.get_truecolor(), float)
        assert np.abs(a - b).max() <= 48


def test_resolve_color_system():
    assert resolve_color_system("auto", {"COLORTERM": "truecolor"}) == "truecolor"
    assert resolve_color_system("auto", {"COLORTERM": "24bit"}) == "truecolor"
    assert resolve_color_system("auto", {}) == "256"
    assert resolve_color_system("256", {"COLORTERM": "truecolor"}) == "256"
    assert resolve_color_system("truecolor", {}) == "truecolor"
    with pytest.raises(InputError):
        resolve_color_system("16", {})


def test_fit_layout_square_and_cell_mapping():
    lay = fit_layout(128, 50, 20)
    assert lay.bins == 40 and lay.pooled
    e = lay.edges()
    for tok in range(128):
        cell = lay.cell_of(tok)
        assert e[cell] <= tok < e[cell + 1]
    assert not fit_layout(30, 80, 40).pooled


def test_small_matrices_are_zoomed():
    lay = fit_layout(10, 80, 20)
    assert (lay.bins, lay.zoom, lay.side) == (10, 4, 40) and not lay.pooled
    assert lay.drawn_of(3) == 12
    r = HeatmapRenderer("truecolor")
    m = np.arange(100.0).reshape(10, 10)
    idx, _ = r.cell_indices(m, lay, cursor=(3, 5), ignore_diagonal=False)
    assert idx.shape == (40, 40)
    assert (idx[12:16, 20:24] == r.cursor_index).all() and (idx == r.cursor_index).sum() == 16
    np.testing.assert_array_equal(idx[::4, ::4][0], quantize(m, 0, 99)[0])


def test_renderer_cells_cursor_and_dimming():
    r = HeatmapRenderer("truecolor")
    m = np.arange(36.0).reshape(6, 6)
    lay = fit_layout(6, 6, 3)
    dim = np.zeros((6, 6), bool)
    dim[0, 5] = True
    idx, (lo, hi) = r.cell_indices(m, lay, cursor=(2, 3), dim_mask=dim, ignore_diagonal=False)
    assert (lo, hi) == (0.0, 35.0)
    want = quantize(m, 0.0, 35.0)
    assert idx[2, 3] == r.cursor_index
    assert idx[0, 5] == want[0, 5] + LEVELS
    mask = np.ones((6, 6), bool)
    mask[2, 3] = mask[0, 5] = False
    np.testing.assert_array_equal(idx[mask], want[mask])
    lines = r.lines(idx)
    assert len(lines) == 3 and all(set("".join(s.text for s in line)) == {"▀"} for line in lines)
    # Row 2 is the top half of line 1, row 3 its bottom half.
    for y, line in enumerate(lines):
        assert cells(line) == [(r.palette[idx[2 * y, x]], r.palette[idx[2 * y + 1, x]]) for x in range(6)]
    assert cells(lines[1])[3] == (r.palette[r.cursor_index], r.palette[want[3, 3]])


def test_runs_of_equal_colours_are_merged():
    r = HeatmapRenderer("truecolor")
    idx = np.array([[1, 1, 1, 2], [5, 5, 6, 6]])
    (line,) = r.lines(idx)
    assert [s.text for s in line] == ["▀▀", "▀", "▀"]
    assert cells(line) == [(r.palette[a], r.palette[b]) for a, b in zip(idx[0], idx[1])]


def test_renderer_odd_rows_leave_last_bottom_half_empty():
    r = HeatmapRenderer("256")
    idx = np.zeros((3, 2), dtype=int)
    lines = r.lines(idx)
    assert len(lines) == 2
    assert lines[1][0].style.bgcolor is None and lines[1][0].text == "▀▀"
    assert lines[0][0].style.color.type == ColorType.EIGHT_BIT
