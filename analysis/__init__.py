"""headseg.analysis — the floor every other layer stands on, and the study that picks the heads.

Despite the folder's name, most of it is not analysis: it owns what all of
headseg shares.

* core types: :mod:`.segments` (the segmentation result), :mod:`.text`
  (sentences and tokenized windows with character offsets), :mod:`.profile`
  (the head profile);
* the one exception hierarchy (:mod:`.errors`) and input/output (:mod:`.io`:
  safe reading, JSON files, atomic writing, output checks), the on-disk cache
  (:mod:`.cache`);
* loading models and tokenizers (:mod:`.model`, :mod:`.tokenizer`), and per-head
  capture (:mod:`.capture`: context vectors Z, attention, value norms);
* the matrices built from a capture (:mod:`.similarity`, :mod:`.norms`,
  :mod:`.inspect`);
* process helpers: :mod:`.progress`, :mod:`.memory`, :mod:`.ray`;
* :mod:`.study`, the similarity-matrix study that writes the head profile.

Data flows one way: text → windows → per-head vectors → similarity matrices →
statistics or boundaries.  Imports do too: ``headseg.export`` and
``headseg.segmenter`` build on this package, ``headseg.tui`` and the front door
(``headseg``, its CLI and integrations) on those; nothing here imports them.
The names below are the ones most callers need.
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
