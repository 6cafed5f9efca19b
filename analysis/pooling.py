"""Unit vectors pooled from per-token context vectors: the one implementation every engine runs.

Per unit, each head's context vectors ``z_h`` are mean-pooled over the unit's
content tokens (its windows' special tokens left out), normalised per head,
weighted by ``sqrt(w_h)`` and concatenated, so a dot product of two unit
vectors is the weighted mean of the heads' cosines.  With an output share
``s > 0`` (the profile's ``topic_output_weight``) the model's last hidden
states, pooled over every token of the unit's windows (as the model's own
sentence embedding is pooled), are appended at ``sqrt(s)``, the heads scaled
by ``sqrt(1 − s)``: the dot product is then ``(1 − s)·(heads' weighted mean
cosine) + s·(cosine of the model's own embeddings of the two units)``.

A backend feeds :class:`UnitPool` its batches where they were computed
(numpy arrays on the host, or torch tensors on the GPU: :func:`torch_ops`);
only the per-unit sums ``[U, N, d]`` (and ``[U, hidden]``) leave the device,
and :meth:`UnitPool.vectors` finishes them on the host.  Sums are float64.
Cost: O(tokens · N · d) for the sums, O(U · D) for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .errors import HeadsegError, ProfileError, shown


@dataclass(frozen=True)
class ArrayOps:
    """The few operations pooling needs of an array library, so numpy and torch share one pooling.

    ``zeros(shape)`` float64 zeros; ``f64(a)`` ``a`` as float64; ``einsum``;
    ``add_at(target, index, values)`` adds each row of ``values`` into
    ``target[index[k]]`` in place (repeated indices accumulate); ``host(a)``
    ``a`` as a numpy array; ``to_device(a)`` a numpy array (an index, a mask) as
    this library's, where its sums are.
    """

    zeros: Callable[[tuple], Any]
    f64: Callable[[Any], Any]
    einsum: Callable[..., Any]
    add_at: Callable[[Any, Any, Any], None]
    host: Callable[[Any], np.ndarray]
    to_device: Callable[[np.ndarray], Any]


NUMPY = ArrayOps(zeros=lambda shape: np.zeros(shape, dtype=np.float64), f64=lambda a: a.astype(np.float64),
                 einsum=np.einsum, add_at=np.add.at, host=np.asarray, to_device=np.asarray)


def torch_ops(device: str) -> ArrayOps:
    """:class:`ArrayOps` of torch tensors on ``device`` (the sums stay there until :meth:`UnitPool.vectors`)."""
    import torch

    return ArrayOps(zeros=lambda shape: torch.zeros(shape, dtype=torch.float64, device=device),
                    f64=lambda a: a.to(torch.float64), einsum=torch.einsum,
                    add_at=lambda target, index, values: target.index_add_(0, index, values),
                    host=lambda a: a.cpu().numpy(), to_device=lambda a: torch.as_tensor(a, device=device))


def token_masks(windows: Sequence, width: int) -> tuple[np.ndarray, np.ndarray]:
    """``every [B, width]`` (the windows' real tokens) and ``content [B, width]`` (less their special
    tokens), for windows padded to ``width``."""
    every = np.zeros((len(windows), width), dtype=bool)
    content = np.zeros((len(windows), width), dtype=bool)
    for b, w in enumerate(windows):
        every[b, : len(w)] = True
        content[b, : len(w)] = ~w.special
    return every, content


def check_owners(windows: Sequence, owners) -> tuple[np.ndarray, int]:
    """``owners [W]`` (one unit index per window, at least one window) as an array, and ``U``: units
    ``0..max(owners)`` (a unit no window names gets a zero row)."""
    if not len(windows):
        raise HeadsegError("unit_vectors() needs at least one window")
    owners = np.asarray(owners)
    if owners.ndim != 1 or not np.issubdtype(owners.dtype, np.integer) or (len(owners) and owners.min() < 0):
        raise HeadsegError("owners must be one non-negative unit index per window")
    if len(owners) != len(windows):
        raise HeadsegError(f"one owner per window: {len(windows)} windows, {len(owners)} owners")
    return owners, int(owners.max()) + 1


def unit_groups(owners: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The units that own windows, ascending, and each one's window indices (in window order)."""
    owners = np.asarray(owners)
    order = np.argsort(owners, kind="stable")
    units, starts = np.unique(owners[order], return_index=True)
    return units, np.split(order, starts[1:])


