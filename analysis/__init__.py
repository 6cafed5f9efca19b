"""headseg.analysis — the base layer: models, windows, per-head capture, similarity, norms.

Data flows one way: text → windows → per-head vectors → similarity matrices →
statistics or boundaries.  The other packages import from here, never the reverse.
"""

from .capture import HeadActivations, TorchBackend, all_heads, iter_batches, normalise_heads
from .errors import ArtifactError, DeviceError, HeadsegError, InputError, ModelError, ProfileError
from .model import EMBEDDED_NAME, LoadedModel, ModelInfo, load_model, wrap_model
from .similarity import context_similarity, head_similarities
from .text import TokenizedText, Window, make_windows, split_sentences, tokenize, windows_from_text


__all__ = [
    "ArtifactError",
    "DeviceError",
    "EMBEDDED_NAME",
    "HeadActivations",
    "HeadsegError",
    "InputError",
    "LoadedModel",
    "ModelError",
    "ModelInfo",
    "ProfileError",
    "TokenizedText",
    "TorchBackend",
    "Window",
    "all_heads",
    "context_similarity",
    "head_similarities",
    "iter_batches",
    "load_model",
    "make_windows",
    "normalise_heads",
    "split_sentences",
    "tokenize",
    "windows_from_text",
    "wrap_model",
]
