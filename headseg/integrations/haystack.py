"""Haystack 2 component: topic segments with exact offsets and hard size limits.

>>> from haystack import Document
>>> from headseg.integrations.haystack import HeadsegDocumentSplitter
>>> splitter = HeadsegDocumentSplitter(max_chars=1500)
>>> splitter.warm_up()
>>> chunks = splitter.run([Document(content=text)])["documents"]

Each chunk's ``meta`` is a copy of its document's, plus ``source_id`` (the
document's id), ``split_id`` (its index in the document), ``split_idx_start``
(its exact character offset) and ``page_number`` (pages split by form feeds),
as Haystack's own ``DocumentSplitter`` writes them.  With ``level="tree"`` the
output is the document and every node of its segment tree, linked as Haystack's
``HierarchicalDocumentSplitter`` links them (``__parent_id``, ``__children_ids``,
``__level``), for its ``AutoMergingRetriever``.
"""

from __future__ import annotations

import os
from copy import deepcopy
from typing import Any

from headseg.analysis.extras import missing_extra

try:
    from haystack import Document, component, default_from_dict, default_to_dict
    from haystack.core.errors import SerializationError
except ModuleNotFoundError as exc:  # the framework is the extra's: say which one to install
    raise missing_extra(__name__, "haystack", exc) from None

from headseg.api import Segmenter
from headseg.segmenter.options import option_names

from ._common import (SegmenterRunner, TreeChunk, chunk_segments, overlap_chars, page_numbers, refuse_foreign_overlap,
                      tree_chunks)

__all__ = ["HeadsegDocumentSplitter"]


@component
class HeadsegDocumentSplitter:
    """Split documents into headseg topic segments (or units with ``level="unit"``).

    Takes a ready ``segmenter`` or ``model``/``profile``/``backend``/``device``,
    loaded once by :meth:`warm_up` (or the first :meth:`run`), and the fields of
    :class:`~headseg.segmenter.options.SegmentOptions` as keyword arguments (the
    options of :meth:`headseg.Segmenter.segment`).  Documents with empty content
    are skipped unless ``skip_empty_documents`` is False.
    """

    def __init__(self, segmenter: Segmenter | None = None, model: str | None = None, profile: str | None = None,
                 backend: str = "auto", device: str | None = None, *, skip_empty_documents: bool = True,
                 **options: Any):
        refuse_foreign_overlap("HeadsegDocumentSplitter", options)
        self.runner = SegmenterRunner(segmenter, model=model, profile=profile, backend=backend, device=device,
                                      **options)
        self.skip_empty_documents = skip_empty_documents
        self._given_segmenter = segmenter is not None

    def warm_up(self) -> None:
        """Load the model (once; later calls do nothing)."""
        self.runner.segmenter

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """Split ``documents``; returns ``{"documents": [chunks, in document order]}``."""
        todo = self._todo(documents)
        # one call for all documents, so the model batches across them
        return self._chunks(todo, self.runner.segment_many([d.content for d in todo]))

    @component.output_types(documents=list[Document])
    async def run_async(self, documents: list[Document]) -> dict[str, list[Document]]:
        """:meth:`run` for Haystack's async pipelines, on :meth:`Segmenter.asegment_many` (the event loop
        is never blocked; concurrent runs share the model through one batcher)."""
        todo = self._todo(documents)
        return self._chunks(todo, await self.runner.asegment_many([d.content for d in todo]))

    def _todo(self, documents: list[Document]) -> list[Document]:
        """The documents to split, after checking them (empty ones dropped with ``skip_empty_documents``)."""
        if not isinstance(documents, list) or any(not isinstance(d, Document) for d in documents):
            raise TypeError("HeadsegDocumentSplitter expects a list of Documents")
        todo = []
        for doc in documents:
            if doc.content is None:
                raise ValueError(f"HeadsegDocumentSplitter needs text documents; document {doc.id} has no content")
            if doc.content == "" and self.skip_empty_documents:
                continue
            todo.append(doc)
        return todo

    def _chunks(self, todo: list[Document], results: list) -> dict[str, list[Document]]:
        """``{"documents": [...]}``: one Document per segment, with its source, index, offset and page."""
        out = []
        for doc, result in zip(todo, results):
            tree = tree_chunks(result)
            if tree is not None:
                out.extend(_tree_documents(doc, tree))
                continue
            chunks = chunk_segments(result)
            repeated = overlap_chars(result)
            for i, (s, page) in enumerate(zip(chunks, page_numbers(doc.content, chunks))):
                meta = deepcopy(doc.meta)
                meta.update(source_id=doc.id, split_id=i, split_idx_start=s.start, page_number=page)
                if repeated[i] is not None:  # overlap=N: what the chunk repeats of the one before
                    meta["overlap_chars"] = repeated[i]
                if s.headings:  # the heading path above the chunk (Markdown; plain text has none)
                    meta["headings"] = list(s.headings)
                if s.confidence is not None:  # how sure headseg is of the boundary opening it (0-1)
                    meta["confidence"] = s.confidence
                out.append(Document(content=s.text, meta=meta))
        return {"documents": out}

    def to_dict(self) -> dict[str, Any]:
        """Serialise for a pipeline file: only a segmenter built from names, and options given as plain
        values, names or paths (a token counter as a tokenizer directory or cached model name), can be."""
        if self._given_segmenter:
            raise SerializationError("HeadsegDocumentSplitter built from a Segmenter object cannot be serialised; "
                                     "build it from model/profile/backend/device instead")
        opts = self.runner.options
        values = opts.settings()
        # The other options hold Python objects (a token counter, a sentence splitter): written by name or
        # path, and only when given, so that a file stays loadable by a version without a newer one.
        values.update({name: _plain(name, getattr(opts, name)) for name in option_names()
                       if name not in values and getattr(opts, name) is not None})
        c = self.runner.config
        profile = self.runner.profile_object if self.runner.profile_object is not None else c.profile
        return default_to_dict(self, model=_plain("model", c.model), profile=_plain("profile", profile),
                               backend=c.backend, device=c.device,
                               skip_empty_documents=self.skip_empty_documents, **values)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HeadsegDocumentSplitter":
        """The splitter :meth:`to_dict` described."""
        return default_from_dict(cls, data)