def token_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices of windows of ``lengths``, shortest first, cut into batches of at most ``max_tokens``
    padded tokens (a window longer than that runs alone)."""
    if max_tokens < 1:
        raise HeadsegError("the token budget must be at least 1")
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        # sorted ascending: the window joining a batch is its longest
        if batches and (len(batches[-1]) + 1) * lengths[i] <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def unit_means(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per-unit means ``sums [U, ..., D] / counts [U]``, L2-normalised along the last axis (zero stays zero)."""
    means = sums / np.maximum(counts, 1).reshape((-1,) + (1,) * (sums.ndim - 1))
    norms = np.linalg.norm(means, axis=-1, keepdims=True)
    return np.where(norms > 0, means / np.maximum(norms, 1e-12), 0.0)


class UnitPool:
    """The running sums of ``units`` units over the batches of one call, in ``ops``' arrays.

    :meth:`add` takes one batch; :meth:`vectors` gives ``[units, D]``.
    ``output_weight > 0`` pools the last hidden states too (:meth:`add` then needs them).
    """

    def __init__(self, units: int, output_weight: float = 0.0, ops: ArrayOps = NUMPY):
        if not 0.0 <= output_weight < 1.0:
            raise ProfileError(f"the output share must be in [0, 1) (got {shown(output_weight)})")
        self.units, self.output_weight, self.ops = int(units), float(output_weight), ops
        self.sums = self.hidden = None
        self.counts, self.hidden_counts = ops.zeros((self.units,)), ops.zeros((self.units,))

    def add(self, z, content, owners, hidden=None, every=None) -> None:
        """One batch: ``z [B, N, T, d]`` context vectors, ``content [B, T]`` the tokens each unit is pooled
        over, ``owners [B]`` each window's unit (all three this library's arrays); with an output share ``hidden
        [B, T, hidden]`` and ``every [B, T]``, the tokens the output is pooled over (all of the window)."""
        ops = self.ops
        if self.sums is None:
            self.sums = ops.zeros((self.units, z.shape[1], z.shape[3]))
        c = ops.f64(content)
        ops.add_at(self.sums, owners, ops.einsum("bntd,bt->bnd", ops.f64(z), c))
        ops.add_at(self.counts, owners, c.sum(1))
        if self.output_weight <= 0:
            return
        if hidden is None:
            raise ProfileError("the profile reads the model's last hidden states; the backend gave none")
        if self.hidden is None:
            self.hidden = ops.zeros((self.units, hidden.shape[2]))
        # every token of the window, [CLS] and [SEP] too: the output was trained to be
        # pooled so (sentence-transformers' mean pooling; without them dialseg711 0.2604 -> 0.2631)
        e = ops.f64(every)
        ops.add_at(self.hidden, owners, ops.einsum("btd,bt->bd", ops.f64(hidden), e))
        ops.add_at(self.hidden_counts, owners, e.sum(1))

    def vectors(self, weights: np.ndarray) -> np.ndarray:
        """``[units, N·d]`` (``[units, N·d + hidden]`` with an output share): each head mean-pooled,
        normalised and weighted by ``sqrt(weights [N])``; a unit without tokens is zero."""
        if self.sums is None:
            raise HeadsegError("no batch was pooled")
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (self.sums.shape[1],):
            raise HeadsegError(f"one weight per head: {self.sums.shape[1]} heads, weights {weights.shape}")
        host = self.ops.host
        unit = (unit_means(host(self.sums), host(self.counts)) * np.sqrt(weights)[None, :, None])
        unit = unit.reshape(self.units, -1)
        if self.output_weight <= 0:
            return unit
        return np.hstack([unit * np.sqrt(1.0 - self.output_weight),
                          unit_means(host(self.hidden), host(self.hidden_counts)) * np.sqrt(self.output_weight)])
