"""Sentence embeddings of the embedded model, pooled as sentence-transformers pools all-MiniLM-L6-v2.

The reference embedder of the evaluation: the embedding-cosine baseline embeds
units with it, and the retrieval evaluation embeds chunks and questions.  The
mean of the last hidden states over all tokens (specials included), L2
normalised; inputs longer than ``max_tokens`` are truncated as
sentence-transformers truncates them (content cut so the special tokens fit).
Needs torch (the ``torch`` path of :func:`headseg.analysis.model.load_model`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from headseg.analysis.errors import HeadsegError


class MeanPooledEmbedder:
    """Unit-normalised mean-pooled embeddings ``[N, hidden]`` of texts (model loaded on first use)."""

    def __init__(self, model: str | None = None, batch_size: int = 64, max_tokens: int = 256):
        if batch_size < 1 or max_tokens < 8:
            raise HeadsegError("the embedder needs batch_size >= 1 and max_tokens >= 8")
        self.model_spec = model
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.loaded = None

    def setup(self) -> None:
        """Load the model (embedded by default) with its torch weights."""
        if self.loaded is None:
            from headseg.analysis.model import load_model

            self.loaded = load_model(self.model_spec)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``[N, hidden]`` float64 embeddings of ``texts``, each of length 1 (0 for a text without tokens)."""
        import torch

        self.setup()
        tok = self.loaded.tokenizer
        model = self.loaded.model
        out = []
        # Length-sorted batches waste less padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        width = min(self.max_tokens, self.loaded.info.max_positions) - len(tok.before) - len(tok.after)
        with torch.inference_mode():
            for s in range(0, len(order), self.batch_size):
                idx = order[s : s + self.batch_size]
                seqs = [tok.before + tok.encode(texts[i])[0][:width].tolist() + tok.after for i in idx]
                ids = np.full((len(seqs), max(map(len, seqs))), tok.pad_token_id or 0, dtype=np.int64)
                att = np.zeros(ids.shape, dtype=np.int64)
                for r, seq in enumerate(seqs):
                    ids[r, : len(seq)] = seq
                    att[r, : len(seq)] = 1
                hidden = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(att)).last_hidden_state
                mask = torch.from_numpy(att).unsqueeze(-1).to(hidden.dtype)
                emb = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
                out.append((idx, emb.double().numpy()))
        res = np.zeros((len(texts), self.loaded.info.hidden_size))
        for idx, emb in out:
            res[idx] = emb
        norms = np.linalg.norm(res, axis=1, keepdims=True)
        return res / np.maximum(norms, 1e-12)
