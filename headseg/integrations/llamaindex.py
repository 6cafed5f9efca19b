"""LlamaIndex node parser: topic segments with exact offsets and hard size limits.

>>> from llama_index.core import Document
>>> from headseg.integrations.llamaindex import HeadsegNodeParser
>>> parser = HeadsegNodeParser(max_chars=1500)
>>> nodes = parser.get_nodes_from_documents([Document(text=text)])
>>> text[nodes[0].start_char_idx:nodes[0].end_char_idx] == nodes[0].text
True

LlamaIndex's own parsers recover ``start_char_idx`` with ``str.find`` after
splitting, which lands on the wrong occurrence of repeated text; here the
offsets are headseg's, relative to the text of the node that was parsed.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from typing import Any, Dict, List, Optional, Sequence

from headseg.analysis.extras import missing_extra

try:
    from llama_index.core.bridge.pydantic import Field, PrivateAttr, create_model
    from llama_index.core.node_parser import NodeParser
    from llama_index.core.node_parser.node_utils import build_nodes_from_splits
    from llama_index.core.schema import BaseNode, Document, MetadataMode, NodeRelationship
    from llama_index.core.utils import get_tqdm_iterable
except ModuleNotFoundError as exc:  # the framework is the extra's: say which one to install
    raise missing_extra(__name__, "llamaindex", exc) from None

from headseg.api import Segmenter
from headseg.segmenter.options import SegmentOptions, option_names

from ._common import (UNPICKLABLE, SegmenterRunner, TreeChunk, chunk_segments, overlap_chars, refuse_foreign_overlap,
                      tree_chunks)

__all__ = ["HeadsegNodeParser"]


def _option_fields() -> dict[str, Any]:
    """One pydantic field per :class:`SegmentOptions` field, with its type and default.

    The options shown on the command line are plain values, validated and
    serialised like any field; the others hold Python objects (a token counter,
    a sentence splitter) and are left out of :meth:`to_dict`.
    """
    hints = typing.get_type_hints(SegmentOptions)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(SegmentOptions):
        cli = f.metadata.get("cli")
        if cli:
            out[f.name] = (hints[f.name], Field(default=f.default, description=cli["help"]))
        else:
            out[f.name] = (Any, Field(default=f.default, exclude=True,
                                      description=f"{f.name} of headseg.segmenter.options.SegmentOptions"))
    return out


# The options as fields of a base model: declared once, in SegmentOptions, and
# still keyword arguments, attributes and to_dict() keys of the parser.
_OptionFields = create_model("HeadsegOptionFields", __base__=NodeParser, __module__=__name__, **_option_fields())


class HeadsegNodeParser(_OptionFields):
    """Parse documents into headseg topic segments (or units with ``level="unit"``).

    Takes a ready ``segmenter`` or ``model``/``profile``/``backend``/``device`` to
    build one on first use, and the fields of
    :class:`~headseg.segmenter.options.SegmentOptions` (the options of
    :meth:`headseg.Segmenter.segment`), which are fields of the parser too.
    Nodes get ``start_char_idx``/``end_char_idx`` from headseg's offsets, the
    source relationship, and previous/next relationships within a document.
    With ``level="tree"`` every node of the segment tree is a node, parents first, with the
    PARENT/CHILD relationships of LlamaIndex's ``HierarchicalNodeParser`` (``get_leaf_nodes``,
    ``get_root_nodes``, ``AutoMergingRetriever``) and ``metadata["depth"]``.
    """

    model: Optional[str] = Field(default=None, description="model directory or cached name (default: embedded)")
    profile: Optional[str] = Field(default=None, description="head profile path (default: shipped or fallback)")
    backend: str = Field(default="auto", description="auto, torch or onnx")
    device: Optional[str] = Field(default=None, description="auto, cpu or cuda")

    _runner: SegmenterRunner = PrivateAttr()
    _given: bool = PrivateAttr(default=False)

    def __init__(self, segmenter: Segmenter | None = None, **data: Any):
        refuse_foreign_overlap(type(self).__name__, data)
        unknown = sorted(set(data) - set(type(self).model_fields))
        if unknown:  # pydantic would ignore it: a misspelt option must not be silently dropped
            raise TypeError(f"unexpected keyword argument {unknown[0]!r} "
                            f"(the segmentation options are {', '.join(option_names())})")
        for key in ("model", "profile"):
            if isinstance(data.get(key), os.PathLike):
                data[key] = os.fspath(data[key])
        super().__init__(**data)
        self._given = segmenter is not None
        self._runner = self._make_runner(segmenter)

    def _make_runner(self, segmenter: Segmenter | None) -> SegmenterRunner:
        return SegmenterRunner(segmenter, model=self.model, profile=self.profile, backend=self.backend,
                               device=self.device, **{name: getattr(self, name) for name in option_names()})

    def __setattr__(self, name: str, value: Any) -> None:
        # The options are the parser's fields, read by LlamaIndex code and users alike: a change is
        # validated now and used by the next parse (a loaded segmenter is kept unless the model changes).
        if name not in _RUNNER_FIELDS:
            return super().__setattr__(name, value)
        old = getattr(self, name)
        super().__setattr__(name, value)
        keep = self._runner._segmenter if self._given or name in option_names() else None
        try:
            self._runner = self._make_runner(keep)
        except BaseException:
            super().__setattr__(name, old)
            raise

    def __getstate__(self) -> dict[str, Any]:
        # LlamaIndex's own __getstate__ drops what does not pickle, with a warning on the root logger;
        # a parser over a given Segmenter would then segment with the default model in the other process.
        if self._given:
            raise TypeError(UNPICKLABLE)
        return super().__getstate__()

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises the parser under."""
        return "HeadsegNodeParser"

    @property
    def segmenter(self) -> Segmenter:
        """The segmenter (the model loads on first access)."""
        return self._runner.segmenter

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> List[BaseNode]:
        nodes = list(nodes)
        # one call for all texts, so the model batches across documents
        return self._children(nodes, self._runner.segment_many(_texts(nodes)), show_progress)

    async def _aparse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False,
                            **kwargs: Any) -> List[BaseNode]:
        # aget_nodes_from_documents: on Segmenter.asegment_many, the event loop never blocked
        nodes = list(nodes)
        return self._children(nodes, await self._runner.asegment_many(_texts(nodes)), show_progress)

    def _children(self, nodes: List[BaseNode], results: list, show_progress: bool) -> List[BaseNode]:
        """The child nodes of each node's segments, with headseg's offsets."""
        out: List[BaseNode] = []
        for node, result in get_tqdm_iterable(list(zip(nodes, results)), show_progress, "Parsing nodes"):
            tree = tree_chunks(result)
            chunks = chunk_segments(result) if tree is None else [t.segment for t in tree]
            children = build_nodes_from_splits([s.text for s in chunks], node, id_func=self.id_func)
            repeated = overlap_chars(result) if tree is None else [None] * len(chunks)
            for child, s, k in zip(children, chunks, repeated):
                child.start_char_idx = s.start
                child.end_char_idx = s.end
                if s.headings:  # the heading path above it (Markdown; plain text has none)
                    child.metadata["headings"] = list(s.headings)
                if s.confidence is not None:  # how sure headseg is of the boundary opening it (a number: not embedded)
                    child.metadata["confidence"] = s.confidence
                    for keys in (child.excluded_embed_metadata_keys, child.excluded_llm_metadata_keys):
                        keys.append("confidence")
                if k is not None:  # overlap=N: what the chunk repeats of the one before (a number: not embedded)
                    child.metadata["overlap_chars"] = k
                    for keys in (child.excluded_embed_metadata_keys, child.excluded_llm_metadata_keys):
                        keys.append("overlap_chars")
            if tree is not None:
                _link_tree(children, tree)
            out.extend(children)
        return out

    def _postprocess_parsed_nodes(self, nodes: List[BaseNode], parent_doc_map: Dict[str, Document]
                                  ) -> List[BaseNode]:
        # The base class merges metadata and links prev/next (kept), but also
        # re-finds every node's offsets with str.find: put headseg's back.
        offsets = [(n.start_char_idx, n.end_char_idx) for n in nodes]
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for n, (a, b) in zip(nodes, offsets):
            n.start_char_idx, n.end_char_idx = a, b
        _chain_tree_levels(nodes)
        return nodes


