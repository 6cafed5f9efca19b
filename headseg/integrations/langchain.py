"""LangChain text splitter: topic segments with exact offsets and hard size limits.

>>> from langchain_core.documents import Document
>>> from headseg.integrations.langchain import HeadsegTextSplitter
>>> splitter = HeadsegTextSplitter(max_tokens=256, token_counter="BAAI/bge-small-en-v1.5")
>>> chunks = splitter.split_documents([Document(page_content=text, metadata={"source": "a.txt"})])
>>> text[chunks[0].metadata["start_index"]:chunks[0].metadata["end_index"]] == chunks[0].page_content
True

Unlike ``TextSplitter.create_documents``, which finds ``start_index`` with
``str.find`` (wrong on repeated text), the offsets here are headseg's own, and
the chunks tile each document exactly (no stripping), unless ``overlap=N`` asks
each chunk to repeat up to N sentences of the one before it (within the limits;
``start_index`` is then the start of the repeated text).
"""

from __future__ import annotations

import copy
import os
import uuid
from typing import Any, Callable, Iterable, Sequence

from headseg.analysis.extras import missing_extra

try:
    from langchain_core.documents import Document
    from langchain_text_splitters import TextSplitter
except ModuleNotFoundError as exc:  # the framework is the extra's: say which one to install
    raise missing_extra(__name__, "langchain", exc) from None

from headseg.api import Segmenter
from headseg.segmenter.stream import iterable_of

from ._common import SegmenterRunner, chunk_segments, overlap_chars, refuse_foreign_overlap, tree_chunks

__all__ = ["HeadsegTextSplitter"]


class HeadsegTextSplitter(TextSplitter):
    """Split text into headseg topic segments (or units with ``level="unit"``).

    Takes a ready ``segmenter`` or ``model``/``profile``/``backend``/``device`` to
    build one on first use, and the fields of
    :class:`~headseg.segmenter.options.SegmentOptions` as keyword arguments (the
    options of :meth:`headseg.Segmenter.segment`).
    LangChain's ``chunk_size`` and ``length_function`` are accepted too, as
    ``max_tokens`` counted by ``length_function`` (``max_chars`` without one), so
    ``HeadsegTextSplitter.from_huggingface_tokenizer(tokenizer, chunk_size=256)``
    works; ``chunk_overlap`` must be 0 (``overlap=N`` repeats N sentences).
    Each chunk keeps a copy of its document's metadata and, with
    ``add_start_index`` (the default), gets ``start_index`` and ``end_index``:
    ``document.page_content[start_index:end_index] == chunk.page_content``.
    With ``level="tree"`` every node of the segment tree is a Document, parents before their
    children: each has an ``id`` and ``metadata["parent_id"]`` (its parent's ``id``, None under
    the document), ``metadata["depth"]`` and ``metadata["leaf"]``; embed the leaves and keep the
    parents in a docstore by ``id`` (``MultiVectorRetriever(id_key="parent_id")``).
    """

    def __init__(self, segmenter: Segmenter | None = None, *, model: str | os.PathLike | None = None,
                 profile: Any = None, backend: str = "auto", device: str | None = None,
                 add_start_index: bool = True, chunk_size: int | None = None, chunk_overlap: int = 0,
                 length_function: Callable[[str], int] | None = None, **options: Any):
        refuse_foreign_overlap("HeadsegTextSplitter", dict(options, chunk_overlap=chunk_overlap))
        self.runner = SegmenterRunner(segmenter, model=model, profile=profile, backend=backend, device=device,
                                      **_langchain_limits(options, chunk_size, length_function))
        limits = self.runner.options
        # The base class's size and overlap drive only its own merging, which is
        # not used here; headseg never overlaps chunks and never strips them.
        super().__init__(chunk_size=limits.max_chars or limits.max_tokens or 4000, chunk_overlap=0,
                         add_start_index=add_start_index, strip_whitespace=False)

    @property
    def segmenter(self) -> Segmenter:
        """The segmenter (the model loads on first access)."""
        return self.runner.segmenter

    def split_text(self, text: str) -> list[str]:
        """The texts of ``text``'s chunks, in order (they join back into ``text`` unless ``overlap`` is set)."""
        return [s.text for s in chunk_segments(self.runner.segment_many([text])[0])]

    def create_documents(self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None) -> list[Document]:
        """One Document per segment of each text, with a copy of its metadata and, with ``add_start_index``,
        ``start_index`` and ``end_index``."""
        texts = _checked_texts(texts, metadatas)
        # one call for all texts, so the model batches across documents
        return self._documents(self.runner.segment_many(texts), metadatas)

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        """:meth:`create_documents` for ``documents``' texts and metadata."""
        docs = list(documents)
        return self.create_documents([d.page_content for d in docs], [d.metadata for d in docs])

    async def atransform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        """:meth:`split_documents` for asyncio, on :meth:`Segmenter.asegment_many` (not in a thread of
        LangChain's executor): concurrent calls share the model through one batcher."""
        docs = list(documents)
        metadatas = [d.metadata for d in docs]
        return self._documents(await self.runner.asegment_many([d.page_content for d in docs]), metadatas)

    def _documents(self, results: list, metadatas: list[dict[Any, Any]] | None) -> list[Document]:
        """One Document per segment of each result, with a copy of its text's metadata and the offsets."""
        out = []
        for i, result in enumerate(results):
            tree = tree_chunks(result)
            ids: dict[int, str] = {}
            repeated = overlap_chars(result)
            for j, s in enumerate(chunk_segments(result) if tree is None else [t.segment for t in tree]):
                meta = copy.deepcopy(metadatas[i]) if metadatas is not None else {}
                if tree is None and repeated[j] is not None:  # overlap=N: what the chunk repeats
                    meta["overlap_chars"] = repeated[j]
                if s.headings:  # the heading path above the chunk (Markdown; plain text has none)
                    meta["headings"] = list(s.headings)
                if s.confidence is not None:  # how sure headseg is of the boundary opening it (0-1)
                    meta["confidence"] = s.confidence
                if self._add_start_index:
                    meta["start_index"] = s.start
                    meta["end_index"] = s.end
                doc_id = None
                if tree is not None:  # a segment tree: every node, linked to its parent by id
                    node = tree[j]
                    doc_id = ids[node.id] = str(uuid.uuid4())
                    meta.update(parent_id=None if node.parent is None else ids[node.parent],
                                depth=node.depth, leaf=node.leaf)
                out.append(Document(page_content=s.text, metadata=meta, id=doc_id))
        return out


