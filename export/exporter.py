"""Making an artifact: the graph written by :mod:`.builder`, converted to fp16/int8, checked, saved.

:func:`export_artifact` is what ``headseg export`` and the serving cache run.
The graph comes from :mod:`.builder` (numpy and ``onnx``, no torch);
``exporter="optimum"`` makes it with torch and optimum instead
(:mod:`.reference`, kept for comparison).  int8 is onnxruntime's dynamic
quantisation, fp16 its float16 converter.  Parity is measured against torch
where its weights are loaded in the process already, else against the fp32
graph the converted one came from: exporting never imports torch for it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from headseg.analysis.cache import file_sha256
from headseg.analysis.errors import ArtifactError, HeadsegError
from headseg.analysis.outputs import output_lock
from headseg.analysis.writing import atomic_write_json
from headseg.analysis.model import LoadedModel
from headseg.analysis.progress import progress_bar
from headseg.analysis.text import windows_from_text

from .artifact import (ARTIFACT_FILES, GRAPH_NAME, INCOMPLETE, MANIFEST_NAME, PRECISIONS, PROFILE_NAME, Manifest,
                       check_out_dir)
from .graph import KEEP_FP32
from .runtime import _ort, quiet_tools
from .session import OnnxSession

#: The opset: optimum's default for BERT-family encoders (LayerNormalization needs 17).
DEFAULT_OPSET = 18
#: How the graph is made: :mod:`.builder` (the product) or :mod:`.reference` (torch + optimum).
EXPORTERS = ("builder", "optimum")

#: Text for the parity check at export time (several sentences, two window sizes
#: so that the batch has padding).
PARITY_TEXT = (
    "The committee met on Monday. It approved the budget, after a long debate! "
    "Rain fell all night; the river rose quickly. Farmers moved their cattle to higher ground. "
    "In the city, the council discussed new bus routes and the price of tickets. "
    "A storm is expected again next week, according to the weather service. "
    "Meanwhile the football season opened with a surprising win for the home team."
)

#: the packages each exporter's artifact depends on, recorded in the manifest
_TOOLCHAIN = {
    "builder": ("headseg", "numpy", "safetensors", "onnx", "onnxruntime-gpu", "onnxruntime"),
    "optimum": ("headseg", "torch", "transformers", "optimum-onnx", "optimum", "onnx", "onnxruntime-gpu",
                "onnxruntime"),
}


def package_versions(exporter: str = "builder") -> dict:
    """``{"exporter": exporter, package: version}`` of the toolchain that made an artifact (absent ones left out)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"exporter": exporter}
    for pkg in _TOOLCHAIN[exporter]:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def write_fp32_graph(loaded: LoadedModel, heads, path: Path, attention: bool, norms: bool, truncate: bool,
                     opset: int, exporter: str = "builder") -> list[str]:
    """The fp32 graph of ``heads`` at ``path``, made by ``exporter``; returns the output names."""
    if exporter == "builder":
        from .builder import write_graph

        return write_graph(loaded, heads, path, attention=attention, norms=norms, truncate=truncate, opset=opset)
    if exporter == "optimum":
        from .reference import export_graph

        return export_graph(loaded, heads, path, attention=attention, norms=norms, truncate=truncate, opset=opset)
    raise ArtifactError(f"unknown exporter '{exporter}' (use {', '.join(EXPORTERS)})")


