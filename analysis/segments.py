"""The segmentation result type: segments with exact character offsets, and the nodes of a segment tree.

Invariant: segments tile the text, so ``"".join(s.text for s in seg) == seg.text``.  A segment tree
(``level="tree"``) also has its :class:`Node` list: the children of every node tile it, the nodes
of depth 1 tile the text, and the nodes without children are the segments, in order.

The records (:data:`RECORD_FIELDS`, one per node; a flat segmentation is a tree of depth 1):
``document``; ``id``, the node's number in the document in pre-order (a parent before its
children); ``parent``, its parent's ``id`` (None at depth 1, under the document); ``depth`` (1 for
the document's children); ``index``, its number among the segments (the leaves), None for a
node that has children; ``start``, ``end``, ``text`` (``text[start:end]``), ``score`` (the
strength of the boundary that opens it, at its own depth; 0 at the text's start), ``confidence`` (the
calibrated confidence of that boundary, in [0, 1]; None at the text's start and where nothing tested it,
as in the unit level), ``token_count`` and ``headings`` as :class:`Segment`'s; ``overlap_chars``, None
unless overlapped chunks were asked for.

Overlapped chunks (the topic level's ``overlap`` option; :attr:`Segmentation.chunks`): the records are
then the chunks, one per segment, in place of the segments: ``start``/``end``/``text``/``token_count`` are
the chunk's, and ``overlap_chars`` says how many characters at the start of its ``text`` repeat the end of
the segment before (0 for the first), so the segment itself is ``text[overlap_chars:]`` from
``start + overlap_chars``; ``index``, ``score``, ``confidence`` and ``headings`` are the segment's.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, Sequence

from .errors import HeadsegError, shown


@dataclass(frozen=True)
class RecordField:
    """One field of a segment record: its name, its value type (``str``, ``int``, ``float``, or ``list`` of
    strings), whether it may be None, and whether a node of :meth:`Segmentation.to_dict`'s tree carries it."""

    name: str
    type: type
    optional: bool = False
    in_tree: bool = True


#: the record schema, declared once: the fields of one segment record (:meth:`Segmentation.to_records`), in
#: output order; the JSON document record, the Parquet columns and the Ray engine's rows are made from it
RECORD_SCHEMA = (RecordField("document", str, optional=True, in_tree=False),
                 RecordField("index", int, optional=True, in_tree=False),
                 RecordField("start", int), RecordField("end", int), RecordField("score", float),
                 RecordField("confidence", float, optional=True), RecordField("text", str),
                 RecordField("token_count", int, optional=True),
                 RecordField("headings", list), RecordField("id", int),
                 RecordField("parent", int, optional=True, in_tree=False), RecordField("depth", int),
                 RecordField("overlap_chars", int, optional=True, in_tree=False))

#: the fields of one segment record, in output order
RECORD_FIELDS = tuple(f.name for f in RECORD_SCHEMA)

#: the fields of a node of :meth:`Segmentation.to_dict`'s ``"tree"``, in output order (its id first; its
#: ``"children"`` follow)
TREE_FIELDS = ("id",) + tuple(f.name for f in RECORD_SCHEMA if f.in_tree and f.name != "id")


@dataclass(frozen=True)
class Segment:
    """``text[start:end]``; ``score`` is the strength of the boundary that *opens* it (0 for the first).

    ``token_count``: the segment's size in the tokens its ``max_tokens`` limit is
    measured in: the ``token_counter``'s when one was given, else the segmenter
    model's (a token of the document belongs to the segment its first character
    falls in).  None when the segment was not made by a segmenter.
    ``headings``: the titles of the headings above the segment's start, outermost first
    (a heading it opens with included; empty in plain text); metadata, never part of ``text``.
    ``confidence``: how sure the segmenter is of the boundary that opens it, a calibrated
    probability in [0, 1] (:mod:`headseg.segmenter.evidence`); None for the first segment and
    where no test was made (the unit level).
    """

    start: int
    end: int
    text: str
    score: float = 0.0
    token_count: int | None = None
    headings: tuple[str, ...] = ()
    confidence: float | None = None

    def __post_init__(self) -> None:
        c = self.confidence
        if c is not None and not 0.0 <= c <= 1.0:
            raise HeadsegError(f"a segment's confidence must be in [0, 1] (got {shown(c)})")

    def to_dict(self) -> dict:
        """The segment as a JSON-ready dict (start, end, score, confidence, text, token_count, headings)."""
        return {"start": self.start, "end": self.end, "score": self.score, "confidence": self.confidence,
                "text": self.text, "token_count": self.token_count, "headings": list(self.headings)}


