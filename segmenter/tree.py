"""A segment tree: topic segments within topic segments, each level an optimum of the one search.

Cost and algorithm: the levels are the topic search (:func:`~headseg.segmenter.topics.document_boundaries`)
run bottom-up at increasing penalty scales.  The leaves are flat headseg's own segmentation: the
penalised optimum at scale 1 under the hard size limits and the size target (``max_chars``,
``max_tokens``, ``target_tokens``).  The level ``k`` steps above them is the optimum at scale
``TREE_SCALE ** k`` (:class:`~headseg.segmenter.topics.TopicParams` ``scale``: every segment pays
``s·β``, so only boundaries that save that much scatter open one), under the constraint that a
segment opens only where the finer level opens one (``allowed``: a cut prior forbidding every other
start).  Where the leaves have size limits, level ``k`` has them ``TREE_SCALE ** k`` times larger
(``max_tokens`` 128: parents of at most 384 tokens, then 1152...; with the size target that one
limit implies), as LlamaIndex's ``HierarchicalNodeParser`` sizes its levels (2048 / 512 / 128) but
with each level's cuts chosen by the topic search: without them the level above 128-token leaves of
a retrieval corpus was 3 segments of 2000 to 3700 tokens (``headseg retrieval --chunker tree``).
Without size limits the coarse levels have none either.  So a coarse boundary is a boundary at every finer level, each level
is the optimum among the coarsenings of the one below, and the leaves equal the flat output exactly.
Each search is O(U · M · D) (``M`` the longest segment considered, which grows with the scale up to
U), so a tree of ``L`` levels costs at most ``L`` times one flat search of that bound.

Depth: ``depth`` fixes the most levels ``L``; by default the text decides: levels are added above the
leaves while the coarsest one has more than ``TREE_FANOUT`` segments, up to ``TREE_MAX_DEPTH``.  A
level that merges nothing of the one below is skipped (no node has a single child), and a level of
one segment ends the tree.  Levels are added above flat headseg's, not below it: on the dev sets,
leaves searched at scales under 1 (``TREE_SCALE`` 1.5, top-down) scored Pk 0.451 against all of
wiki50_dev's boundaries (flat 0.439) and 0.375 on meetings_ami_dev_tree (flat 0.309), although their
number came near the reference's.  Bottom-up instead of top-down (each level searched inside its
parent's) keeps the leaves at flat's score: top-down, AMI's leaves were 0.001 worse and its top level
0.001 worse too (``benchmarks/tree.py``).

Markdown: the leaves see every heading (:func:`~headseg.segmenter.blocks.structure_prior`: a bonus
before each, by its level); each level above drops the deepest heading level left
(:meth:`~headseg.segmenter.structure.Structure.up_to`), down to the highest one present, so in a
document of ``#``, ``##`` and ``###`` headings the ``###`` ones anchor only the leaves, the ``##``
ones the level above, and the ``#`` ones every level.  With every heading on every level, as before,
the bonuses (1.5 to 3 times the penalty saved) opened a segment at each heading on every level.

Source: hierarchical segmentation by nested optima (TreeSeg, arXiv 2407.12028, is divisive and
greedy), with the exact penalised optimum (Jackson et al. 2005) at each level.
``benchmarks/tree.py`` scores the levels against two-level references.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from headseg.analysis.errors import HeadsegError, shown
from headseg.analysis.segments import Node

from .document import Document
from .penalty import StatisticsMemo
from .request import SearchRequest, default_target
from .topics import TopicParams, document_boundaries

#: the penalty scale between one level of the tree and the next finer one
TREE_SCALE = 3.0
#: without size limits the levels are the evidence's (issue 48): the penalty scale between one level
#: and the next finer one, and the evidence a boundary needs at level ``k`` above the leaves,
#: ``TREE_EVIDENCE ** k`` times the leaves' own (at least 1 standard deviation); measured on the
#: two-level dev references (docs/segmenter.md, "Segment trees"; 3 since the evidence reads how alike the
#: sides are, which lifts a long document's boundaries by about one: at 4 the meetings' trees lost depth)
TREE_FREE_SCALE = 1.5
TREE_EVIDENCE = 3.0
#: without ``depth``, a level is added above the coarsest while it has more segments than this (with
#: size limits; without, while it has more than one)
TREE_FANOUT = 3
#: the most levels below the document the automatic depth builds
TREE_MAX_DEPTH = 4
#: the most coarse searches one tree makes, the skipped ones (that merge nothing) included: at scale
#: ``TREE_SCALE ** 12`` (half a million times β per segment) no scatter of unit vectors pays for a cut
TREE_MAX_SEARCHES = 12


@dataclass(frozen=True)
class TreeLevel:
    """One level of a segment tree: the unit indices that open its segments 2..m (sorted, each
    coarser level's among them) and the strength of each of those boundaries at this level."""

    cuts: tuple[int, ...]
    scores: tuple[float, ...]
    #: each boundary's confidence at this level (:mod:`~headseg.segmenter.evidence`; empty: untested)
    confidence: tuple[float, ...] = ()


def tree_levels(doc: Document, x: np.ndarray, request: SearchRequest, params: TopicParams | None = None,
                depth: int | None = None) -> list[TreeLevel]:
    """The levels of the segment tree of one document, coarsest first, the leaves last.

    Arguments as :func:`~headseg.segmenter.topics.document_boundaries` (``x [U, D]`` the unit vectors
    of ``doc``'s units, ``request`` the leaves' limits and size target; its ``segments`` is not read:
    a tree's sizes come from its scales); ``depth``: the most levels below the document (fewer where
    a level is already one segment; None: the text decides, see the module's docstring).  Every
    level's cuts contain the cuts of the level before it; no two consecutive levels are equal, so no
    node has a single child; the last level is the flat segmentation of ``request``.  A text with
    one unit has one level without cuts.
    """
    params = params or TopicParams()
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise HeadsegError(f"depth must be a positive integer (got {shown(depth)})")
    units = doc.units
    if len(units) < 2:
        return [TreeLevel((), ())]
    leaves = replace(request, segments=None)
    # with size limits the levels grow by size, as LlamaIndex's; without, by the evidence their boundaries need
    limited = request.max_chars is not None or request.max_tokens is not None or request.target_tokens is not None

    def level_request(k: int) -> SearchRequest:
        """The leaves' request; above them, the size limits ``TREE_SCALE ** k`` times the leaves' (a size
        target with them, as flat headseg's for one limit) or none where the leaves have none, and
        the penalty scale ``TREE_SCALE ** k``."""
        if not k:
            return leaves
        grow = TREE_SCALE ** k if limited else TREE_FREE_SCALE ** k
        cap = None if request.max_tokens is None else int(request.max_tokens * grow)
        return replace(leaves, min_chars=None, scale=request.scale * grow,
                       max_chars=None if request.max_chars is None else int(request.max_chars * grow),
                       max_tokens=cap, target_tokens=default_target(cap))

    structure = doc.structure
    heads = structure.headings if structure is not None else ()
    present = sorted({h.level for h in heads})
    def makes_sections(lv: int) -> bool:
        """Whether the headings of level ``lv`` and higher cut the text (a lone ``# Title`` does not)."""
        return sum(h.level <= lv for h in heads) > 1 and any(h.level <= lv and h.start > 0 for h in heads)

    top = next((j for j, lv in enumerate(present) if makes_sections(lv)), len(present) - 1)

    def level_headings(k: int) -> int | None:
        """The leaves see every heading (None); each level above drops the deepest heading level left,
        down to the highest ones that still make sections, so ``##`` sections anchor the top of the
        tree and ``###`` ones only the bottom."""
        if not k or len(present) < 2:
            return None
        return present[max(top, len(present) - 1 - k)]

    def search(k: int, finer: Sequence[int] | None) -> TreeLevel:
        scale = TREE_SCALE ** k if limited else TREE_FREE_SCALE ** k
        # a segment of the finer level is never longer than the coarse search may consider
        longest = int(np.diff([0, *finer, len(units)]).max()) if finer is not None else 0
        p = replace(params, max_units=min(len(units), max(longest, int(round(params.max_units * scale)))))
        if k and not limited:
            p = replace(p, min_evidence=max(params.min_evidence, 1.0) * TREE_EVIDENCE ** k)
        found = document_boundaries(doc, x, level_request(k), p, headings_up_to=level_headings(k),
                                    allowed=finer, memo=memo)
        return TreeLevel(tuple(int(c) for c in found.cuts), tuple(float(sc) for sc in found.scores),
                         tuple(float(c) for c in found.confidence))

    memo = StatisticsMemo()  # the levels search the same vectors: their local statistics, measured once
    most = depth if depth is not None else TREE_MAX_DEPTH
    out = [search(0, None)]
    k = 1
    fanout = TREE_FANOUT if limited else 1
    while len(out) < most and out[0].cuts and (depth is not None or len(out[0].cuts) + 1 > fanout):
        if k > TREE_MAX_SEARCHES:
            break
        level = search(k, out[0].cuts)
        k += 1
        if level.cuts != out[0].cuts:
            out.insert(0, level)
    if len(out) > 1 and not out[0].cuts:
        out = out[1:]  # the document's one child: not a level
    return out


def tree_nodes(levels: Sequence[TreeLevel], units: Sequence[tuple[int, int]],
               length: int) -> tuple[list[int], list[float], list[Node]]:
    """The segment tree of ``levels`` (:func:`tree_levels`' list) over ``units`` (character spans tiling
    a text of ``length`` characters): the character offsets opening leaves 2..n, their scores, and
    the nodes in pre-order (:class:`~headseg.analysis.segments.Node`, no token counts or headings yet;
    each node's confidence that of the boundary opening it at the level it was made from, None at the
    start of the text and where the level was not tested).

    A node's children are the segments of the first finer level that cuts inside it; a node no finer
    level cuts is a leaf, so the leaves are the finest level's segments and no node has one child.
    """
    if length == 0:
        return [], [], []
    offset = [a for a, _ in units] + [length]
    bounds = [[0, *lv.cuts, len(units)] for lv in levels]
    strength = [dict(zip(lv.cuts, lv.scores)) for lv in levels]
    sure = [dict(zip(lv.cuts, lv.confidence)) for lv in levels]
    nodes: list[Node] = []
    leaves: list[tuple[int, float]] = []

    def grow(a: int, b: int, level: int, parent: int | None, depth: int) -> None:
        while level < len(levels) and not any(a < c < b for c in levels[level].cuts):
            level += 1
        if level == len(levels):
            if parent is None:  # no level cuts the text: the document's one child
                nodes.append(Node(0, None, 1, 0, length, 0.0))
            leaves.append((offset[a], nodes[-1].score))
            return
        edges = [c for c in bounds[level] if a <= c <= b]
        for lo, hi in zip(edges, edges[1:]):
            nodes.append(Node(len(nodes), parent, depth, offset[lo], offset[hi], strength[level].get(lo, 0.0),
                              confidence=sure[level].get(lo)))
            grow(lo, hi, level + 1, nodes[-1].id, depth + 1)

    grow(0, len(units), 0, None, 1)
    return [o for o, _ in leaves[1:]], [sc for _, sc in leaves[1:]], nodes


__all__ = ("TREE_EVIDENCE", "TREE_FANOUT", "TREE_FREE_SCALE", "TREE_MAX_DEPTH", "TREE_SCALE", "TreeLevel",
           "tree_levels", "tree_nodes")
