"""Evaluation against labelled boundaries: loaders, metrics, baselines and the harness.

``headseg evaluate`` (segmenter/evaluate_cmd.py) and benchmarks/segmentation.py
are thin layers over :func:`harness.evaluate`.
"""

from .baselines import METHODS, Method, Prediction, make_method, parse_methods
from .harness import Dataset, ResultStore, Summary, evaluate, format_markdown, format_tables, load_datasets
from .loaders import Document, iter_documents, load_file, snap_offsets
from .metrics import boundary_similarity, pk, score_document, window_size, windowdiff

__all__ = [
    "METHODS",
    "Dataset",
    "Document",
    "Method",
    "Prediction",
    "ResultStore",
    "Summary",
    "boundary_similarity",
    "evaluate",
    "format_markdown",
    "format_tables",
    "iter_documents",
    "load_datasets",
    "load_file",
    "make_method",
    "parse_methods",
    "pk",
    "score_document",
    "snap_offsets",
    "window_size",
    "windowdiff",
]
