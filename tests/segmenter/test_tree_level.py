"""The segment tree as a level (issue 36): nodes built from nested levels, tiling at every depth,
coarse boundaries at every finer depth, limits on the leaves, the records' parent links, round trips."""

from __future__ import annotations

import json

import numpy as np
import pytest

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.segments import Node, Segment, Segmentation, check_tree
from headseg.api import Segmenter
from headseg.segmenter.options import MAX_DEPTH, SegmentOptions
from headseg.segmenter.tree import TreeLevel, tree_nodes
from sample_texts import PARAGRAPHS, TOPICS_TEXT

TEXT = TOPICS_TEXT


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch", window_tokens=64)


def test_nodes_of_nested_levels_by_hand():
    units = [(i, i + 1) for i in range(10)]  # ten one-character units of a ten-character text
    levels = [TreeLevel((4,), (0.9,)), TreeLevel((2, 4, 7), (0.2, 0.5, 0.3))]
    cuts, scores, nodes = tree_nodes(levels, units, 10)
    assert cuts == [2, 4, 7] and scores == [0.2, 0.5, 0.3]
    assert [(n.id, n.parent, n.depth, n.start, n.end, n.score) for n in nodes] == [
        (0, None, 1, 0, 4, 0.0), (1, 0, 2, 0, 2, 0.0), (2, 0, 2, 2, 4, 0.2),
        (3, None, 1, 4, 10, 0.9), (4, 3, 2, 4, 7, 0.5), (5, 3, 2, 7, 10, 0.3)]


def test_a_node_no_finer_level_cuts_is_a_leaf_and_a_level_is_skipped_where_it_adds_nothing():
    units = [(i, i + 1) for i in range(9)]
    levels = [TreeLevel((3,), (1.0,)), TreeLevel((3, 6), (0.4, 0.6)), TreeLevel((1, 3, 6), (0.1, 0.4, 0.6))]
    cuts, _, nodes = tree_nodes(levels, units, 9)
    assert cuts == [1, 3, 6]
    # [0, 3) is cut only by the third level: its children come from there, one depth down
    assert [(n.parent, n.depth, n.start, n.end) for n in nodes] == [
        (None, 1, 0, 3), (0, 2, 0, 1), (0, 2, 1, 3), (None, 1, 3, 9), (3, 2, 3, 6), (3, 2, 6, 9)]
    text = "abcdefghi"
    leaves = Segmentation.from_boundaries(text, cuts, level="tree")
    check_tree(text, leaves.segments, nodes)


def test_no_cut_at_any_level_is_one_node():
    cuts, _, nodes = tree_nodes([TreeLevel((), ())], [(0, 5)], 5)
    assert cuts == [] and nodes == [Node(0, None, 1, 0, 5, 0.0)]


def test_check_tree_refuses_what_is_not_a_tree():
    text = "abcdef"
    segs = Segmentation.from_boundaries(text, [3]).segments
    with pytest.raises(HeadsegError, match="single child"):
        check_tree(text, segs, [Node(0, None, 1, 0, 3), Node(1, 0, 2, 0, 3), Node(2, None, 1, 3, 6)])
    with pytest.raises(HeadsegError, match="tile"):
        check_tree(text, segs, [Node(0, None, 1, 0, 2), Node(1, None, 1, 3, 6)])
    with pytest.raises(HeadsegError, match="leaves"):
        check_tree(text, [Segment(0, 6, text)], [Node(0, None, 1, 0, 3), Node(1, None, 1, 3, 6)])
    with pytest.raises(HeadsegError, match="parent"):
        check_tree(text, segs, [Node(0, None, 1, 0, 3), Node(1, None, 1, 3, 6), Node(2, 0, 3, 0, 1)])


def _children(nodes):
    kids: dict = {}
    for n in nodes:
        kids.setdefault(n.parent, []).append(n)
    return kids


