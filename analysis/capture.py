"""Per-head capture: context vectors Z, attention A and value-norms, and pooled unit vectors; torch backend.

The per-head context vector of head ``h`` at token ``i`` is
``z_h(i) = Σ_j α_h(i, j) v_h(j)``: the slice of the self-attention output
*before* the output projection ``W^O``.  Hooks on each layer's self-attention
module read it (and its input hidden states for the norm analysis); the hooks
live in a context manager that always removes them.
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator, Protocol, Sequence, runtime_checkable

import numpy as np

from .errors import DeviceError, HeadsegError, shown
from .model import LoadedModel, ModelInfo
from .pooling import UnitPool, check_owners, token_batches, token_masks, torch_ops
from .text import Window

Head = tuple[int, int]


@dataclass
class HeadActivations:
    """Activations of a set of heads for a batch of windows.

    Shapes (B windows, N heads, T = longest window, d = head dim):

    * ``z [B, N, T, d]`` per-head context vectors (float32);
    * ``attention_mask [B, T]`` True for real tokens, False for padding;
    * ``attn [B, N, T, T]`` attention probabilities, or None;
    * ``fnorm [B, N, T]`` ``‖f_h(x_j)‖`` with ``f_h(x) = (x W^V_h + b^V_h) W^O_h``, or None;
    * ``hidden [B, T, hidden]`` the encoder's last hidden states (its output), or None.

    ``acts[layer, head]`` gives ``z[:, n]`` for that head, TransformerLens-style.
    """

    heads: tuple[Head, ...]
    z: np.ndarray
    attention_mask: np.ndarray
    attn: np.ndarray | None = None
    fnorm: np.ndarray | None = None
    hidden: np.ndarray | None = None

    def index(self, layer: int, head: int) -> int:
        """Position of head ``(layer, head)`` on the ``N`` axis; :class:`HeadsegError` if it was not captured."""
        try:
            return self.heads.index((int(layer), int(head)))
        except ValueError:
            raise HeadsegError(f"head L{layer}H{head} was not captured") from None

    def __getitem__(self, key: Head) -> np.ndarray:
        return self.z[:, self.index(*key)]

    @property
    def lengths(self) -> np.ndarray:
        """Real (unpadded) tokens per window, ``[B]``."""
        return self.attention_mask.sum(axis=1)

    def window(self, b: int) -> "HeadActivations":
        """The unpadded activations of window ``b`` (batch axis of size 1 kept)."""
        t = int(self.lengths[b])
        return HeadActivations(
            heads=self.heads,
            z=self.z[b : b + 1, :, :t],
            attention_mask=self.attention_mask[b : b + 1, :t],
            attn=None if self.attn is None else self.attn[b : b + 1, :, :t, :t],
            fnorm=None if self.fnorm is None else self.fnorm[b : b + 1, :, :t],
            hidden=None if self.hidden is None else self.hidden[b : b + 1, :t],
        )

    def grid(self, b: int, num_layers: int, num_heads: int) -> np.ndarray:
        """``z`` of window ``b`` as ``[layer, head, token, dim]`` (all heads must be captured)."""
        want = [(l, h) for l in range(num_layers) for h in range(num_heads)]
        if list(self.heads) != want:
            raise HeadsegError("grid() needs every head of every layer to be captured")
        t = int(self.lengths[b])
        return self.z[b, :, :t].reshape(num_layers, num_heads, t, -1)


#: the real tokens one backend call takes by default when calls are shared (Text Embeddings
#: Inference's default ``--max-batch-tokens``)
DEFAULT_MAX_BATCH_TOKENS = 16384


@runtime_checkable
class CaptureBackend(Protocol):
    """What every engine offers: the selected heads' activations for a batch of windows, and the
    traits a batcher needs to share it between callers.

    Implemented by :class:`TorchBackend` (the reference: forward hooks) and
    :class:`headseg.export.onnx_backend.OnnxBackend` (the serving engine), with the
    same defaults.  Traits:

    * ``name``: ``"torch"`` or ``"onnx"``; ``device``: where it runs (``"cpu"``, ``"cuda"``);
    * ``precision``: what the model runs in (``"fp32"``, ``"fp16"``, ``"int8"``; None: as loaded);
    * ``per_window``: each window runs in its own call, so a window's result never depends on
      the others it was asked with (an int8 graph: its dynamic quantisation scales per call);
    * ``parallel_calls``: how many such calls may run side by side (1 unless ``per_window``);
    * ``max_batch_tokens``: the real tokens one shared call should hold at most.

    Segmentation asks for :meth:`unit_vectors` (pooled rows); :meth:`capture`
    gives the per-token activations (the study, ``inspect``, the TUI, the unit detector).
    """

    name: str
    device: str
    precision: str | None
    per_window: bool
    parallel_calls: int
    max_batch_tokens: int

    @property
    def info(self) -> ModelInfo:
        """The :class:`ModelInfo` of the model the backend runs."""
        ...

    def capture(
        self,
        windows: Sequence[Window],
        heads: Iterable[Sequence[int]] | None = None,
        attention: bool = False,
        norms: bool = False,
        hidden: bool = False,
    ) -> HeadActivations:
        """``HeadActivations`` of ``heads`` (default: every head the backend serves) for ``windows``;
        ``hidden=True`` adds the last hidden states."""
        ...

    def unit_vectors(
        self,
        windows: Sequence[Window],
        owners: np.ndarray,
        heads: Sequence[Sequence[int]],
        weights: np.ndarray,
        output_weight: float = 0.0,
    ) -> np.ndarray:
        """Unit vectors ``[U, D]`` of the units the windows belong to (:mod:`~headseg.analysis.pooling`).

        ``owners [W]``: the unit of each window (``U = max(owners) + 1``; a unit
        of several windows is pooled over all of them, a unit no window names is
        zero); ``heads`` in capture order (sorted, each once) with their ``weights
        [N]``; ``output_weight``: the share of the model's own embedding.
        ``D = N·d``, or ``N·d + hidden`` with a share.  The per-token activations
        never leave the backend: only the pooled rows come back.
        """
        ...


def all_heads(num_layers: int, num_heads: int) -> tuple[Head, ...]:
    """Every ``(layer, head)`` of a ``num_layers × num_heads`` model, layer-major."""
    return tuple((l, h) for l in range(num_layers) for h in range(num_heads))


def normalise_heads(heads: Iterable[Sequence[int]] | None, num_layers: int, num_heads: int) -> tuple[Head, ...]:
    """Validate and sort a head selection; ``None`` means every head."""
    if heads is None:
        return all_heads(num_layers, num_heads)
    out = set()
    for item in heads:
        if len(item) != 2:
            raise HeadsegError(f"a head is (layer, head); got {shown(item)}")
        l, h = int(item[0]), int(item[1])
        if not (0 <= l < num_layers and 0 <= h < num_heads):
            raise HeadsegError(f"head L{l}H{h} does not exist in a {num_layers}x{num_heads} model")
        out.add((l, h))
    if not out:
        raise HeadsegError("empty head selection")
    return tuple(sorted(out))


def pad_batch(windows: Sequence[Window], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """``input_ids [B, T]`` padded with ``pad_id`` and ``mask [B, T]``."""
    t = max(len(w) for w in windows)
    ids = np.full((len(windows), t), pad_id, dtype=np.int64)
    mask = np.zeros((len(windows), t), dtype=bool)
    for i, w in enumerate(windows):
        ids[i, : len(w)] = w.input_ids
        mask[i, : len(w)] = True
    return ids, mask


class _StopForward(Exception):
    """Raised by a hook once the deepest needed layer has run."""


@contextmanager
def attention_hooks(loaded: LoadedModel, layers: Iterable[int], store: dict, stop_after: int | None = None,
                    values: dict | None = None) -> Iterator[None]:
    """Attach forward hooks on the self-attention of ``layers``; always removed.

    For each hooked layer ``l`` the hook writes ``store[l] = (x, context, probs)``:
    the layer input ``x [B, T, hidden]``, the concatenated context ``[B, T, H*d]``
    and the attention probabilities ``[B, H, T, T]``.  With ``values`` given, the
    value projection's output ``[B, T, H*d]`` of each layer goes to ``values[l]``
    (the value norms need it, and the forward pass computes it anyway).  If
    ``stop_after`` is given, the forward pass is aborted right after that layer
    (callers catch :class:`_StopForward`), since nothing above it can change its outputs.
    """
    handles = []
    # The hooks sit on the shared modules and fire on every forward pass through them: one
    # hooked pass per model at a time, or concurrent callers write into each other's store.
    lock = _model_lock(loaded.model)

    def make_hook(layer_idx: int):
        def hook(module, args, kwargs, output):
            x = args[0] if args else kwargs["hidden_states"]
            probs = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            store[layer_idx] = (x.detach(), output[0].detach(), None if probs is None else probs.detach())
            if stop_after is not None and layer_idx == stop_after:
                raise _StopForward()

        return hook

    def make_value_hook(layer_idx: int):
        def hook(module, args, output):
            values[layer_idx] = output.detach()

        return hook

    lock.acquire()
    try:
        for l in sorted(set(layers)):
            att = loaded.layers[l].attention.self
            if values is not None:
                handles.append(att.value.register_forward_hook(make_value_hook(l)))
            handles.append(att.register_forward_hook(make_hook(l), with_kwargs=True))
        yield
    finally:
        for h in handles:
            h.remove()
        lock.release()


_MODEL_LOCKS: "weakref.WeakKeyDictionary[object, threading.RLock]" = weakref.WeakKeyDictionary()
_MODEL_LOCKS_GUARD = threading.Lock()


def _model_lock(model) -> "threading.RLock":
    """The lock of one torch model's hooked forward passes (made on first use, gone with the model)."""
    with _MODEL_LOCKS_GUARD:
        lock = _MODEL_LOCKS.get(model)
        if lock is None:
            lock = _MODEL_LOCKS[model] = threading.RLock()
        return lock


