"""The serving engine: :class:`OnnxBackend`, a capture backend over an exported artifact.

``OnnxBackend(loaded, artifact_dir, device).capture(windows, heads)`` returns
:class:`~headseg.analysis.capture.HeadActivations`, and ``unit_vectors`` the
pooled rows (:mod:`headseg.analysis.pooling`), like ``TorchBackend`` (both
implement :class:`~headseg.analysis.capture.CaptureBackend`).  It needs neither
torch nor transformers.  The windows of one call are sorted by length and cut
into onnxruntime calls by :func:`plan_chunks`, which minimises padded tokens
plus a per-call cost (:data:`CALL_COST_TOKENS`): a dynamic programme,
O(windows · batch size).  One call runs on an :class:`~.session.OnnxSession`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from headseg.analysis.capture import DEFAULT_MAX_BATCH_TOKENS, HeadActivations, capture_order, normalise_heads
from headseg.analysis.pooling import UnitPool, check_owners, token_masks
from headseg.analysis.errors import ArtifactError, HeadsegError
from headseg.analysis.model import LoadedModel
from headseg.analysis.text import Window

from .artifact import check_graph_file, check_matches, read_manifest
from .session import OnnxSession

#: the graph output that carries each optional capture
_OUTPUT_FOR = {"attention": "head_attn", "norms": "head_fnorm"}


#: what one onnxruntime call costs beyond its tokens, in padded-token equivalents: on
#: CPU a call is cheap and every padded token is computed; on CUDA launches dominate
#: and large batches win
CALL_COST_TOKENS = {"cpu": 32, "cuda": 4096}


def plan_chunks(lengths: Sequence[int], max_batch: int, call_cost: float) -> list[tuple[int, int]]:
    """Cut windows sorted by ascending length into runs ``[(start, end), ...]`` for onnxruntime calls.

    Every window of a run is padded to the run's longest, so a run costs
    ``(end - start) * lengths[end - 1]`` tokens plus ``call_cost``; the cuts
    minimise the total (dynamic programme, O(n · max_batch)) with at most
    ``max_batch`` windows per run.  Sentences of one document range from a few
    tokens to a hundred: fixed runs of 32 pad Choi documents by 46 %, these by
    about 12 %.
    """
    n = len(lengths)
    if max_batch < 1:
        raise HeadsegError("batch size must be at least 1")
    if any(lengths[i] > lengths[i + 1] for i in range(n - 1)):
        raise HeadsegError("plan_chunks needs lengths in ascending order")
    best = [0.0] + [float("inf")] * n
    start = [0] * (n + 1)
    for e in range(1, n + 1):
        for s in range(max(0, e - max_batch), e):
            c = best[s] + (e - s) * lengths[e - 1] + call_cost
            if c < best[e]:
                best[e], start[e] = c, s
    cuts, e = [], n
    while e > 0:
        cuts.append((start[e], e))
        e = start[e]
    return cuts[::-1]


class OnnxBackend:
    """Runs an exported artifact and returns :class:`HeadActivations`, like ``TorchBackend``.

    ``artifact_dir`` is checked against ``loaded`` (model fingerprint) and, if
    given, ``profile_hash``; ``batch_size`` bounds one onnxruntime call, larger
    lists of windows are cut by :func:`plan_chunks` (an int8 graph runs one
    window per call, so that its results do not depend on the batch; on CPU
    ``threads`` windows at a time).
    """

    name = "onnx"
    max_batch_tokens = DEFAULT_MAX_BATCH_TOKENS

    def __init__(
        self,
        loaded: LoadedModel,
        artifact_dir: str | os.PathLike,
        device: str | None = "auto",
        profile_hash: str | None = None,
        batch_size: int = 32,
        threads: int | None = None,
    ):
        self.loaded = loaded
        self.artifact_dir = Path(artifact_dir)
        self.manifest = read_manifest(self.artifact_dir)
        check_matches(self.manifest, loaded.info.fingerprint or None, profile_hash, str(self.artifact_dir),
                      weights_digest=loaded.weights_digest)
        graph = check_graph_file(self.artifact_dir, self.manifest)
        # int8 graphs quantise activations dynamically, with one scale per input
        # tensor: in a batch, a window's vectors would depend on the other windows
        # (measured: up to 0.08 apart), so a document's boundaries on what it is
        # batched with.  One window per call keeps every window's result its own
        # (and computes no padding); on CPU the windows run side by side.
        self.per_window = self.manifest.precision == "int8"
        self.session = OnnxSession(graph, device=device, threads=threads, per_window=self.per_window)
        self.device = self.session.device
        self.heads = tuple(self.manifest.heads)
        if batch_size < 1:
            raise HeadsegError("batch size must be at least 1")
        self.batch_size = batch_size

    @property
    def info(self):
        """The model's :class:`~headseg.analysis.model.ModelInfo` (identity and shapes), as on ``TorchBackend``."""
        return self.loaded.info

    @property
    def precision(self) -> str:
        """The artifact's precision: ``fp32``, ``fp16`` or ``int8``."""
        return self.manifest.precision

    @property
    def parallel_calls(self) -> int:
        """Per-window calls the session runs side by side (one per core on CPU for int8; else 1)."""
        return int(self.session.parallel_calls) if self.per_window else 1

    def capture(
        self,
        windows: Sequence[Window],
        heads: Iterable[Sequence[int]] | None = None,
        attention: bool = False,
        norms: bool = False,
        hidden: bool = False,
    ) -> HeadActivations:
        """Activations of ``heads`` (a subset of the artifact's; default all) for ``windows``.

        Shapes as in :class:`HeadActivations`: ``z [B, N, T, d]`` with T the longest window;
        ``hidden=True`` adds ``hidden [B, T, hidden]`` (an artifact of the whole encoder only).
        """
        if not windows:
            raise HeadsegError("capture() needs at least one window")
        info = self.loaded.info
        sel = self.heads if heads is None else normalise_heads(heads, info.num_layers, info.num_heads)
        idx = self._positions(sel)
        outputs = ["head_z"]
        for flag, name in ((attention, "attention"), (norms, "norms")):
            if flag:
                if _OUTPUT_FOR[name] not in self.session.output_names:
                    raise ArtifactError(
                        f"{self.artifact_dir}: the artifact was exported without {name}; "
                        f"run `headseg export --{name}` to include it"
                    )
                outputs.append(_OUTPUT_FOR[name])
        if hidden:
            outputs.append(self._hidden_output())
        B, T = len(windows), max(len(w) for w in windows)
        N, d = len(sel), info.head_dim
        z = np.zeros((B, N, T, d), dtype=np.float32)
        mask = np.zeros((B, T), dtype=bool)
        attn = np.zeros((B, N, T, T), dtype=np.float32) if attention else None
        fnorm = np.zeros((B, N, T), dtype=np.float32) if norms else None
        last = np.zeros((B, T, info.hidden_size), dtype=np.float32) if hidden else None
        for chunk, res in self._runs(windows, outputs):
            t = res["head_z"].shape[2]
            for j, i in enumerate(chunk):
                z[i, :, :t] = res["head_z"][j][idx]
                mask[i, : len(windows[i])] = True
                if attention:
                    attn[i, :, :t, :t] = res["head_attn"][j][idx]
                if norms:
                    fnorm[i, :, :t] = res["head_fnorm"][j][idx]
                if hidden:
                    last[i, : len(windows[i])] = res["last_hidden_state"][j][: len(windows[i])]
        return HeadActivations(heads=tuple(sel), z=z, attention_mask=mask, attn=attn, fnorm=fnorm, hidden=last)

    def unit_vectors(self, windows: Sequence[Window], owners: np.ndarray, heads: Sequence[Sequence[int]],
                     weights: np.ndarray, output_weight: float = 0.0) -> np.ndarray:
        """Unit vectors ``[U, D]`` (see :class:`~headseg.analysis.capture.CaptureBackend`): each
        onnxruntime call's outputs are summed into the units as they come, never gathered into one
        padded ``[B, N, T, d]``."""
        owners, units = check_owners(windows, owners)
        info = self.loaded.info
        idx = self._positions(capture_order(heads, info.num_layers, info.num_heads))
        every_head = idx == list(range(len(self.heads)))
        outputs = ["head_z"] + ([self._hidden_output()] if output_weight > 0 else [])
        pool = UnitPool(units, output_weight)
        for chunk, res in self._runs(windows, outputs):
            z = res["head_z"] if every_head else res["head_z"][:, idx]
            every, content = token_masks([windows[i] for i in chunk], z.shape[2])
            pool.add(z, content, owners[chunk], hidden=res.get("last_hidden_state"), every=every)
        return pool.vectors(weights)

    def _positions(self, sel) -> list[int]:
        """Where each head of ``sel`` is among the artifact's outputs; an error for one it lacks."""
        missing = [h for h in sel if h not in self.heads]
        if missing:
            names = ", ".join(f"L{l}H{h}" for l, h in missing)
            raise HeadsegError(f"head(s) {names} are not in the exported artifact {self.artifact_dir}; export them first")
        return [self.heads.index(h) for h in sel]

    def _hidden_output(self) -> str:
        """The graph output of the last hidden states; an error for an artifact without them."""
        if "last_hidden_state" not in self.session.output_names:
            raise ArtifactError(f"{self.artifact_dir}: the artifact stops at the deepest head and has no last "
                                "hidden states; run `headseg export --no-truncate` to include them")
        return "last_hidden_state"

    def _runs(self, windows: Sequence[Window], outputs: list[str]):
        """``(window indices, outputs)`` of each onnxruntime call over ``windows``, shortest first
        (the outputs padded to the call's longest window)."""
        pad_id = self.loaded.tokenizer.pad_token_id or 0
        B = len(windows)
        order = sorted(range(B), key=lambda i: (len(windows[i]), i))
        if self.per_window:  # padding costs nothing there: plain runs of batch_size
            cuts = [(a, min(a + self.batch_size, B)) for a in range(0, B, self.batch_size)]
        else:
            cuts = plan_chunks([len(windows[i]) for i in order], self.batch_size, CALL_COST_TOKENS[self.device])
        for s, e in cuts:
            chunk = order[s:e]
            yield chunk, self.session.run_batch([windows[i] for i in chunk], pad_id, outputs)