@pytest.mark.parametrize("kw", [{"depth": 2}, {"depth": 3, "max_tokens": 40}, {}])
def test_tree_through_the_api_tiles_nests_and_limits(seg, kw):
    r = seg.segment(TEXT, level="tree", **kw)
    assert r.level == "tree" and r.nodes
    kids = _children(r.nodes)
    # every node is tiled by its children, the document by the depth-1 nodes, recomputed here
    assert "".join(TEXT[n.start:n.end] for n in kids[None]) == TEXT
    for n in r.nodes:
        if n.id in kids:
            assert "".join(TEXT[k.start:k.end] for k in kids[n.id]) == TEXT[n.start:n.end]
            assert len(kids[n.id]) > 1
    # a boundary at a coarse depth is a boundary of the leaves
    assert {n.start for n in r.nodes} == {s.start for s in r.segments}
    if "depth" in kw:
        assert max(n.depth for n in r.nodes) <= kw["depth"]
    if "max_tokens" in kw:
        for s in r.segments:
            assert s.token_count <= kw["max_tokens"]
    for n in r.nodes:
        assert n.token_count is not None
    # the leaves are flat headseg's own segments: the coarse levels only merge them
    flat = seg.segment(TEXT, **{k: v for k, v in kw.items() if k != "depth"})
    assert [(s.start, s.end) for s in r.segments] == [(s.start, s.end) for s in flat.segments]


def test_records_link_parents_and_round_trip(seg):
    r = seg.segment(TEXT, level="tree", depth=2, max_tokens=40)
    rows = r.to_records("d")
    assert len(rows) == len(r.nodes)
    by_id = {row["id"]: row for row in rows}
    leaves = [row for row in rows if row["index"] is not None]
    assert [row["index"] for row in leaves] == list(range(len(r.segments)))
    assert [(row["start"], row["end"]) for row in leaves] == [(s.start, s.end) for s in r.segments]
    for row in rows:
        assert row["text"] == TEXT[row["start"]:row["end"]] and row["document"] == "d"
        if row["parent"] is None:
            assert row["depth"] == 1
        else:
            parent = by_id[row["parent"]]
            assert parent["depth"] == row["depth"] - 1 and parent["index"] is None
            assert parent["start"] <= row["start"] < row["end"] <= parent["end"]
    record = json.loads(r.to_json("d"))
    back = Segmentation.from_dict(record)
    assert back.to_dict("d") == record and [(n.start, n.end, n.depth) for n in back.nodes] == \
        [(n.start, n.end, n.depth) for n in r.nodes]


def test_flat_records_are_a_tree_of_depth_one(seg):
    r = seg.segment(TEXT)
    rows = r.to_records("d")
    assert [(row["id"], row["parent"], row["depth"]) for row in rows] == [(i, None, 1) for i in range(len(r))]
    assert [row["index"] for row in rows] == list(range(len(r)))
    assert "tree" not in r.to_dict()


@pytest.mark.parametrize("values, msg", [
    ({"depth": 2}, "depth goes with level tree"),
    ({"level": "tree", "depth": 0}, "depth must be an integer from 1"),
    ({"level": "tree", "depth": MAX_DEPTH + 1}, "depth must be an integer from 1"),
    ({"level": "tree", "segments": 3}, "segments goes with level topic"),
])
def test_bad_tree_options_are_refused(values, msg):
    with pytest.raises(InputError, match=msg):
        SegmentOptions.of(values)




@pytest.fixture(scope="module")
def real():
    return Segmenter(quiet=True)


@pytest.mark.parametrize("kw", [{}, {"depth": 2}])
def test_the_subjects_are_parents_of_the_paragraphs_the_size_limit_makes(real, kw):
    text = "\n\n".join(PARAGRAPHS)
    starts = [text.index(p) for p in PARAGRAPHS] + [len(text)]
    r = real.segment(text, level="tree", max_tokens=60, **kw)
    assert [(n.depth, n.start, n.end) for n in r.nodes if n.depth == 1] == [(1, 0, starts[3]), (1, starts[3], len(text))]
    assert [(s.start, s.end) for s in r.segments] == list(zip(starts, starts[1:]))
    assert all(n.parent == (0 if n.start < starts[3] else 4) for n in r.nodes if n.depth == 2)
    # without the limit the flat topics are the paragraphs' parents too, and nothing splits them
    assert [s.start for s in real.segment(text)] == [0, starts[3]]