@dataclass(frozen=True)
class Node:
    """One node of a segment tree: the span ``[start, end)`` at ``depth`` (1: a child of the document),
    under node ``parent`` (None at depth 1); ``id`` is its position in pre-order.  ``score``,
    ``confidence``, ``token_count`` and ``headings`` as :class:`Segment`'s, ``score`` and ``confidence``
    those of the boundary that opens the node at its own depth."""

    id: int
    parent: int | None
    depth: int
    start: int
    end: int
    score: float = 0.0
    token_count: int | None = None
    headings: tuple[str, ...] = ()
    confidence: float | None = None


def check_tree(text: str, segments: Sequence[Segment], nodes: Sequence[Node]) -> None:
    """Raise :class:`HeadsegError` unless ``nodes`` are a segment tree of ``text`` whose leaves are
    ``segments``: ids 0..n−1 in pre-order, each parent before its children one depth up, the
    children of every node (the document's: depth 1) tiling it, the childless nodes the segments."""
    children: dict[int | None, list[Node]] = {None: []}
    for i, n in enumerate(nodes):
        if n.id != i:
            raise HeadsegError(f"tree node {i} has id {n.id}: ids are the pre-order positions")
        if n.parent is None:
            if n.depth != 1:
                raise HeadsegError(f"tree node {i} has no parent but depth {n.depth}")
        elif not 0 <= n.parent < i or nodes[n.parent].depth != n.depth - 1:
            raise HeadsegError(f"tree node {i}: parent {n.parent} is not a node one depth up before it")
        if n.end <= n.start:
            raise HeadsegError(f"tree node {i} is empty ({n.start}..{n.end})")
        children.setdefault(n.parent, []).append(n)
        children.setdefault(n.id, [])
    for pid, kids in children.items():
        lo, hi = (0, len(text)) if pid is None else (nodes[pid].start, nodes[pid].end)
        if not kids:
            continue
        if len(kids) == 1 and pid is not None:
            raise HeadsegError(f"tree node {pid} has a single child")
        pos = lo
        for k in kids:
            if k.start != pos:
                raise HeadsegError(f"the children of tree node {pid} do not tile it at offset {pos}")
            pos = k.end
        if pos != hi:
            raise HeadsegError(f"the children of tree node {pid} end at {pos}, the node at {hi}")
    leaves = [(n.start, n.end) for n in nodes if not children[n.id]]
    if leaves != [(s.start, s.end) for s in segments]:
        raise HeadsegError("the tree's leaves are not the segments")


def _confidence(record: dict) -> float | None:
    """A record's ``confidence`` (absent in records written before it existed: None)."""
    c = record.get("confidence")
    return None if c is None else float(c)


def check_chunks(text: str, segments: Sequence[Segment], chunks: Sequence[Segment]) -> None:
    """Raise :class:`HeadsegError` unless ``chunks`` are overlapped chunks of ``segments``: one per segment,
    each ending where its segment ends and starting at or after the start of the segment before it (at
    its own segment's start for the first), its text ``text[start:end]``."""
    if len(chunks) != len(segments):
        raise HeadsegError(f"{len(chunks)} overlapped chunks for {len(segments)} segments: one per segment")
    for i, (c, s) in enumerate(zip(chunks, segments)):
        earliest = segments[i - 1].start if i else s.start
        if c.end != s.end or not earliest <= c.start <= s.start or text[c.start:c.end] != c.text:
            raise HeadsegError(f"overlapped chunk {i} ({c.start}..{c.end}) does not hold its segment "
                               f"({s.start}..{s.end}) and at most the one before")


