"""Evaluation against labelled boundaries: loaders, metrics, the methods and the harness.

``headseg evaluate`` (headseg/cli/evaluate.py) and benchmarks/segmentation.py
are thin layers over :func:`harness.evaluate`.  Modules: :mod:`.loaders`
(labelled documents), :mod:`.metrics` (Pk, WindowDiff, B, P/R/F1),
:mod:`.methods` (what a method is; the registry), :mod:`.baselines` (the
registered methods), :mod:`.tiling` (TextTiling scoring), :mod:`.harness`
(running, storing, summarising).  Importing the package registers every
built-in method.
"""

from . import baselines  # noqa: F401  # registers the built-in methods
from .harness import Dataset, ResultStore, Summary, evaluate, format_markdown, format_tables, load_datasets
from .loaders import Document, iter_documents, load_file, snap_offsets
from .methods import METHODS, Method, Prediction, make_method, method_names, parse_methods, register_method
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
    "method_names",
    "parse_methods",
    "pk",
    "register_method",
    "score_document",
    "snap_offsets",
    "window_size",
    "windowdiff",
]