def _tree_documents(doc: Document, tree: list[TreeChunk]) -> list[Document]:
    """The segment tree of ``doc`` as Haystack's ``HierarchicalDocumentSplitter`` writes one, so its
    ``AutoMergingRetriever`` takes it: the whole document first (``__level`` 0), then every node in
    pre-order with ``__parent_id`` (its parent's id), ``__children_ids``, ``__level`` (its depth) and
    ``__block_size`` (its token count), besides the flat chunks' ``source_id``/``split_id``/... keys."""
    root = Document(content=doc.content, meta={**deepcopy(doc.meta), "__block_size": 0, "__parent_id": None,
                                               "__children_ids": [], "__level": 0})
    made = {None: root}
    pages = page_numbers(doc.content, [t.segment for t in tree])
    out = [root]
    for i, (t, page) in enumerate(zip(tree, pages)):
        s, parent = t.segment, made[t.parent]
        meta = deepcopy(doc.meta)
        meta.update(source_id=doc.id, split_id=i, split_idx_start=s.start, page_number=page,
                    __parent_id=parent.id, __children_ids=[], __level=t.depth, __block_size=s.token_count or 0)
        if s.headings:
            meta["headings"] = list(s.headings)
        if s.confidence is not None:
            meta["confidence"] = s.confidence
        made[t.id] = Document(content=s.text, meta=meta)
        # the id hashes the meta when the Document is made: children's ids are added after
        parent.meta["__children_ids"].append(made[t.id].id)
        out.append(made[t.id])
    return out


def _plain(name: str, value: Any) -> str | None:
    """``value`` as a pipeline file holds it (None, or a name or path); anything else cannot be serialised."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise SerializationError(f"HeadsegDocumentSplitter with a {type(value).__name__} as {name} cannot be serialised; "
                             "a pipeline file holds only names and paths")