def resolve_torch_device(device: str | None) -> str:
    """``cpu`` or ``cuda`` for ``device`` (``auto``/None: cuda when torch sees a GPU).

    :class:`DeviceError` for cuda without a GPU, or an unknown device.
    """
    import torch

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceError("--device cuda was asked for, but torch sees no CUDA GPU")
    if device not in ("cpu", "cuda"):
        raise DeviceError(f"unknown device '{device}' (use cpu, cuda or auto)")
    return device


class TorchBackend:
    """Runs the encoder with PyTorch and returns :class:`HeadActivations` (a :class:`CaptureBackend`).

    ``device``: ``"cpu"`` (default), ``"cuda"``, or ``"auto"``/None for CUDA when torch sees a GPU.
    """

    name = "torch"
    #: the weights as loaded (fp32); windows of one call share a padded batch; one call at a time
    precision = None
    per_window = False
    parallel_calls = 1
    max_batch_tokens = DEFAULT_MAX_BATCH_TOKENS

    def __init__(self, loaded: LoadedModel, device: str | None = "cpu"):
        import torch

        self.loaded = loaded
        self.device = resolve_torch_device(device)
        self.model = loaded.model.to(self.device)
        self._torch = torch

    @property
    def info(self):
        """The loaded model's :class:`ModelInfo`."""
        return self.loaded.info

    def capture(
        self,
        windows: Sequence[Window],
        heads: Iterable[Sequence[int]] | None = None,
        attention: bool = False,
        norms: bool = False,
        hidden: bool = False,
    ) -> HeadActivations:
        """Run one batch of windows and capture the selected heads (default: every head).

        ``hidden=True`` runs the whole encoder and adds its last hidden states;
        otherwise the pass stops after the deepest selected layer.

        Padding is honoured: padded keys get zero attention, so the unpadded
        part of every output is what the window alone would give.
        """
        if not windows:
            raise HeadsegError("capture() needs at least one window")
        info = self.loaded.info
        sel = normalise_heads(heads, info.num_layers, info.num_heads)
        ids, mask = pad_batch(windows, self._pad_id)
        store, values, out = self._run(ids, mask, sel, attention=attention, norms=norms, hidden=hidden)
        B, T = ids.shape
        H, d = info.num_heads, info.head_dim
        z = np.empty((B, len(sel), T, d), dtype=np.float32)
        attn = np.empty((B, len(sel), T, T), dtype=np.float32) if attention else None
        fnorm = np.empty((B, len(sel), T), dtype=np.float32) if norms else None
        for l, idx, hs in _by_layer(sel):
            x, ctx, probs = store[l]
            ctx = ctx.view(B, T, H, d).permute(0, 2, 1, 3)  # [B, H, T, d]
            # A whole layer is a slice, not a gather: one copy straight into the output.
            every = hs == list(range(H))
            dst = slice(idx[0], idx[0] + H) if every and idx == list(range(idx[0], idx[0] + H)) else idx
            z[:, dst] = (ctx if every else ctx[:, hs]).float().cpu().numpy()
            if attention:
                if probs is None:
                    raise HeadsegError("the model did not return attention probabilities (eager attention needed)")
                attn[:, dst] = (probs if every else probs[:, hs]).float().cpu().numpy()
            if norms:
                nv = self._value_norms(l, x, values.get(l))
                fnorm[:, dst] = (nv if every else nv[:, hs]).float().cpu().numpy()
        # Padded query rows carry garbage from the model; zero them so that
        # nothing downstream can pick them up by accident.
        z *= mask[:, None, :, None]
        last = None
        if hidden:
            last = out.last_hidden_state.float().cpu().numpy() * mask[:, :, None]
        return HeadActivations(heads=sel, z=z, attention_mask=mask, attn=attn, fnorm=fnorm, hidden=last)

    def unit_vectors(self, windows: Sequence[Window], owners: np.ndarray, heads: Sequence[Sequence[int]],
                     weights: np.ndarray, output_weight: float = 0.0) -> np.ndarray:
        """Unit vectors ``[U, D]`` (see :meth:`CaptureBackend.unit_vectors`), pooled where the model ran.

        The windows run in batches of at most :attr:`max_batch_tokens` padded
        tokens, shortest first; each batch's context vectors ``[B, N, T, d]`` are
        summed into the units on the device (on CUDA nothing per token crosses to
        the host), and only the sums ``[U, N, d]`` come back.
        """
        owners, units = check_owners(windows, owners)
        info = self.loaded.info
        sel = capture_order(heads, info.num_layers, info.num_heads)
        ops = torch_ops(self.device)
        pool = UnitPool(units, output_weight, ops)
        H, d = info.num_heads, info.head_dim
        groups = _by_layer(sel)  # the same for every batch
        for batch in token_batches([len(w) for w in windows], self.max_batch_tokens):
            ws = [windows[i] for i in batch]
            ids, mask = pad_batch(ws, self._pad_id)
            store, _, out = self._run(ids, mask, sel, hidden=output_weight > 0)
            B, T = ids.shape
            z = self._torch.cat([store[l][1].view(B, T, H, d).permute(0, 2, 1, 3)[:, hs]
                                 for l, _, hs in groups], dim=1)  # [B, N, T, d], on the device
            every, content = token_masks(ws, T)
            pool.add(z, ops.to_device(content), ops.to_device(owners[batch]),
                     hidden=None if out is None else out.last_hidden_state,
                     every=ops.to_device(every) if output_weight > 0 else None)  # read only for the output share
        return pool.vectors(weights)

    @property
    def _pad_id(self) -> int:
        pad_id = self.loaded.tokenizer.pad_token_id
        return 0 if pad_id is None else pad_id

    def _run(self, ids: np.ndarray, mask: np.ndarray, sel: Sequence[Head], attention: bool = False,
             norms: bool = False, hidden: bool = False):
        """One hooked forward pass over ``ids``/``mask [B, T]``: the hooks' ``store`` and ``values``
        (device tensors, :func:`attention_hooks`) and the model's output (None when the pass stopped
        after the deepest selected layer, as it does unless ``hidden``)."""
        torch = self._torch
        layers = sorted({l for l, _ in sel})
        store: dict = {}
        values: dict | None = {} if norms else None
        out = None
        with torch.inference_mode(), attention_hooks(self.loaded, layers, store, stop_after=None if hidden else layers[-1],
                                                     values=values):
            try:
                out = self.model(
                    input_ids=torch.from_numpy(ids).to(self.device),
                    attention_mask=torch.from_numpy(mask.astype(np.int64)).to(self.device),
                    output_attentions=attention,
                )
            except _StopForward:
                pass
        return store, values, out

    def _value_norms(self, layer: int, x, v=None):
        """``‖f_h(x_j)‖ [B, H, T]`` with ``f_h(x) = (x W^V_h + b^V_h) W^O_h``, for layer input ``x``.

        ``v`` is the value projection of ``x`` when the forward pass already made
        it.  The norm is read through the head's Gram matrix
        ``G_h = W^O_h W^O_h^T [d, d]``: ``‖v W^O_h‖² = v G_h v^T`` costs ``d²`` per
        token and head instead of ``d · hidden`` for forming ``f_h`` itself.
        """
        att = self.loaded.layers[layer].attention
        info = self.loaded.info
        B, T, _ = x.shape
        with self._torch.inference_mode():
            if v is None:
                v = att.self.value(x)
            v = v.reshape(B, T, info.num_heads, info.head_dim)
            wo = att.output.dense.weight.view(-1, info.num_heads, info.head_dim)  # [hidden_out, H, d]
            gram = self._torch.einsum("ohd,ohe->hde", wo, wo)
            sq = (self._torch.einsum("bthd,hde->bthe", v, gram) * v).sum(-1)  # [B, T, H]
            return sq.clamp(min=0).sqrt().permute(0, 2, 1)