def convert_precision(src: Path, dst: Path, precision: str) -> None:
    """Write ``dst`` from the fp32 graph ``src``: fp32 copies, int8 quantises, fp16 converts."""
    if precision == "fp32":
        shutil.copyfile(src, dst)
    elif precision == "int8":
        import onnx

        _ort()  # imported through runtime, so that its telemetry is off before quantisation runs
        from onnxruntime.quantization import QuantType, quantize_dynamic

        keep = [n.name for n in onnx.load(str(src)).graph.node if n.name.endswith(KEEP_FP32)]
        with quiet_tools():
            # Weights-only dynamic quantisation of the MatMuls: activations are
            # quantised on the fly, so no calibration data is needed.  The selected
            # heads' own projections stay float32 (KEEP_FP32), as in the torch export.
            quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"],
                             per_channel=True, nodes_to_exclude=keep)
    elif precision == "fp16":
        import onnx

        _ort()
        from onnxruntime.transformers.float16 import convert_float_to_float16

        model = onnx.load(str(src))
        with quiet_tools():
            # keep_io_types: callers keep feeding int64 ids and reading float32 outputs.
            half = convert_float_to_float16(model, keep_io_types=True, disable_shape_infer=False)
        onnx.save(half, str(dst))
    else:
        raise ArtifactError(f"unknown precision '{precision}' (use {', '.join(PRECISIONS)})")


def _reference(loaded: LoadedModel, windows, heads, outputs: Sequence[str], fp32_graph: Path | None):
    """``(name, {output: array})`` to measure against: torch if loaded already, else the fp32 graph, else None."""
    if loaded.has_weights:
        from headseg.analysis.capture import TorchBackend

        ref = TorchBackend(loaded, device="cpu").capture(windows, heads=heads, attention="head_attn" in outputs,
                                                         norms="head_fnorm" in outputs)
        return "torch fp32 cpu", {"head_z": ref.z, "head_attn": ref.attn, "head_fnorm": ref.fnorm}
    if fp32_graph is not None:
        got = OnnxSession(fp32_graph, device="cpu").run_batch(windows, loaded.tokenizer.pad_token_id or 0,
                                                              list(outputs))
        return "fp32 graph cpu", got
    return None, None


def measure_parity(loaded: LoadedModel, graph: Path, heads, outputs: Sequence[str], device: str = "cpu",
                   fp32_graph: Path | None = None) -> dict:
    """Max abs error of ``head_z`` (and the other outputs) of ``graph`` on sample windows.

    The reference is the torch backend where the model's torch weights are
    loaded already, else ``fp32_graph`` (what a converted graph came from);
    with neither, ``{"not_measured": why}``.
    """
    windows = windows_from_text(PARITY_TEXT, loaded.tokenizer, max_tokens=24)
    windows += windows_from_text(PARITY_TEXT, loaded.tokenizer, max_tokens=64)[:2]
    name, ref = _reference(loaded, windows, heads, outputs, fp32_graph)
    if ref is None:
        return {"reference": "none", "device": device,
                "not_measured": "the fp32 graph is the reference (torch is not loaded to compare with)"}
    sess = OnnxSession(graph, device=device)
    got = sess.run_batch(windows, loaded.tokenizer.pad_token_id or 0, list(outputs))
    t = max(len(w) for w in windows)
    mask = np.zeros((len(windows), t), dtype=bool)
    for i, w in enumerate(windows):
        mask[i, : len(w)] = True
    zr, zg = ref["head_z"], got["head_z"]
    num = (zr * zg).sum(-1)
    den = np.linalg.norm(zr, axis=-1) * np.linalg.norm(zg, axis=-1)
    real = np.broadcast_to(mask[:, None, :], num.shape)
    cos = num[real] / np.maximum(den[real], 1e-12)
    out = {
        "reference": name,
        "device": sess.device,
        "windows": len(windows),
        "tokens": int(mask.sum()),
        "padded_batch": bool((~mask).any()),
        "z_max_abs_error": float(np.abs(zr - zg).max()),
        "z_max_abs_value": float(np.abs(zr).max()),
        "z_min_cosine": float(cos.min()),
    }
    if "head_attn" in outputs:
        out["attn_max_abs_error"] = float(np.abs((ref["head_attn"] - got["head_attn"]) * mask[:, None, :, None]).max())
    if "head_fnorm" in outputs:
        out["fnorm_max_abs_error"] = float(np.abs((ref["head_fnorm"] - got["head_fnorm"]) * mask[:, None, :]).max())
    return out


#: A temporary export folder older than this is stale even if its pid is alive
#: (the pid may have been reused, or belong to another machine sharing the folder).
STALE_SECONDS = 3600

