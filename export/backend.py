"""The onnxruntime backend: same interface as :class:`analysis.capture.TorchBackend`.

``OnnxBackend(loaded, artifact_dir, device).capture(windows, heads)`` returns
:class:`~analysis.capture.HeadActivations`.  Providers: CUDA when it really
works (a session is created and asked which providers it got, since
onnxruntime-gpu *lists* CUDA even on machines without a GPU), else CPU.  On
CUDA the inputs are uploaded once and outputs are allocated on the device via
I/O binding; only the final tensors are copied back.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from headseg.analysis.capture import HeadActivations, TorchBackend, normalise_heads, pad_batch
from headseg.analysis.errors import ArtifactError, DeviceError, HeadsegError
from headseg.analysis.model import LoadedModel
from headseg.analysis.text import Window

from .artifact import PRECISIONS, cache_dir, check_graph_file, check_matches, read_manifest

_OUTPUT_FOR = {"attention": "head_attn", "norms": "head_fnorm"}


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

    def __init__(self, graph: str | os.PathLike, device: str | None = "auto", threads: int | None = None):
        ort = _ort()
        if device in (None, "auto"):
            want_cuda = cuda_provider_works()
        elif device == "cuda":
            if not cuda_provider_works():
                raise DeviceError("--device cuda was asked for, but onnxruntime has no usable CUDA GPU here")
            want_cuda = True
        elif device == "cpu":
            want_cuda = False
        else:
            raise DeviceError(f"unknown device '{device}' (use cpu, cuda or auto)")
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        if threads:
            opts.intra_op_num_threads = int(threads)
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if want_cuda else ["CPUExecutionProvider"]
        try:
            self.session = ort.InferenceSession(str(graph), sess_options=opts, providers=providers)
        except Exception as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ArtifactError(f"{graph}: onnxruntime cannot load this graph ({msg[:200]})") from None
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
            raise ArtifactError(f"onnxruntime failed to run the graph: {str(exc).splitlines()[0][:200]}") from None
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
            raise ArtifactError(f"onnxruntime (CUDA) failed to run the graph: {str(exc).splitlines()[0][:200]}") from None
        res = binding.copy_outputs_to_cpu()
        return {n: np.asarray(r, dtype=np.float32) for n, r in zip(outputs, res)}

    def run_batch(self, windows: Sequence[Window], pad_id: int, outputs: Sequence[str]) -> dict:
        ids, mask = pad_batch(windows, pad_id)
        return self.run_arrays(ids, mask.astype(np.int64), outputs)


class OnnxBackend:
    """Runs an exported artifact and returns :class:`HeadActivations`, like ``TorchBackend``.

    ``artifact_dir`` is checked against ``loaded`` (model fingerprint) and, if
    given, ``profile_hash``; ``batch_size`` bounds one onnxruntime call, larger
    lists of windows are split into length-sorted buckets to limit padding.
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
        check_matches(self.manifest, loaded.info.fingerprint, profile_hash, str(self.artifact_dir))
        graph = check_graph_file(self.artifact_dir, self.manifest)
        self.session = OnnxSession(graph, device=device, threads=threads)
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
        for s in range(0, B, self.batch_size):
            chunk = order[s : s + self.batch_size]
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
    """Which cached precisions ``auto`` tries, best first, for a device."""
    return ("fp16", "fp32") if device == "cuda" else ("fp32", "int8")


def find_cached(fingerprint: str, profile_hash: str, precisions: Sequence[str]) -> Path | None:
    """The first cached artifact directory with a manifest, in ``precisions`` order."""
    for p in precisions:
        d = cache_dir(fingerprint, profile_hash, p)
        if (d / "manifest.json").is_file():
            return d
    return None


def make_backend(
    loaded: LoadedModel,
    profile=None,
    backend: str = "auto",
    device: str | None = None,
    artifact: str | os.PathLike | None = None,
    precision: str | None = None,
):
    """TorchBackend or OnnxBackend for ``loaded`` and a head ``profile`` (:class:`HeadProfile`).

    ``auto``: an ONNX artifact from the cache (or ``artifact``) when one matches
    the model and profile, else torch.  ``onnx``: the artifact, or an
    :class:`ArtifactError` that says to run ``headseg export``.  ``precision``
    picks one cached precision instead of the device's preference.
    """
    if backend not in ("auto", "torch", "onnx"):
        raise HeadsegError(f"unknown backend '{backend}' (use auto, torch or onnx)")
    if precision is not None and precision not in PRECISIONS:
        raise ArtifactError(f"unknown precision '{precision}' (use {', '.join(PRECISIONS)})")
    if backend == "torch":
        return TorchBackend(loaded, device=device or "cpu")
    if device not in (None, "auto", "cpu", "cuda"):
        raise DeviceError(f"unknown device '{device}' (use cpu, cuda or auto)")
    if profile is None and artifact is None:
        if backend == "onnx":
            raise ArtifactError("the onnx backend needs a head profile (--profile) or an artifact directory")
        return TorchBackend(loaded, device=device or "cpu")
    phash = profile.hash() if profile is not None else None
    target = device or "auto"
    if artifact is not None:
        directory = Path(artifact)
    else:
        if target == "auto":
            target = "cuda" if cuda_provider_works() else "cpu"
        prefs = (precision,) if precision else precision_preference(target)
        directory = find_cached(loaded.info.fingerprint, phash, prefs)
        if directory is None:
            if backend == "onnx":
                where = cache_dir(loaded.info.fingerprint, phash, prefs[0])
                raise ArtifactError(
                    f"no exported ONNX artifact for this model and profile (looked in {where.parent}); "
                    "run `headseg export` (with the same --model and --profile) first"
                )
            return TorchBackend(loaded, device=device or "cpu")
    if backend == "auto":
        # A broken cached artifact should not stop auto from working; torch is always right.
        try:
            return _open_for_profile(loaded, directory, target, profile)
        except ArtifactError as exc:
            if artifact is not None:
                raise
            import sys

            print(f"headseg: warning: ignoring cached artifact ({exc}); using torch", file=sys.stderr)
            return TorchBackend(loaded, device=device or "cpu")
    return _open_for_profile(loaded, directory, target, profile)


def _open_for_profile(loaded, directory, device, profile) -> OnnxBackend:
    """An :class:`OnnxBackend` that is checked to serve every head the profile's segmenter reads."""
    backend = OnnxBackend(loaded, directory, device=device, profile_hash=None if profile is None else profile.hash())
    if profile is not None:
        missing = sorted(set(profile.capture_heads) - set(backend.heads))
        if missing:
            names = ", ".join(f"L{l}H{h}" for l, h in missing)
            raise ArtifactError(f"{directory}: the artifact lacks head(s) {names} of the profile; run `headseg export` again")
    return backend
