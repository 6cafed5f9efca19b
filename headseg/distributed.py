"""Segmentation on a Ray cluster (the ``ray`` extra): :class:`SegmentActor`.

A reading task per file streams the documents of a Parquet corpus (read by
the local engine's own reader, ids and errors included) or the lines of a JSONL
corpus (which the actors parse with the local engine's
:func:`~.stream.jsonl_document`), and ``map_batches`` sends batches of
documents to a pool of actors, each holding one :class:`~headseg.Segmenter`
built once from a :class:`~headseg.config.SegmenterConfig` of model and profile
*paths* (weights never travel through Ray: every worker loads them
from the installed package, the Hugging Face cache or a shared folder, and
picks up the ONNX artifact from its own cache when the serving backend is
ONNX).  A CPU actor runs with one intra-op thread, so ``N`` workers use ``N``
cores without oversubscription.  Records come back to the driver in input order
and are written by the same writers as the local engine, so the output equals
the local engine's record for record.

Ray itself is started by :func:`headseg.analysis.ray.init_ray`; the study on
Ray is :mod:`headseg.analysis.study.distributed`.
"""

from __future__ import annotations

from typing import Any, Mapping

from headseg.analysis.errors import InputError
from headseg.analysis.segments import RECORD_FIELDS
from headseg.segmenter.stream import DocumentError, jsonl_document

from .config import SegmenterConfig
from .formats import blank_record


class SegmentActor:
    """One Ray actor: one Segmenter, loaded once, segmenting batches of documents into record rows."""

    def __init__(self, config: SegmenterConfig, options: Any, text_field: str, id_field: str,
                 jsonl: Mapping[str, Any] | None = None):
        """``config``: what the actor's segmenter is built from (model and profile as paths or names each
        worker resolves itself; ``threads`` its intra-op threads).  ``options``: the :class:`~headseg.segmenter.options.SegmentOptions` every batch is segmented
        with, or its fields as a mapping (validated here, on the worker).  ``jsonl``: ``encoding`` and
        ``max_bytes`` when the batches are the lines of a JSONL corpus (columns ``where``, ``FILE:LINE``,
        and ``line``, its bytes or None when over ``max_bytes``), parsed here as the local engine parses them
        (:func:`~.stream.jsonl_document`); None when they are documents already read (columns ``document``,
        the id; ``text``; ``error``, why the document is unusable, else None), as the Ray engine reads a
        Parquet corpus with the local engine's reader."""
        if config.threads and config.backend == "torch":
            import torch

            # the actor owns its process: one intra-op thread per CPU worker
            torch.set_num_threads(int(config.threads))
        from headseg.api import Segmenter
        from headseg.segmenter.options import SegmentOptions

        self.options = SegmentOptions.of(options)
        self.segmenter = Segmenter(config=SegmenterConfig.of(config, quiet=True))
        self.text_field, self.id_field = text_field, id_field
        self.jsonl = None if jsonl is None else (jsonl["encoding"], int(jsonl["max_bytes"]))

    def __call__(self, batch: Any) -> dict:
        """Segment one batch (JSONL lines, or documents with columns ``document``, ``text``, ``error``; a
        pyarrow table or a dict of columns) into record columns plus ``error``."""
        items = self._lines(batch) if self.jsonl is not None else self._documents(batch)
        cols: dict[str, list] = {k: [] for k in (*RECORD_FIELDS, "error")}
        results = self.segmenter.iter_segment([t for _, t in items], self.options, batch_docs=max(len(items), 1),
                                              errors="yield")
        for (doc_id, _), res in zip(items, results):
            # a failed document is a row of the record's types (its columns keep them), carrying the reason
            rows = ([blank_record(doc_id or "?") | {"error": res.reason}] if isinstance(res, DocumentError)
                    else [rec | {"error": None} for rec in res.to_records(doc_id)])
            for row in rows:
                for k, v in row.items():
                    cols[k].append(v)
        from headseg.analysis.memory import release_memory

        release_memory()  # the actor owns its process, as the command line does
        return cols

    def _lines(self, batch: Any) -> list[tuple[str, Any]]:
        """``(id, text or error)`` of each JSONL line of ``batch``, as the local engine reads it."""
        encoding, max_bytes = self.jsonl  # type: ignore[misc]
        return [jsonl_document(raw, where, encoding, max_bytes, self.text_field, self.id_field)
                for where, raw in zip(_column(batch, "where") or (), _column(batch, "line") or ())]

    @staticmethod
    def _documents(batch: Any) -> list[tuple[str, Any]]:
        """``(id, text or error)`` of each document of ``batch``, read by the local engine's reader."""
        docs = _column(batch, "document") or []
        texts = _column(batch, "text") or [None] * len(docs)
        errors = _column(batch, "error") or [None] * len(docs)
        return [(doc_id, text if error is None else InputError(error))
                for doc_id, text, error in zip(docs, texts, errors)]


def _column(batch: Any, name: str) -> list | None:
    """Column ``name`` of ``batch`` as Python values (None where the column is missing).

    A pyarrow table is read with ``to_pylist``: a null stays None (numpy batches
    turned a null text into NaN and an integer column with a null into floats).
    """
    if hasattr(batch, "column_names"):
        return batch.column(name).to_pylist() if name in batch.column_names else None
    return list(batch[name]) if name in batch else None
