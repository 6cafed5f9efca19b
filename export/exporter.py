"""Exporting the selected heads to ONNX with optimum, then fp16/int8 conversion.

optimum's ``export()`` drives the export: it takes any ``nn.Module`` with a
``config`` and a forward whose arguments match the ONNX config's inputs, makes
the dummy inputs, declares the dynamic axes and fixes them up afterwards.  The
custom :class:`SelectedHeadsOnnxConfig` declares exactly our two inputs and the
``head_z`` (and optional ``head_attn``/``head_fnorm``) outputs.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import time
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from headseg.analysis.capture import TorchBackend
from headseg.analysis.errors import ArtifactError, HeadsegError, first_line
from headseg.analysis.io import atomic_write_json
from headseg.analysis.model import LoadedModel
from headseg.analysis.text import windows_from_text

from headseg.analysis.cache import file_sha256
from headseg.analysis.progress import progress_bar

from .artifact import GRAPH_NAME, MANIFEST_NAME, PRECISIONS, PROFILE_NAME, Manifest
from .session import OnnxSession

#: The opset: optimum's default for BERT-family encoders.
DEFAULT_OPSET = 18

#: Text for the parity check at export time (several sentences, two window sizes
#: so that the batch has padding).
PARITY_TEXT = (
    "The committee met on Monday. It approved the budget, after a long debate! "
    "Rain fell all night; the river rose quickly. Farmers moved their cattle to higher ground. "
    "In the city, the council discussed new bus routes and the price of tickets. "
    "A storm is expected again next week, according to the weather service. "
    "Meanwhile the football season opened with a surprising win for the home team."
)

_AXES = {0: "batch_size", 2: "sequence_length"}


def _onnx_config_class():
    from optimum.exporters.onnx.config import TextEncoderOnnxConfig
    from optimum.utils import NormalizedTextConfig

    class SelectedHeadsOnnxConfig(TextEncoderOnnxConfig):
        """Inputs ``input_ids``/``attention_mask``; outputs the selected heads' tensors."""

        NORMALIZED_CONFIG_CLASS = NormalizedTextConfig

        def __init__(self, config, output_names: Sequence[str]):
            super().__init__(config, task="feature-extraction")
            self._output_names = list(output_names)

        @property
        def inputs(self) -> dict:
            axis = {0: "batch_size", 1: "sequence_length"}
            return {"input_ids": dict(axis), "attention_mask": dict(axis)}

        @property
        def outputs(self) -> dict:
            axes = {
                "head_z": dict(_AXES),
                "head_attn": {0: "batch_size", 2: "sequence_length", 3: "sequence_length"},
                "head_fnorm": dict(_AXES),
                "last_hidden_state": {0: "batch_size", 1: "sequence_length"},
            }
            return {name: axes[name] for name in self._output_names}

    return SelectedHeadsOnnxConfig


