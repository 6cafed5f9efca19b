"""The serving engine: the onnxruntime backend, and :func:`make_backend`, the one place a backend is chosen.

``OnnxBackend(loaded, artifact_dir, device).capture(windows, heads)`` returns
:class:`~headseg.analysis.capture.HeadActivations`, like ``TorchBackend`` (both
implement :class:`~headseg.analysis.capture.CaptureBackend`).  It needs neither
torch nor transformers.  Providers: CUDA when it really
works (a session is created and asked which providers it got, since
onnxruntime-gpu *lists* CUDA even on machines without a GPU), else CPU.  On
CUDA the inputs are uploaded once and outputs are allocated on the device via
I/O binding; only the final tensors are copied back.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from headseg.analysis.capture import CaptureBackend, HeadActivations, TorchBackend, normalise_heads, pad_batch
from headseg.analysis.errors import ArtifactError, DeviceError, HeadsegError, first_line
from headseg.analysis.model import LoadedModel
from headseg.analysis.text import Window

from .artifact import PRECISIONS, cache_dir, check_graph_file, check_matches, read_manifest

_OUTPUT_FOR = {"attention": "head_attn", "norms": "head_fnorm"}
#: the token axes of each graph output (``head_z [B, N, T, d]``, ``head_attn [B, N, T, T]``...)
_TOKEN_AXES = {"head_z": (2,), "head_attn": (2, 3), "head_fnorm": (2,), "last_hidden_state": (1,)}

#: the names make_backend takes
BACKENDS = ("auto", "onnx", "torch")

logger = logging.getLogger("headseg")


def _ort():
    import onnxruntime as ort

    return ort


def cuda_provider_works() -> bool:
    """Whether onnxruntime can actually run on CUDA here (not merely lists the provider)."""
    ort = _ort()
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return False
    try:
        import ctypes

        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


class OnnxSession:
    """One onnxruntime session on one graph, on CPU or CUDA.

    ``device``: ``"auto"`` (CUDA if it works, else CPU), ``"cpu"`` or ``"cuda"``
    (a :class:`DeviceError` if CUDA is not really usable).
    """

    def __init__(self, graph: str | os.PathLike, device: str | None = "auto", threads: int | None = None,
                 per_window: bool = False):
        ort = _ort()
        if device not in (None, "auto", "cpu", "cuda"):
            raise DeviceError(f"unknown device '{device}' (use cpu, cuda or auto)")
        if device == "cuda" and not cuda_provider_works():
            raise DeviceError("--device cuda was asked for, but onnxruntime has no usable CUDA GPU here")
        want_cuda = serving_device(device) == "cuda"
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        self.per_window = per_window
        self._pool = None
        workers = int(threads) if threads else (os.cpu_count() or 1)
        if per_window and not want_cuda:
            # One window is too little work to split over threads (measured: 2 intra-op
            # threads on single windows barely beat one); instead each thread runs
            # whole windows, single-threaded, side by side (1.5x on 2 cores).
            opts.intra_op_num_threads = 1
            opts.inter_op_num_threads = 1
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
        return self.loaded.info

    @property
    def precision(self) -> str:
        return self.manifest.precision

    def capture(
        self,
        windows: Sequence[Window],
        heads: Iterable[Sequence[int]] | None = None,
        attention: bool = False,
        norms: bool = False,
    ) -> HeadActivations:
        """Activations of ``heads`` (a subset of the artifact's; default all) for ``windows``.

        Shapes as in :class:`HeadActivations`: ``z [B, N, T, d]`` with T the longest window.
        """
        if not windows:
            raise HeadsegError("capture() needs at least one window")
        info = self.loaded.info
        sel = self.heads if heads is None else normalise_heads(heads, info.num_layers, info.num_heads)
        missing = [h for h in sel if h not in self.heads]
        if missing:
            names = ", ".join(f"L{l}H{h}" for l, h in missing)
            raise HeadsegError(f"head(s) {names} are not in the exported artifact {self.artifact_dir}; export them first")
        outputs = ["head_z"]
        for flag, name in ((attention, "attention"), (norms, "norms")):
            if flag:
                if _OUTPUT_FOR[name] not in self.session.output_names:
                    raise ArtifactError(
                        f"{self.artifact_dir}: the artifact was exported without {name}; "
                        f"run `headseg export --{name}` to include it"
                    )
                outputs.append(_OUTPUT_FOR[name])
        idx = [self.heads.index(h) for h in sel]
        pad_id = self.loaded.tokenizer.pad_token_id or 0
        B, T = len(windows), max(len(w) for w in windows)
        N, d = len(sel), info.head_dim
        z = np.zeros((B, N, T, d), dtype=np.float32)
        mask = np.zeros((B, T), dtype=bool)
        attn = np.zeros((B, N, T, T), dtype=np.float32) if attention else None
        fnorm = np.zeros((B, N, T), dtype=np.float32) if norms else None
        order = sorted(range(B), key=lambda i: (len(windows[i]), i))
        if self.per_window:  # padding costs nothing there: plain runs of batch_size
            cuts = [(a, min(a + self.batch_size, B)) for a in range(0, B, self.batch_size)]
        else:
            cuts = plan_chunks([len(windows[i]) for i in order], self.batch_size, CALL_COST_TOKENS[self.device])
        for s, e in cuts:
            chunk = order[s:e]
            res = self.session.run_batch([windows[i] for i in chunk], pad_id, outputs)
            t = res["head_z"].shape[2]
            for j, i in enumerate(chunk):
                z[i, :, :t] = res["head_z"][j][idx]
                mask[i, : len(windows[i])] = True
                if attention:
                    attn[i, :, :t, :t] = res["head_attn"][j][idx]
                if norms:
                    fnorm[i, :, :t] = res["head_fnorm"][j][idx]
        return HeadActivations(heads=tuple(sel), z=z, attention_mask=mask, attn=attn, fnorm=fnorm)


def precision_preference(device: str) -> tuple[str, ...]:
    """The precision served by default on a device, best first.

    CPU: int8, measured on every document of every dev set to stay within 0.5
    Pk points of fp32 at about twice its speed (docs/performance.md); fp32,
    which gives exactly the torch path's boundaries, is ``precision="fp32"``.
    A cached fp32 artifact is not served in int8's place: the default is one
    precision, so results do not depend on what happens to be in the cache.
    CUDA: fp16, then fp32.
    """
    return ("fp16", "fp32") if device == "cuda" else ("int8",)


def serving_device(device: str | None = "auto") -> str:
    """``cpu`` or ``cuda``: ``auto``/None is CUDA when onnxruntime really works on it, else CPU."""
    if device in (None, "auto"):
        return "cuda" if cuda_provider_works() else "cpu"
    return device


def default_precision(device: str | None = "auto") -> str:
    """The precision served by default on ``device`` (see :func:`serving_device`)."""
    return precision_preference(serving_device(device))[0]


def find_cached(fingerprint: str, profile_hash: str, precisions: Sequence[str]) -> Path | None:
    """The first cached artifact directory with a manifest, in ``precisions`` order."""
    for p in precisions:
        d = cache_dir(fingerprint, profile_hash, p)
        if (d / "manifest.json").is_file():
            return d
    return None


def artifact_profile(artifact: str | os.PathLike, loaded: LoadedModel | None = None):
    """The head profile an artifact was exported with (``profile.json`` inside it).

    With ``loaded``, the artifact is first checked to come from that model, so a
    mismatch is reported as what it is (an artifact of another model).
    """
    from headseg.analysis.profile import HeadProfile

    from .artifact import PROFILE_NAME

    d = Path(artifact)
    manifest = read_manifest(d)  # a clear message for a missing or broken artifact first
    if loaded is not None:
        check_matches(manifest, loaded.info.fingerprint or None, None, str(d), weights_digest=loaded.weights_digest)
    if not (d / PROFILE_NAME).is_file():
        raise ArtifactError(f"{d}: no {PROFILE_NAME} in the artifact; pass --profile or run `headseg export` again")
    return HeadProfile.load(d / PROFILE_NAME)


def _warn(msg: str) -> None:
    logger.warning(msg)


def export_available() -> str | None:
    """None if this installation can export ONNX graphs, else why not."""
    import importlib.util

    for mod in ("optimum", "onnx", "torch"):
        if importlib.util.find_spec(mod) is None:
            return f"module '{mod}' is missing (pip install 'headseg[export]')"
    try:
        import optimum.exporters.onnx  # noqa: F401  # fails on transformers outside optimum-onnx's range
    except Exception as exc:  # noqa: BLE001 - any import failure means no export here
        return f"optimum cannot be imported here ({first_line(exc)}); pip install 'headseg[export]'"
    return None


def export_to_cache(loaded: LoadedModel, profile, precision: str, device: str = "cpu", quiet: bool = False) -> Path:
    """Export the profile's heads into the cache once, safely against concurrent exporters.

    Raises :class:`ArtifactError` with the reason if it cannot (no export
    toolchain, a cache that cannot be written).
    """
    from headseg.analysis.cache import cache_root, file_lock, writable_dir

    why = export_available()
    if why:
        raise ArtifactError(f"cannot export the ONNX graph: {why}")
    target = cache_dir(loaded.info.fingerprint, profile.hash(), precision)
    if not writable_dir(target.parent):
        raise ArtifactError(f"the cache {cache_root()} cannot be written (set HEADSEG_CACHE to a writable folder)")
    with file_lock(target.parent / f".{target.name}.lock"):
        # Another process may have finished the same export while this one waited.
        if (target / "manifest.json").is_file():
            return target
        if not quiet:
            _warn(f"exporting the ONNX serving graph for {loaded.info.name} ({precision}) into {target.parent}; "
                  "this happens once per model, profile and precision")
        from .exporter import export_artifact

        try:
            export_artifact(loaded, profile.capture_heads, profile.hash(), target, precision=precision,
                            parity_device=device if precision == "fp16" else "cpu", profile=profile,
                            progress=not quiet)
        except OSError as exc:
            raise ArtifactError(f"cannot write the artifact into {target} ({exc.strerror or exc})") from None
    return target


def make_backend(
    loaded: LoadedModel,
    profile=None,
    backend: str = "auto",
    device: str | None = None,
    artifact: str | os.PathLike | None = None,
    precision: str | None = None,
    export: bool = True,
    threads: int | None = None,
    quiet: bool = False,
) -> CaptureBackend:
    """The capture backend for ``loaded`` and a head ``profile`` (:class:`HeadProfile`): the one place this is decided.

    * ``"torch"``: :class:`TorchBackend` (the reference; hooks on every head).
    * ``"onnx"``: the ONNX artifact ``artifact``, or the cached one for the model,
      profile and precision; if there is none it is exported into the cache first
      (``export=True``).  Any problem is an :class:`ArtifactError`.
    * ``"auto"`` (default): as ``"onnx"``, but where ONNX cannot serve (no
      onnxruntime, no export toolchain, a cache that cannot be written, a broken
      cached artifact) it says why on the ``headseg`` logger and uses torch.
      A model built in memory (no directory) is served by torch unless an
      artifact for it is already cached.

    ``device``: ``"auto"``/None (CUDA when usable), ``"cpu"`` or ``"cuda"``.
    ``precision``: ``fp32``, ``fp16`` or ``int8`` instead of the device's default.
    """
    if hasattr(backend, "capture"):
        return backend
    if backend not in BACKENDS:
        raise HeadsegError(f"unknown backend '{backend}' (use {', '.join(BACKENDS)})")
    if device not in (None, "auto", "cpu", "cuda"):
        raise DeviceError(f"unknown device '{device}' (use cpu, cuda or auto)")
    if precision is not None and precision not in PRECISIONS:
        raise ArtifactError(f"unknown precision '{precision}' (use {', '.join(PRECISIONS)})")
    if backend == "torch":
        if artifact is not None:
            raise HeadsegError("an artifact is served by the onnx backend, not torch")
        return TorchBackend(loaded, device=device or "auto")
    try:
        return _onnx_backend(loaded, profile, backend, device, artifact, precision, export, threads, quiet)
    except (ArtifactError, ImportError) as exc:
        if backend == "onnx" or artifact is not None:
            if isinstance(exc, ImportError):
                raise ArtifactError(f"the onnx backend needs onnxruntime ({first_line(exc)})") from None
            raise
        if not quiet:
            _warn(f"serving with torch: {first_line(exc, 300)}")
        return TorchBackend(loaded, device=device or "auto")


def _onnx_backend(loaded, profile, backend, device, artifact, precision, export, threads, quiet) -> "OnnxBackend":
    if artifact is not None:
        return _open_for_profile(loaded, Path(artifact), device or "auto", profile, threads)
    if profile is None:
        raise ArtifactError("the onnx backend needs a head profile (--profile) or an artifact (--artifact)")
    target = serving_device(device)
    prefs = (precision,) if precision else precision_preference(target)
    fingerprint = loaded.info.fingerprint
    directory = find_cached(fingerprint, profile.hash(), prefs)
    if directory is not None:
        try:
            return _open_for_profile(loaded, directory, target, profile, threads)
        except ArtifactError as exc:
            if not export or loaded.weights_digest is None:
                raise
            # A broken cached artifact is replaced, not trusted.
            _warn(f"re-exporting a broken cached artifact ({first_line(exc, 300)})")
            (directory / "manifest.json").unlink(missing_ok=True)
    if not export:
        raise ArtifactError("no exported ONNX artifact for this model and profile; run `headseg export`")
    if loaded.weights_digest is None and backend == "auto":
        raise ArtifactError("a model built in memory is exported only on request (`headseg export` or backend='onnx')")
    directory = export_to_cache(loaded, profile, prefs[0], device=target, quiet=quiet)
    return _open_for_profile(loaded, directory, target, profile, threads)


def _open_for_profile(loaded, directory, device, profile, threads=None) -> OnnxBackend:
    """An :class:`OnnxBackend` that is checked to serve every head the profile's segmenter reads."""
    backend = OnnxBackend(loaded, directory, device=device, profile_hash=None if profile is None else profile.hash(),
                          threads=threads)
    if profile is not None:
        missing = sorted(set(profile.capture_heads) - set(backend.heads))
        if missing:
            names = ", ".join(f"L{l}H{h}" for l, h in missing)
            raise ArtifactError(f"{directory}: the artifact lacks head(s) {names} of the profile; run `headseg export` again")
    return backend