def _read_leaves(rows: Sequence[dict]) -> tuple[str, list[Segment], list[Segment]]:
    """The text, the segments and the overlapped chunks (empty without ``overlap_chars``) of the leaf
    records ``rows``, in order: a chunk's record holds its segment from ``overlap_chars`` on (whose own
    token count it does not hold: None)."""
    segs, chunks = [], []
    for r in rows:
        start, end, text, score = int(r["start"]), int(r["end"]), r["text"], float(r["score"])
        heads = tuple(str(h) for h in (r.get("headings") or ()))
        k = r.get("overlap_chars")
        sure = _confidence(r)
        if k is None:
            segs.append(Segment(start, end, text, score, r.get("token_count"), heads, sure))
            continue
        chunks.append(Segment(start, end, text, score, r.get("token_count"), heads, sure))
        segs.append(Segment(start + int(k), end, text[int(k):], score, None, heads, sure))
    return "".join(s.text for s in segs), segs, chunks


@dataclass
class Segmentation:
    """An ordered list of segments covering ``text`` exactly; for a segment tree, also its nodes
    (pre-order, :class:`Node`; empty for a flat segmentation), checked by :func:`check_tree`; with the
    ``overlap`` option, the overlapped chunks (one per segment, :func:`check_chunks`; else empty)."""

    text: str
    segments: list[Segment]
    level: str = "topic"
    meta: dict = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    #: each segment widened to its overlapped chunk: the end of the segment before repeated (``overlap``)
    chunks: list[Segment] = field(default_factory=list)

    def __post_init__(self):
        pos = 0
        for s in self.segments:
            if s.start != pos or s.end < s.start or self.text[s.start : s.end] != s.text:
                raise HeadsegError(f"segments do not tile the text at offset {pos}")
            pos = s.end
        if pos != len(self.text):
            raise HeadsegError(f"segments end at {pos}, the text at {len(self.text)}")
        if self.nodes:
            check_tree(self.text, self.segments, self.nodes)
        if self.chunks:
            check_chunks(self.text, self.segments, self.chunks)

    def annotated(self, token_count: Callable[[int, int], int] | None = None,
                  headings: Callable[[int], tuple[str, ...]] | None = None) -> "Segmentation":
        """A copy whose segments and tree nodes carry ``token_count(start, end)`` and ``headings(start)``
        (None: keep each one's own).  Only those fields change, never a span, so the invariants checked
        when this segmentation was built still hold: the copy is not checked again (a segment tree
        is annotated once, not re-validated for each field)."""
        def count(a: int, b: int, own: int | None) -> int | None:
            return own if token_count is None else int(token_count(a, b))

        def path(a: int, own: tuple[str, ...]) -> tuple[str, ...]:
            return own if headings is None else tuple(headings(a))

        out = copy.copy(self)  # no __init__, so no __post_init__: the spans are this one's
        out.segments = [replace(s, token_count=count(s.start, s.end, s.token_count), headings=path(s.start, s.headings))
                        for s in self.segments]
        out.nodes = [replace(n, token_count=count(n.start, n.end, n.token_count), headings=path(n.start, n.headings))
                     for n in self.nodes]
        # a chunk is counted whole, and is under its segment's headings (what it repeats is context)
        out.chunks = [replace(c, token_count=count(c.start, c.end, c.token_count), headings=s.headings)
                      for c, s in zip(self.chunks, out.segments)]
        out.meta = dict(self.meta)
        return out

    def tree_nodes(self) -> list[Node]:
        """The nodes of the tree, pre-order; a flat segmentation's are its segments at depth 1."""
        if self.nodes:
            return list(self.nodes)
        return [Node(i, None, 1, s.start, s.end, s.score, s.token_count, s.headings, s.confidence)
                for i, s in enumerate(self.segments)]

    def inner_ids(self) -> frozenset[int]:
        """The ids of the tree nodes that have children: every other node is a leaf, one of the segments.
        Empty for a flat segmentation.  The one place this is derived (records, paths, adapters)."""
        return frozenset(n.parent for n in self.nodes if n.parent is not None)

    def node_paths(self) -> list[str]:
        """Each tree node's place, pre-order: its child numbers from the document down (``"2.1.3"``);
        a flat segmentation's are ``"1"``, ``"2"``, ... (the text format, the TUI)."""
        path: dict[int | None, str] = {None: ""}
        count: dict[int | None, int] = {}
        out = []
        for n in self.tree_nodes():
            count[n.parent] = count.get(n.parent, 0) + 1
            path[n.id] = f"{path[n.parent]}.{count[n.parent]}".lstrip(".")
            out.append(path[n.id])
        return out

    def __iter__(self) -> Iterator[Segment]:
        return iter(self.segments)

    def __len__(self) -> int:
        return len(self.segments)

    def __getitem__(self, i):
        return self.segments[i]

    def to_dict(self, document: str | None = None) -> dict:
        """The JSON record of ``headseg segment --format json`` (the one definition of that schema).

        ``{"document", "level", "segments": [{"index", "start", "end", "score", "text",
        "token_count", "headings", "id", "parent", "depth", "overlap_chars"}]}`` (the module's record
        fields; for a tree the segments are its leaves, with ``chunks`` the overlapped chunks), and for a segment tree ``"tree"``: the document's
        children, each node ``{"id", "start", "end", "score", "text", "token_count", "headings",
        "depth", "children": [...]}``.  Scores are rounded to 6 decimals.  ``document`` defaults to
        the id the segmentation carries (``meta["document"]``, set by ``Segmenter.iter_segment``
        for a record or an ``(id, text)`` pair).
        """
        rows = [{k: v for k, v in r.items() if k != "document"} for r in self.to_records()]
        out = {
            "document": self.meta.get("document") if document is None else document,
            "level": self.level,
            "segments": [r for r in rows if r["index"] is not None],
        }
        if self.nodes or self.level == "tree":
            kids: dict[int | None, list[dict]] = {}
            for r in rows:
                node = {k: r[k] for k in TREE_FIELDS}
                node["children"] = kids.setdefault(r["id"], [])
                kids.setdefault(r["parent"], []).append(node)
            out["tree"] = kids.get(None, [])
        return out

    def to_records(self, document: str | None = None) -> list[dict]:
        """One flat record per node, pre-order (``--format jsonl``, Parquet): :data:`RECORD_FIELDS`;
        a flat segmentation's nodes are its segments, or with :attr:`chunks` its overlapped chunks (the
        module's docstring).  Scores are rounded to 6 decimals.  The one place a record is built: every
        output format and engine, the service and the adapters read it."""
        doc = document if document is not None else self.meta.get("document")
        inner = self.inner_ids()
        rows, leaf = [], 0
        for n in self.tree_nodes():
            index = None if n.id in inner else leaf
            leaf += index is not None
            values = {"document": doc, "index": index, "start": n.start, "end": n.end, "score": round(n.score, 6),
                      "confidence": None if n.confidence is None else round(n.confidence, 6),
                      "text": self.text[n.start:n.end], "token_count": n.token_count,
                      "headings": list(n.headings), "id": n.id, "parent": n.parent, "depth": n.depth,
                      "overlap_chars": None}
            if self.chunks and index is not None:
                c = self.chunks[index]
                values |= {"start": c.start, "text": c.text, "token_count": c.token_count,
                           "overlap_chars": n.start - c.start}
            rows.append({k: values[k] for k in RECORD_FIELDS})  # in the schema's order
        return rows

    @classmethod
    def from_records(cls, records: Sequence[dict], level: str = "topic") -> "Segmentation":
        """Rebuild from one document's :meth:`to_records` rows (read back from JSONL or Parquet): the text is
        the leaves' texts joined; a tree's nodes are kept when there is one (``level="tree"`` or a parent)."""
        try:
            rows = sorted(records, key=lambda r: int(r["id"]))
            text, segs, chunks = _read_leaves([r for r in rows if r["index"] is not None])
            tree = level == "tree" or any(r["parent"] is not None for r in rows)
            nodes = [Node(int(r["id"]), None if r["parent"] is None else int(r["parent"]), int(r["depth"]),
                          int(r["start"]), int(r["end"]), float(r["score"]), r.get("token_count"),
                          tuple(str(h) for h in (r.get("headings") or ())), _confidence(r))
                     for r in rows] if tree else []
        except (KeyError, TypeError, ValueError) as exc:
            raise HeadsegError(f"not the records of a segmentation: {type(exc).__name__}: {exc}") from None
        return cls(text=text, segments=segs, level=level, nodes=nodes, chunks=chunks)

    def to_json(self, document: str | None = None, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON text (non-ASCII kept as is)."""
        return json.dumps(self.to_dict(document), indent=indent, ensure_ascii=False)

    @classmethod
    def from_dict(cls, record: dict) -> "Segmentation":
        """Rebuild from a :meth:`to_dict` record (the text is the segments' texts joined)."""
        try:
            text, segs, chunks = _read_leaves(sorted(record["segments"], key=lambda r: r["index"]))
            level = record.get("level", "topic")
            nodes: list[Node] = []

            def walk(items: list, parent: int | None, depth: int) -> None:
                for r in items:
                    nodes.append(Node(len(nodes), parent, depth, int(r["start"]), int(r["end"]), float(r["score"]),
                                      r.get("token_count"), tuple(str(h) for h in (r.get("headings") or ())),
                                      _confidence(r)))
                    walk(r.get("children") or [], nodes[-1].id, depth + 1)

            walk(record.get("tree") or [], None, 1)
        except (KeyError, TypeError, ValueError) as exc:
            raise HeadsegError(f"not a segmentation record: {type(exc).__name__}: {exc}") from None
        return cls(text=text, segments=segs, level=level, nodes=nodes, chunks=chunks)

    @property
    def boundaries(self) -> list[int]:
        """Character offsets where a new segment starts (excluding 0)."""
        return [s.start for s in self.segments[1:]]

    @classmethod
    def from_boundaries(
        cls,
        text: str,
        boundaries: Sequence[int],
        scores: Sequence[float] | None = None,
        level: str = "topic",
        meta: dict | None = None,
        nodes: Sequence[Node] = (),
        confidence: Sequence[float] | None = None,
    ) -> "Segmentation":
        """Build from the start offsets of segments 2..n (sorted, inside ``(0, len(text))``); ``nodes``:
        a segment tree whose leaves they are (checked with the segments, once); ``confidence``: one
        per boundary (None: untested)."""
        cuts = [int(b) for b in boundaries]
        if any(b <= 0 or b >= len(text) for b in cuts) or cuts != sorted(set(cuts)):
            raise HeadsegError("boundaries must be sorted, unique and inside the text")
        scores = list(scores) if scores is not None else [1.0] * len(cuts)
        if len(scores) != len(cuts):
            raise HeadsegError("one score per boundary")
        sure = [None] * len(cuts) if confidence is None else [float(c) for c in confidence]
        if len(sure) != len(cuts):
            raise HeadsegError("one confidence per boundary")
        starts = [0] + cuts
        ends = cuts + [len(text)]
        segs = [
            Segment(a, b, text[a:b], float(0.0 if i == 0 else scores[i - 1]),
                    confidence=None if i == 0 else sure[i - 1])
            for i, (a, b) in enumerate(zip(starts, ends))
        ]
        if not text:
            segs = []
        return cls(text=text, segments=segs, level=level, meta=dict(meta or {}), nodes=list(nodes))