#: ``.{out}.tmp-{host}-{pid}-{random}``: who owns a temporary folder, so the next
#: export can tell one being written from one a killed export left behind.
_TEMP_RE = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<host>[^-]*)-(?P<pid>\d+)-[^-]+$")
#: the older unmarked form ``.{out}.{8 random}`` (mkdtemp's suffix), cleaned by age only
_LEGACY_RE = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40]


def _temp_prefix(out: Path) -> str:
    return f".{out.name}.tmp-{_host()}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    except OSError:
        return False
    return True


def clean_stale_temporaries(out: str | os.PathLike, now: float | None = None) -> list[Path]:
    """Remove temporary folders that interrupted exports to ``out`` left beside it; returns them.

    A folder is stale when the process that made it (on this machine) is gone,
    or when it is older than :data:`STALE_SECONDS`.  Folders of a running export
    are left alone.
    """
    out = Path(out)
    parent = out.parent
    if not parent.is_dir():
        return []
    now = time.time() if now is None else now
    host = _host()
    removed = []
    for entry in parent.iterdir():
        m = _TEMP_RE.match(entry.name)
        legacy = None if m else _LEGACY_RE.match(entry.name)
        if not (m or legacy) or (m or legacy).group("name") != out.name:
            continue
        try:
            if entry.is_symlink() or not entry.is_dir():
                continue
            age = now - entry.stat().st_mtime
        except OSError:
            continue
        if legacy and any(not p.name.endswith(".onnx") for p in entry.iterdir()):
            continue  # not the shape of an export folder: not ours to delete
        dead = bool(m) and m.group("host") == host and not _pid_alive(int(m.group("pid")))
        if dead or age > STALE_SECONDS:
            shutil.rmtree(entry, ignore_errors=True)
            if not entry.exists():
                removed.append(entry)
    return removed


def truncates(profile, truncate: bool = True) -> bool:
    """Whether an export for ``profile`` stops the graph after the deepest head: as ``truncate`` asks,
    except for a profile that reads the model's own output embedding (the graph then keeps every layer)."""
    return truncate and not (profile is not None and profile.needs_output)


def export_artifact(
    loaded: LoadedModel,
    heads: Sequence[tuple[int, int]],
    profile_hash: str,
    out_dir: str | os.PathLike,
    precision: str = "fp32",
    attention: bool = False,
    norms: bool = False,
    truncate: bool = True,
    opset: int = DEFAULT_OPSET,
    parity_device: str = "cpu",
    profile=None,
    progress: bool = False,
    exporter: str = "builder",
    force: bool = False,
    owned: bool = False,
) -> Manifest:
    """Export, convert, check parity and write the artifact into ``out_dir``.

    The artifact holds ``model.onnx``, the tokenizer files, ``profile.json`` (the
    :class:`~headseg.analysis.profile.HeadProfile` ``profile``, if given) and
    ``manifest.json``.  Everything is built in a temporary directory beside
    ``out_dir`` and moved in at the end, manifest last, so an interrupted export
    never looks like an artifact.  ``out_dir`` must be new, empty or an artifact
    already (any other folder only with ``force``, and a file headseg did not
    write is never replaced: :func:`~.artifact.check_out_dir`).  ``exporter``:
    ``"builder"`` (from the weights, no torch) or ``"optimum"`` (the reference).
    ``owned``: the folder is headseg's own (in the cache), not checked.  ``truncate``
    (stop the graph after the deepest head) is ignored for a ``profile`` that reads
    the model's last hidden states (:attr:`~headseg.analysis.profile.HeadProfile.needs_output`).  While
    one export writes ``out_dir``, another is refused (:class:`InputError`, exit 2).
    """
    if precision not in PRECISIONS:
        raise ArtifactError(f"unknown precision '{precision}' (use {', '.join(PRECISIONS)})")
    truncate = truncates(profile, truncate)
    out = Path(out_dir)
    # Two exports into one folder would move their files in turn (one's manifest over the other's graph):
    # a second writer is refused at once, as for every output of headseg.  The cache's exporters hold
    # its own lock instead (:func:`.serve.write_cached`).
    with contextlib.nullcontext() if owned else output_lock(out):
        return _export_into(loaded, heads, profile_hash, out, precision, attention, norms, truncate, opset,
                            parity_device, profile, progress, exporter, force, owned)


