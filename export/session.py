"""Running one ONNX graph: an onnxruntime session on CPU or CUDA.

:class:`OnnxSession` loads a graph with the providers the device needs,
checks that it got them (onnxruntime-gpu *lists* CUDA even on machines without
a GPU) and runs batches of token windows, returning the graph's outputs as
float32 numpy arrays.  On CUDA the inputs are uploaded once and the outputs
are allocated on the device via I/O binding; only the final tensors are copied
back.  It knows nothing of artifacts or heads: :mod:`.onnx_backend` builds the
capture backend on it, :mod:`.exporter` measures parity with it.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from headseg.analysis.capture import pad_batch
from headseg.analysis.errors import ArtifactError, DeviceError, first_line
from headseg.analysis.text import Window

from .policy import serving_device
from .runtime import _ort, require_cuda

#: the token axes of each graph output (``head_z [B, N, T, d]``, ``head_attn [B, N, T, T]``...)
_TOKEN_AXES = {"head_z": (2,), "head_attn": (2, 3), "head_fnorm": (2,), "last_hidden_state": (1,)}


class OnnxSession:
    """One onnxruntime session on one graph, on CPU or CUDA.

    ``device``: ``"auto"`` (CUDA if it works, else CPU), ``"cpu"`` or ``"cuda"``
    (a :class:`DeviceError` if CUDA is not really usable); afterwards
    ``self.device`` is what the session really got.  ``threads``: onnxruntime's
    intra-op threads (default its own choice); with ``per_window`` on CPU, each
    window runs in its own single-threaded call instead, ``threads`` (default
    the CPU count) of them side by side.  A graph onnxruntime cannot load is an
    :class:`ArtifactError`.
    """

    def __init__(self, graph: str | os.PathLike, device: str | None = "auto", threads: int | None = None,
                 per_window: bool = False):
        ort = _ort()
        if device not in (None, "auto", "cpu", "cuda"):
            raise DeviceError(f"unknown device '{device}' (use cpu, cuda or auto)")
        require_cuda(device)
        want_cuda = serving_device(device) == "cuda"
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        self.per_window = per_window
        self._pool = None
        #: single-window calls that run well side by side (one per thread of the pool): a caller that
        #: feeds windows itself (the serving batcher) runs this many calls at once instead of using the pool
        self.parallel_calls = 1
        workers = int(threads) if threads else (os.cpu_count() or 1)
        if per_window and not want_cuda:
            # One window is too little work to split over threads (measured: 2 intra-op
            # threads on single windows barely beat one); instead each thread runs
            # whole windows, single-threaded, side by side (1.5x on 2 cores).
            opts.intra_op_num_threads = 1
            opts.inter_op_num_threads = 1
            self.parallel_calls = workers
            if workers > 1:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="headseg-ort")
        elif threads:
            opts.intra_op_num_threads = int(threads)
        # Idle worker threads sleep instead of spinning: on a machine whose cores are
        # shared (a server, a Ray node) spinning burns the CPU the other threads need
        # (measured 15-25 % more tokens/s with 2 threads at load average 7).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if want_cuda else ["CPUExecutionProvider"]
        try:
            self.session = ort.InferenceSession(str(graph), sess_options=opts, providers=providers)
        except Exception as exc:
            raise ArtifactError(f"{graph}: onnxruntime cannot load this graph ({first_line(exc)})") from None
        got = self.session.get_providers()
        if want_cuda and "CUDAExecutionProvider" not in got:
            if device == "cuda":
                raise DeviceError("--device cuda was asked for, but onnxruntime fell back to CPU (CUDA provider failed to load)")
            want_cuda = False
        self.device = "cuda" if want_cuda else "cpu"
        self.providers = got
        self.output_names = [o.name for o in self.session.get_outputs()]

    def run_arrays(self, ids: np.ndarray, mask: np.ndarray, outputs: Sequence[str]) -> dict:
        """Run on ``ids [B, T]`` / ``mask [B, T]`` (int64); returns the named outputs as float32 numpy."""
        for name in outputs:
            if name not in self.output_names:
                raise ArtifactError(f"the graph has no output '{name}' (it has {', '.join(self.output_names)})")
        if self.device == "cuda":
            return self._run_cuda(ids, mask, outputs)
        try:
            res = self.session.run(list(outputs), {"input_ids": ids, "attention_mask": mask})
        except Exception as exc:
            raise ArtifactError(f"onnxruntime failed to run the graph: {first_line(exc)}") from None
        return {n: np.asarray(r, dtype=np.float32) for n, r in zip(outputs, res)}

    def _run_cuda(self, ids: np.ndarray, mask: np.ndarray, outputs: Sequence[str]) -> dict:
        ort = _ort()
        binding = self.session.io_binding()
        # The batch is uploaded once and the outputs are allocated on the GPU, so
        # nothing crosses the bus between the graph's nodes or back for inputs.
        binding.bind_ortvalue_input("input_ids", ort.OrtValue.ortvalue_from_numpy(ids, "cuda", 0))
        binding.bind_ortvalue_input("attention_mask", ort.OrtValue.ortvalue_from_numpy(mask, "cuda", 0))
        for name in outputs:
            binding.bind_output(name, "cuda", 0)
        try:
            self.session.run_with_iobinding(binding)
        except Exception as exc:
            raise ArtifactError(f"onnxruntime (CUDA) failed to run the graph: {first_line(exc)}") from None
        res = binding.copy_outputs_to_cpu()
        return {n: np.asarray(r, dtype=np.float32) for n, r in zip(outputs, res)}

    def run_batch(self, windows: Sequence[Window], pad_id: int, outputs: Sequence[str]) -> dict:
        """Run ``windows`` (padded to the longest); per window, each in its own call, when ``per_window``."""
        if not self.per_window:
            ids, mask = pad_batch(windows, pad_id)
            return self.run_arrays(ids, mask.astype(np.int64), outputs)

        def one(w: Window) -> dict:
            ids, mask = pad_batch([w], pad_id)
            return self.run_arrays(ids, mask.astype(np.int64), outputs)

        parts = list(self._pool.map(one, windows)) if self._pool is not None and len(windows) > 1 else \
            [one(w) for w in windows]
        t = max(len(w) for w in windows)
        out = {}
        for name in outputs:
            # token axes padded with zeros to the longest window, as in a padded batch
            axes = _TOKEN_AXES.get(name, (1,))
            arrs = [np.pad(r[name], [(0, t - len(w)) if a in axes else (0, 0) for a in range(r[name].ndim)])
                    for r, w in zip(parts, windows)]
            out[name] = np.concatenate(arrs, axis=0)
        return out
