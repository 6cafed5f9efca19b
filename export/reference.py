"""The reference exporter: :class:`~.wrapper.SelectedHeads` traced by torch and exported by optimum.

Not what headseg ships (that is :mod:`.builder`, written from the weights
without torch): kept so that tests and ``benchmarks/builder_parity.py`` can
compare the builder's graph with the one the torch tracer makes.  Needs the
``export`` extra (optimum-onnx, torch, transformers).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Sequence

from headseg.analysis.errors import ArtifactError, HeadsegError, first_line
from headseg.analysis.model import LoadedModel

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


def export_graph(
    loaded: LoadedModel,
    heads: Sequence[tuple[int, int]],
    path: Path,
    attention: bool = False,
    norms: bool = False,
    truncate: bool = True,
    opset: int = 18,
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