def _by_layer(sel: Sequence[Head]) -> list[tuple[int, list[int], list[int]]]:
    """``(layer, positions on the N axis, heads)`` of each layer in the selection ``sel``."""
    by: dict[int, tuple[list[int], list[int]]] = {}
    for n, (l, h) in enumerate(sel):
        idx, hs = by.setdefault(l, ([], []))
        idx.append(n)
        hs.append(h)
    return [(l, idx, hs) for l, (idx, hs) in by.items()]


def capture_order(heads: Sequence[Sequence[int]], num_layers: int, num_heads: int) -> tuple[Head, ...]:
    """``heads`` checked to be in capture order (sorted, each once), as weights aligned with them need."""
    sel = normalise_heads(heads, num_layers, num_heads)
    if list(sel) != [(int(l), int(h)) for l, h in heads]:
        raise HeadsegError("unit_vectors() needs its heads in capture order (sorted by layer and head, each "
                           "once), aligned with their weights")
    return sel


def iter_batches(windows: Sequence[Window], batch_size: int) -> Iterator[list[Window]]:
    """Batches of windows sorted by length (less padding), in stable order."""
    if batch_size < 1:
        raise HeadsegError("batch size must be at least 1")
    order = sorted(range(len(windows)), key=lambda i: (len(windows[i]), i))
    for s in range(0, len(order), batch_size):
        yield [windows[i] for i in order[s : s + batch_size]]