def _checked_texts(texts: Iterable[str], metadatas: list | None) -> list[str]:
    """``texts`` as a list, after checking that ``metadatas`` (if given) has one entry per text."""
    texts = iterable_of(texts, "texts must be a list of str")
    if metadatas is not None:
        # checked before any segmenting: a bad entry used to fail only after the model had run
        if len(metadatas) != len(texts):
            raise ValueError(f"{len(metadatas)} metadatas for {len(texts)} texts")
        bad = next((i for i, m in enumerate(metadatas) if not isinstance(m, dict)), None)
        if bad is not None:
            raise TypeError(f"metadatas[{bad}] must be a dict (got {type(metadatas[bad]).__name__})")
    return texts


def _langchain_limits(options: dict[str, Any], chunk_size: int | None,
                      length_function: Callable[[str], int] | None) -> dict[str, Any]:
    """``options`` with LangChain's ``chunk_size`` and ``length_function`` as headseg's limits.

    LangChain's own names, so ``from_huggingface_tokenizer(tok, chunk_size=N)``
    and ``from_tiktoken_encoder(...)`` work: ``chunk_size`` is a hard limit in
    ``length_function``'s units (``max_tokens`` counted by it), or in characters
    without one (``max_chars``).
    """
    options = dict(options)
    if length_function is not None and length_function is not len:
        if options.get("token_counter") is not None:
            raise ValueError("pass token_counter or length_function, not both")
        options["token_counter"] = length_function
    if chunk_size is not None:
        limit = "max_tokens" if options.get("token_counter") is not None else "max_chars"
        if options.get(limit) is not None:
            raise ValueError(f"pass {limit} or chunk_size, not both")
        options[limit] = chunk_size
    return options