def package_versions() -> dict:
    """Installed versions of headseg and the export and serving toolchain, for the manifest (absent ones left out)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("headseg", "torch", "transformers", "optimum-onnx", "optimum", "onnx", "onnxruntime-gpu", "onnxruntime"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def export_graph(
    loaded: LoadedModel,
    heads: Sequence[tuple[int, int]],
    path: Path,
    attention: bool = False,
    norms: bool = False,
    truncate: bool = True,
    opset: int = DEFAULT_OPSET,
) -> list[str]:
    """Export the fp32 graph of :class:`~export.wrapper.SelectedHeads` to ``path``; returns the output names."""
    import torch
    from optimum.exporters.onnx.convert import export as optimum_export

    from .wrapper import SelectedHeads

    module = SelectedHeads(loaded.model, heads, attention=attention, norms=norms, truncate=truncate).eval()
    names = ["head_z"] + (["head_attn"] if attention else []) + (["head_fnorm"] if norms else [])
    if not truncate:
        names.append("last_hidden_state")
    config = _onnx_config_class()(loaded.model.config, names)
    # export_pytorch sets return_dict on the config it is given; leave the caller's model as it was.
    saved_return_dict = loaded.model.config.return_dict
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            optimum_export(model=module, config=config, output=path, opset=opset, device="cpu")
    except HeadsegError:
        raise
    except Exception as exc:
        raise ArtifactError(f"ONNX export failed: {type(exc).__name__}: {first_line(exc)}") from None
    finally:
        loaded.model.config.return_dict = saved_return_dict
    return names


def convert_precision(src: Path, dst: Path, precision: str) -> None:
    """Write ``dst`` from the fp32 graph ``src``: fp32 copies, int8 quantises, fp16 converts."""
    if precision == "fp32":
        shutil.copyfile(src, dst)
    elif precision == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        # Weights-only dynamic quantisation of the MatMuls: activations are
        # quantised on the fly, so no calibration data is needed.
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"], per_channel=True)
    elif precision == "fp16":
        import onnx
        from onnxruntime.transformers.float16 import convert_float_to_float16

        model = onnx.load(str(src))
        # keep_io_types: callers keep feeding int64 ids and reading float32 outputs.
        half = convert_float_to_float16(model, keep_io_types=True, disable_shape_infer=False)
        onnx.save(half, str(dst))
    else:
        raise ArtifactError(f"unknown precision '{precision}' (use {', '.join(PRECISIONS)})")


def measure_parity(loaded: LoadedModel, graph: Path, heads, outputs: Sequence[str], device: str = "cpu") -> dict:
    """Max abs error of ``head_z`` (and the other outputs) vs the torch backend on sample windows."""
    windows = windows_from_text(PARITY_TEXT, loaded.tokenizer, max_tokens=24)
    windows += windows_from_text(PARITY_TEXT, loaded.tokenizer, max_tokens=64)[:2]
    want_attn = "head_attn" in outputs
    want_norms = "head_fnorm" in outputs
    ref = TorchBackend(loaded, device="cpu").capture(windows, heads=heads, attention=want_attn, norms=want_norms)
    sess = OnnxSession(graph, device=device)
    got = sess.run_batch(windows, loaded.tokenizer.pad_token_id or 0, list(outputs))
    mask = ref.attention_mask
    zr, zg = ref.z, got["head_z"]
    num = (zr * zg).sum(-1)
    den = np.linalg.norm(zr, axis=-1) * np.linalg.norm(zg, axis=-1)
    real = np.broadcast_to(mask[:, None, :], num.shape)
    cos = num[real] / np.maximum(den[real], 1e-12)
    out = {
        "reference": "torch fp32 cpu",
        "device": sess.device,
        "windows": len(windows),
        "tokens": int(mask.sum()),
        "padded_batch": bool((~mask).any()),
        "z_max_abs_error": float(np.abs(zr - zg).max()),
        "z_max_abs_value": float(np.abs(zr).max()),
        "z_min_cosine": float(cos.min()),
    }
    if want_attn:
        out["attn_max_abs_error"] = float(np.abs((ref.attn - got["head_attn"]) * mask[:, None, :, None]).max())
    if want_norms:
        out["fnorm_max_abs_error"] = float(np.abs((ref.fnorm - got["head_fnorm"]) * mask[:, None, :]).max())
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
) -> Manifest:
    """Export, convert, check parity and write the artifact into ``out_dir``.

    The artifact holds ``model.onnx``, the tokenizer files, ``profile.json`` (the
    :class:`~headseg.analysis.profile.HeadProfile` ``profile``, if given) and
    ``manifest.json``.  Everything is built in a temporary directory beside
    ``out_dir`` and moved in at the end, manifest last, so an interrupted export
    never looks like an artifact.
    """
    if precision not in PRECISIONS:
        raise ArtifactError(f"unknown precision '{precision}' (use {', '.join(PRECISIONS)})")
    info = loaded.info
    heads = tuple(sorted((int(l), int(h)) for l, h in heads))
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ArtifactError(f"--out {out}: exists and is not a directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(out)
    tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(out), dir=str(out.parent)))
    bar = progress_bar(total=3, desc="export", disable=not progress, unit="step")
    try:
        fp32 = tmp / "fp32.onnx"
        names = export_graph(loaded, heads, fp32, attention=attention, norms=norms, truncate=truncate, opset=opset)
        bar.update(1)
        final = tmp / GRAPH_NAME
        if precision == "fp32":
            fp32.rename(final)
        else:
            convert_precision(fp32, final, precision)
            fp32.unlink()
        bar.update(1)
        if precision == "fp16" and parity_device == "cpu":
            parity = _parity_or_note(loaded, final, heads, names, "cpu")
        else:
            parity = measure_parity(loaded, final, heads, names, device=parity_device)
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
            versions=package_versions(),
            parity=parity,
            weights_digest=loaded.weights_digest or "",
            num_heads=info.num_heads,
            hidden_size=info.hidden_size,
            max_positions=info.max_positions,
            model_type=info.model_type,
        )
        out.mkdir(parents=True, exist_ok=True)
        # A stale manifest must not describe the new files while they are being moved in.
        (out / MANIFEST_NAME).unlink(missing_ok=True)
        for name in (GRAPH_NAME, PROFILE_NAME, "tokenizer.json", "tokenizer_config.json"):
            if (tmp / name).is_file():
                os.replace(tmp / name, out / name)
        atomic_write_json(out / MANIFEST_NAME, manifest.to_dict())
        bar.update(1)
        return manifest
    finally:
        bar.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _parity_or_note(loaded, graph, heads, names, device) -> dict:
    """fp16 targets the GPU; on CPU its parity is measured if onnxruntime can run it at all."""
    try:
        return measure_parity(loaded, graph, heads, names, device=device)
    except HeadsegError as exc:
        return {"reference": "torch fp32 cpu", "device": device, "not_measured": str(exc)}
