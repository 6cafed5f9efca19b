"""The torch module the reference exporter traces: the selected heads and nothing above them.

headseg ships graphs written from the weights by :mod:`.builder`; this module,
exported by optimum (:mod:`.reference`), is what the tests compare them with.

:class:`SelectedHeads` wraps a BERT-family encoder.  It runs the embeddings and
layers ``0 .. deepest-1`` unchanged, then, for every layer that holds a selected
head, recomputes that layer's self-attention for the selected heads only:

    q, k, v = x W^{Q,K,V}_h + b        [B, n, T, d]
    α       = softmax(q kᵀ / √d + mask) [B, n, T, T]
    z       = α v                       [B, n, T, d]

Forward hooks cannot be part of an exported graph, which is why the context
vectors are computed explicitly here rather than read from the layer.  Layers
above the deepest selected layer are not in the module at all unless
``truncate=False`` (kept only to measure what truncation buys).
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from headseg.analysis.errors import ModelError

from .graph import MASK_BIAS


class SelectedHeads(nn.Module):
    """Encoder truncated to the selected heads.

    Inputs ``input_ids [B, T]`` and ``attention_mask [B, T]`` (int64, 1 = token).
    Returns a dict with ``head_z [B, N, T, d]`` (heads in sorted ``(layer, head)``
    order, padded query rows zeroed), and if asked ``head_attn [B, N, T, T]``,
    ``head_fnorm [B, N, T]`` (``‖(x W^V_h + b^V_h) W^O_h‖``) and, for the
    untruncated variant, ``last_hidden_state [B, T, hidden]``.
    """

    def __init__(
        self,
        encoder: nn.Module,
        heads: Sequence[tuple[int, int]],
        attention: bool = False,
        norms: bool = False,
        truncate: bool = True,
    ):
        super().__init__()
        cfg = encoder.config
        if getattr(cfg, "position_embedding_type", "absolute") != "absolute":
            raise ModelError(
                f"export supports absolute position embeddings only; this model uses '{cfg.position_embedding_type}'"
            )
        self.config = cfg  # optimum's exporter reads and sets attributes on it
        self.heads = tuple(sorted((int(l), int(h)) for l, h in heads))
        if not self.heads:
            raise ModelError("export needs at least one head")
        self.num_heads = cfg.num_attention_heads
        self.head_dim = cfg.hidden_size // cfg.num_attention_heads
        self.deepest = max(l for l, _ in self.heads)
        self.want_attention = attention
        self.want_norms = norms
        self.truncate = truncate
        self.embeddings = encoder.embeddings
        all_layers = list(encoder.encoder.layer)
        if self.deepest >= len(all_layers):
            raise ModelError(f"head layer {self.deepest} does not exist in a {len(all_layers)}-layer model")
        # Layers strictly below the deepest selected one run in full; the deepest
        # one only needs its self-attention, computed by hand below.
        self.lower = nn.ModuleList(all_layers[: self.deepest])
        self.upper = nn.ModuleList([] if truncate else all_layers[self.deepest :])
        self.selected_layers = sorted({l for l, _ in self.heads})
        d = self.head_dim
        for l in self.selected_layers:
            hs = [h for ll, h in self.heads if ll == l]
            rows = torch.cat([torch.arange(h * d, (h + 1) * d) for h in hs])
            att = all_layers[l].attention
            for name, lin in (("q", att.self.query), ("k", att.self.key), ("v", att.self.value)):
                self.register_buffer(f"w{name}{l}", lin.weight.detach()[rows].clone(), persistent=False)
                self.register_buffer(f"b{name}{l}", lin.bias.detach()[rows].clone(), persistent=False)
            if norms:
                # W^O_h as [n, d, hidden_out], so f = v @ W^O_h per head.
                wo = att.output.dense.weight.detach().view(-1, self.num_heads, d)[:, hs]  # [out, n, d]
                self.register_buffer(f"wo{l}", wo.permute(1, 2, 0).contiguous(), persistent=False)

    def _heads_of(self, layer: int, x: torch.Tensor, bias: torch.Tensor):
        """z [B, n, T, d], α [B, n, T, T] and v [B, n, T, d] of the selected heads of ``layer``."""
        B, T, _ = x.shape
        d = self.head_dim

        def proj(name):
            w, b = getattr(self, f"w{name}{layer}"), getattr(self, f"b{name}{layer}")
            return nn.functional.linear(x, w, b).view(B, T, -1, d).transpose(1, 2)

        q, k, v = proj("q"), proj("k"), proj("v")
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d) + bias
        probs = torch.softmax(scores, dim=-1)
        return torch.matmul(probs, v), probs, v

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict:
        """``input_ids``/``attention_mask [B, T]`` → ``{"head_z": [B, N, T, d], ...}``, padded query rows zero.

        With ``attention`` also ``head_attn [B, N, T, T]``, with ``norms``
        ``head_fnorm [B, N, T]``, without truncation ``last_hidden_state [B, T, hidden]``.
        """
        mask = attention_mask.to(torch.float32)
        # Unsqueeze, cast, subtract, scale: the classic BERT mask, in the order
        # onnxruntime's attention fusion recognises.
        bias = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * MASK_BIAS  # [B, 1, 1, T]
        x = self.embeddings(input_ids=input_ids)
        zs, attns, norms = [], [], []
        for l in range(self.deepest + 1):
            if l in self.selected_layers:
                z, probs, v = self._heads_of(l, x, bias)
                zs.append(z)
                attns.append(probs)
                if self.want_norms:
                    f = torch.matmul(v, getattr(self, f"wo{l}")[None])  # [B, n, T, hidden]
                    norms.append(torch.linalg.vector_norm(f, dim=-1))
            if l < self.deepest:
                x = self.lower[l](x, attention_mask=bias)[0]
        row = mask[:, None, :]  # [B, 1, T]: zero padded query rows, as the torch backend does
        out = {"head_z": torch.cat(zs, dim=1) * row[..., None]}
        if self.want_attention:
            out["head_attn"] = torch.cat(attns, dim=1) * row[..., None]
        if self.want_norms:
            out["head_fnorm"] = torch.cat(norms, dim=1) * row
        if not self.truncate:
            for layer in self.upper:
                x = layer(x, attention_mask=bias)[0]
            out["last_hidden_state"] = x
        return out