def test_each_level_above_the_leaves_has_size_limits_tree_scale_times_larger(seg, monkeypatch):
    """Recorded from the searches the tree makes: level k gets max_tokens·TREE_SCALE^k, and its segments
    (sums of the units' tokens between its cuts) keep it; without a limit no level gets one."""
    from headseg.segmenter import tree as tree_mod

    calls = []
    real = tree_mod.document_boundaries

    def recording(doc, x, request, params, **kw):
        found = real(doc, x, request, params, **kw)
        calls.append((request.max_tokens, request.target_tokens, np.asarray(doc.unit_tokens), list(found.cuts)))
        return found

    monkeypatch.setattr(tree_mod, "document_boundaries", recording)
    seg.segment(TEXT * 3, level="tree", depth=3, max_tokens=30)
    assert len(calls) >= 2
    for k, (cap, target, tokens, cuts) in enumerate(calls):
        # the size target that one limit implies, as flat headseg's (TARGET_FRACTION of it)
        assert cap == int(30 * tree_mod.TREE_SCALE ** k) and target == pytest.approx(0.6 * cap)
        edges = [0, *cuts, len(tokens)]
        assert all(tokens[a:b].sum() <= cap for a, b in zip(edges, edges[1:]))
    calls.clear()
    seg.segment(TEXT * 3, level="tree", depth=3)
    assert calls and all(cap is None for cap, *_ in calls)


def test_markdown_heading_levels_are_the_tree_levels(real):
    """### subsections anchor the leaves only, ## sections the level above (before: every heading opened a
    segment on every level, so the tree was one level of all nine headings); a heading opens a segment
    only where the evidence supports one."""
    p = PARAGRAPHS
    text = ("# Field notes\n\n## Kitchen\n\n### Bread\n\n" + p[0] + "\n\n### Soup\n\n" + p[1] + "\n\n### Cake\n\n"
            + p[2] + "\n\n## Sky\n\n### Jupiter\n\n" + p[3] + "\n\n### Saturn\n\n" + p[4] + "\n\n### Comet\n\n"
            + p[5] + "\n")
    r = real.segment(text, level="tree", structure="markdown")
    top = [text[n.start:].split("\n", 1)[0] for n in r.nodes if n.depth == 1]
    leaves = [text[s.start:].split("\n", 1)[0] for s in r.segments]
    assert top == ["# Field notes", "## Sky"]
    # a heading says where a segment may open, the evidence whether (issue 48): the three kitchen notes
    # (pasta, its sauce, bread) are one subject once the evidence reads how alike the sides are (before,
    # "### Cake" opened a leaf), and so are the three sky-watching notes
    assert leaves == ["# Field notes", "## Sky"]
    assert list(r.segments[1].headings) == ["Field notes", "Sky"]
    assert all(0 <= n.confidence <= 1 for n in r.nodes if n.start > 0)


def test_structure_up_to_drops_only_the_deeper_headings():
    from headseg.segmenter.structure import read_markdown

    text = "# A\n\ntext\n\n## B\n\nmore\n\n### C\n\n```\ncode\n```\n"
    st = read_markdown(text)
    kinds = [(b.kind, b.level) for b in st.blocks]
    assert [(b.kind, b.level) for b in st.up_to(2).blocks] == [k for k in kinds if k != ("heading", 3)]
    assert [(b.kind, b.level) for b in st.up_to(1).blocks] == [k for k in kinds if k[0] != "heading" or k[1] == 1]


def test_a_coarse_level_the_structure_would_block_falls_back_to_the_finer_starts():
    from headseg.segmenter.cuts import CutPrior, nested_prior

    prior = CutPrior(np.array([True, True, False, True]), np.array([0.0, 0.5, 0.0, 0.0]), np.zeros(4, int))
    both, starts = nested_prior(prior, 4, [1, 3], None, max_units=4)
    assert both.allowed.tolist() == [True, True, False, True] and starts.tolist() == [1, 3]
    # only unit 2 is a finer start, and the structure forbids it: four units in one stretch, over max_units 2
    both, starts = nested_prior(prior, 4, [2], None, max_units=2)
    assert both.allowed.tolist() == [True, False, True, False] and both.bonus.tolist() == [0.0, 0.5, 0.0, 0.0]
    assert starts.tolist() == [2]