def _export_into(loaded: LoadedModel, heads, profile_hash: str, out: Path, precision: str, attention: bool,
                 norms: bool, truncate: bool, opset: int, parity_device: str, profile, progress: bool, exporter: str,
                 force: bool, owned: bool) -> Manifest:
    """:func:`export_artifact` once ``out`` is checked and locked."""
    info = loaded.info
    heads = tuple(sorted((int(l), int(h)) for l, h in heads))
    if not owned:
        check_out_dir(out, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(out)
    tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(out), dir=str(out.parent)))
    bar = progress_bar(total=3, desc="export", disable=not progress, unit="step")
    try:
        fp32 = tmp / "fp32.onnx"
        names = write_fp32_graph(loaded, heads, fp32, attention, norms, truncate, opset, exporter)
        bar.update(1)
        final = tmp / GRAPH_NAME
        if precision == "fp32":
            fp32.rename(final)
        else:
            convert_precision(fp32, final, precision)
        bar.update(1)
        source = None if precision == "fp32" else fp32
        if precision == "fp16" and parity_device == "cpu":
            parity = _parity_or_note(loaded, final, heads, names, "cpu", source)
        else:
            parity = measure_parity(loaded, final, heads, names, device=parity_device, fp32_graph=source)
        if precision == "fp32" and parity.get("z_max_abs_error", 0.0) > 1e-3:
            raise ArtifactError(
                f"exported graph disagrees with torch (max abs error {parity['z_max_abs_error']:.3g}); not saved"
            )
        deepest = max(l for l, _ in heads)
        loaded.tokenizer.save(tmp)
        if profile is not None:
            if profile.hash() != profile_hash:
                raise ArtifactError("internal: the profile given does not have the profile hash given")
            profile.save(tmp / PROFILE_NAME)
        manifest = Manifest(
            model_name=info.name,
            model_fingerprint=info.fingerprint,
            profile_hash=profile_hash,
            heads=list(heads),
            precision=precision,
            opset=opset,
            outputs=names,
            truncated=truncate,
            layers_exported=deepest + 1 if truncate else info.num_layers,
            num_layers=info.num_layers,
            head_dim=info.head_dim,
            graph_sha256=file_sha256(final),
            graph_bytes=final.stat().st_size,
            versions=package_versions(exporter),
            parity=parity,
            weights_digest=loaded.weights_digest or "",
            num_heads=info.num_heads,
            hidden_size=info.hidden_size,
            max_positions=info.max_positions,
            model_type=info.model_type,
        )
        if not owned:
            check_out_dir(out, force)  # again: the folder may have changed during the export
        out.mkdir(parents=True, exist_ok=True)
        # A stale manifest must not describe the new files while they are being moved in; the marker in
        # its place keeps the folder headseg's (check_out_dir) if this process dies before the end.
        # check_out_dir let only an artifact's own files (or none) through.
        atomic_write_json(out / MANIFEST_NAME, {INCOMPLETE: True})
        for name in ARTIFACT_FILES:
            if name == MANIFEST_NAME:
                continue
            if (tmp / name).is_file():
                os.replace(tmp / name, out / name)
            else:  # an earlier export's file (a profile.json) must not outlive it
                (out / name).unlink(missing_ok=True)
        atomic_write_json(out / MANIFEST_NAME, manifest.to_dict())
        bar.update(1)
        return manifest
    finally:
        bar.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _parity_or_note(loaded, graph, heads, names, device, fp32_graph) -> dict:
    """fp16 targets the GPU; on CPU its parity is measured if onnxruntime can run it at all."""
    try:
        return measure_parity(loaded, graph, heads, names, device=device, fp32_graph=fp32_graph)
    except HeadsegError as exc:
        return {"reference": "fp32", "device": device, "not_measured": str(exc)}