_RUNNER_FIELDS = frozenset((*option_names(), "model", "profile", "backend", "device"))


def _link_tree(nodes: List[BaseNode], tree: list[TreeChunk]) -> None:
    """PARENT/CHILD relationships between ``nodes``, one per node of ``tree`` (pre-order), as LlamaIndex's
    ``HierarchicalNodeParser`` sets them (so ``get_leaf_nodes``, ``get_root_nodes`` and
    ``AutoMergingRetriever`` take them), and each node's ``depth`` in its metadata (not embedded)."""
    for node, t in zip(nodes, tree):
        node.metadata["depth"] = t.depth
        for keys in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
            if "depth" not in keys:
                keys.append("depth")
        if t.parent is not None:
            parent = nodes[t.parent]
            node.relationships[NodeRelationship.PARENT] = parent.as_related_node_info()
            parent.relationships[NodeRelationship.CHILD] = [
                *(parent.relationships.get(NodeRelationship.CHILD) or []), node.as_related_node_info()]


def _chain_tree_levels(nodes: List[BaseNode]) -> None:
    """PREVIOUS/NEXT within each segment tree: the base class links consecutive nodes of a source,
    which in pre-order joins a parent to its own first child; here the leaves are linked in reading
    order, and the inner nodes of each depth among themselves.  A source is a tree when one of its
    nodes has a parent (a one-level tree is its leaves, which the base class links right)."""
    def source(n: BaseNode) -> str | None:
        return n.source_node.node_id if n.source_node is not None else None

    trees = {source(n) for n in nodes if NodeRelationship.PARENT in n.relationships}
    groups: Dict[tuple, List[BaseNode]] = {}
    for n in nodes:
        if source(n) in trees:
            leaf = NodeRelationship.CHILD not in n.relationships
            groups.setdefault((source(n), "leaf" if leaf else n.metadata["depth"]), []).append(n)
    for chain in groups.values():
        for n in chain:
            n.relationships.pop(NodeRelationship.PREVIOUS, None)
            n.relationships.pop(NodeRelationship.NEXT, None)
        for a, b in zip(chain, chain[1:]):
            a.relationships[NodeRelationship.NEXT] = b.as_related_node_info()
            b.relationships[NodeRelationship.PREVIOUS] = a.as_related_node_info()


def _texts(nodes: Sequence[BaseNode]) -> list[str]:
    """The plain text of each node (no metadata), as the splitter sees it."""
    return [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
