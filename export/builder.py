"""The serving graph written straight from the weights: numpy and the ``onnx`` package, no torch.

:func:`build_graph` writes the graph :class:`~.wrapper.SelectedHeads` exports
through torch and optimum (the reference the tests compare it with), node by
node from ``config.json`` and ``model.safetensors``, as onnxruntime-genai's
model builder does for decoders:

* inputs ``input_ids``, ``attention_mask`` ``[batch_size, sequence_length]`` int64;
* embeddings (word + token type 0 + position, LayerNorm; RoBERTa's positions
  count non-padding ids from ``padding_idx + 1``, as transformers computes
  them; ELECTRA's ``embeddings_project`` when ``embedding_size != hidden_size``);
* every layer below the deepest selected one in full (self-attention with the
  additive mask bias :data:`~.graph.MASK_BIAS`, output LayerNorm, feed-forward
  with the config's ``hidden_act``);
* for each selected layer, the selected heads' ``α = softmax(q kᵀ/√d + mask)``
  and ``z = α v``: outputs ``head_z [B, N, T, d]``, optionally ``head_attn
  [B, N, T, T]`` and ``head_fnorm [B, N, T]`` (``‖v_h W^O_h‖``), heads in sorted
  ``(layer, head)`` order, padded query rows zero; layers above are left out
  unless ``truncate=False`` (then also ``last_hidden_state``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from headseg.analysis.errors import ArtifactError, ModelError
from headseg.analysis.families import embedding_size, family_names, find_family, read_config
from headseg.analysis.model import LoadedModel
from headseg.analysis.weights import ENCODER_MODULES, check_shapes, read_encoder_tensors

from .graph import ACTIVATIONS, MASK_BIAS, GraphWriter


def output_names(attention: bool, norms: bool, truncate: bool) -> list[str]:
    """The graph's outputs, in order: ``head_z``, then ``head_attn``, ``head_fnorm``, ``last_hidden_state``."""
    return (["head_z"] + (["head_attn"] if attention else []) + (["head_fnorm"] if norms else [])
            + ([] if truncate else ["last_hidden_state"]))


def check_config(cfg: Mapping, source: str) -> None:
    """Refuse, in one line, a config the builder cannot write a graph for (:class:`ModelError`)."""
    mt = cfg.get("model_type")
    if find_family(mt) is None:
        raise ModelError(f"{source}: model type '{mt}' is not a BERT-family encoder the ONNX builder writes "
                         f"(supported: {', '.join(family_names())})")
    pe = cfg.get("position_embedding_type", "absolute") or "absolute"
    if pe != "absolute":
        raise ModelError(f"{source}: export supports absolute position embeddings only; this model uses '{pe}'")
    act = cfg.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise ModelError(f"{source}: activation '{act}' is not supported by the ONNX builder "
                         f"(supported: {', '.join(ACTIVATIONS)})")


class _Encoder:
    """The shapes and tensors of one encoder, and the graph pieces written from them."""

    def __init__(self, g: GraphWriter, cfg: Mapping, tensors: Mapping[str, np.ndarray]):
        self.g, self.cfg, self.t = g, cfg, tensors
        self.hidden = int(cfg["hidden_size"])
        self.n = int(cfg["num_attention_heads"])
        self.d = self.hidden // self.n
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.act = ACTIVATIONS[cfg.get("hidden_act", "gelu")]

    def embeddings(self, ids: str) -> str:
        g, t, cfg = self.g, self.t, self.cfg
        x = g.op("Gather", [g.weight("word_embeddings", t["embeddings.word_embeddings.weight"]), ids], "word", axis=0)
        if "embeddings.token_type_embeddings.weight" in t:
            # token_type_ids are all 0: one row added to every token
            x = g.op("Add", [x, g.weight("token_type_0", t["embeddings.token_type_embeddings.weight"][0])])
        table = g.weight("position_embeddings", t["embeddings.position_embeddings.weight"])
        if find_family(cfg.get("model_type")).padded_positions:
            pad = int(cfg.get("pad_token_id", 1) if cfg.get("pad_token_id") is not None else 1)
            real = g.op("Cast", [g.op("Not", [g.op("Equal", [ids, g.const(pad, np.int64)])])], to=7)
            count = g.op("Mul", [g.op("CumSum", [real, g.const(1, np.int64)]), real])
            pos = g.op("Add", [count, g.const(pad, np.int64)], "position_ids")
            x = g.op("Add", [x, g.op("Gather", [table, pos], "positions", axis=0)])
        else:
            length = g.op("Shape", [ids], "seq_len", start=1, end=2)
            rows = g.op("Slice", [table, g.const([0], np.int64), length, g.const([0], np.int64)], "positions")
            x = g.op("Add", [x, rows])
        x = g.layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"], self.eps, "emb_ln")
        if "embeddings_project.weight" in t and embedding_size(cfg) != self.hidden:
            x = g.linear(x, t["embeddings_project.weight"], t["embeddings_project.bias"], "embeddings_project")
        return x

    def attention(self, layer: int, x: str, bias: str, heads: Sequence[int]) -> tuple[str, str, str]:
        """``z``, ``α`` and ``v`` ``[B, len(heads), T, ·]`` of the heads ``heads`` of ``layer``."""
        g, d = self.g, self.d
        rows = np.concatenate([np.arange(h * d, (h + 1) * d) for h in heads])
        pre = f"encoder.layer.{layer}.attention.self"

        def proj(name):
            w, b = self.t[f"{pre}.{name}.weight"][rows], self.t[f"{pre}.{name}.bias"][rows]
            return g.split_heads(g.linear(x, w, b, f"l{layer}.{name}"), len(heads), d)

        q, k, v = proj("query"), proj("key"), proj("value")
        kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
        scores = g.op("Div", [g.op("MatMul", [q, kt]), g.const(math.sqrt(d))])
        probs = g.op("Softmax", [g.op("Add", [scores, bias])], f"l{layer}.probs", axis=-1)
        return g.op("MatMul", [probs, v], f"l{layer}.context"), probs, v

    def layer_rest(self, layer: int, x: str, context: str) -> str:
        """The rest of a full layer after self-attention: output dense, LayerNorms, feed-forward."""
        g, t, pre = self.g, self.t, f"encoder.layer.{layer}"
        a = g.linear(g.merge_heads(context, self.hidden), t[f"{pre}.attention.output.dense.weight"],
                     t[f"{pre}.attention.output.dense.bias"], f"l{layer}.attn_out")
        a = g.layer_norm(g.op("Add", [a, x]), t[f"{pre}.attention.output.LayerNorm.weight"],
                         t[f"{pre}.attention.output.LayerNorm.bias"], self.eps, f"l{layer}.attn_ln")
        h = g.linear(a, t[f"{pre}.intermediate.dense.weight"], t[f"{pre}.intermediate.dense.bias"], f"l{layer}.ffn_in")
        h = g.activation(h, self.act)
        h = g.linear(h, t[f"{pre}.output.dense.weight"], t[f"{pre}.output.dense.bias"], f"l{layer}.ffn_out")
        return g.layer_norm(g.op("Add", [h, a]), t[f"{pre}.output.LayerNorm.weight"],
                            t[f"{pre}.output.LayerNorm.bias"], self.eps, f"l{layer}.out_ln")

    def fnorm(self, layer: int, v: str, heads: Sequence[int]) -> str:
        """``‖v_h W^O_h‖`` ``[B, n, T]``: each head's value vectors through its slice of the output dense."""
        w = self.t[f"encoder.layer.{layer}.attention.output.dense.weight"]  # [out, n·d]
        wo = w.reshape(w.shape[0], self.n, self.d)[:, list(heads)].transpose(1, 2, 0)  # [n_sel, d, out]
        f = self.g.op("MatMul", [v, self.g.weight(f"l{layer}.wo", wo)])
        return self.g.op("ReduceL2", [f, self.g.const([-1], np.int64)], keepdims=0)


#: the first opset with LayerNormalization, which the graph is written with
MIN_OPSET = 17


def check_opset(opset: int) -> None:
    """Refuse (:class:`ArtifactError`) an opset the graph cannot be written in, or the installed ``onnx`` does not
    know (onnxruntime would refuse the graph only after the export's work)."""
    import onnx

    newest = onnx.defs.onnx_opset_version()
    if opset < MIN_OPSET:
        raise ArtifactError(f"opset {opset} has no LayerNormalization; use --opset {MIN_OPSET} or later")
    if opset > newest:
        raise ArtifactError(f"opset {opset} is newer than the installed onnx {onnx.__version__} knows "
                            f"(up to {newest}); use --opset {MIN_OPSET}..{newest}")


def build_graph(cfg: Mapping, tensors: Mapping[str, np.ndarray], heads: Sequence[tuple[int, int]],
                attention: bool = False, norms: bool = False, truncate: bool = True, opset: int = 18):
    """The serving graph of ``heads`` as an ``onnx.ModelProto`` (see the module docstring for its contract)."""
    import onnx
    from onnx import TensorProto, helper

    check_config(cfg, "config.json")
    check_shapes({name: t.shape for name, t in tensors.items()}, cfg, "the weights")
    check_opset(opset)
    heads = sorted({(int(l), int(h)) for l, h in heads})
    if not heads:
        raise ModelError("export needs at least one head")
    L, n = int(cfg["num_hidden_layers"]), int(cfg["num_attention_heads"])
    bad = [(l, h) for l, h in heads if not (0 <= l < L and 0 <= h < n)]
    if bad:
        raise ModelError(f"head L{bad[0][0]}H{bad[0][1]} does not exist in a {L}-layer, {n}-head model")
    deepest = max(l for l, _ in heads)
    g = GraphWriter()
    enc = _Encoder(g, cfg, tensors)
    mask_f = g.op("Cast", ["attention_mask"], "mask_f", to=1)
    # (1 - mask) · bias, [B, 1, 1, T]: the classic BERT mask, in the order onnxruntime's attention fusion knows
    bias = g.op("Unsqueeze", [g.op("Mul", [g.op("Sub", [g.const(1.0), mask_f]), g.const(MASK_BIAS)]),
                              g.const([1, 2], np.int64)], "mask_bias")
    x = enc.embeddings("input_ids")
    zs, attns, fnorms = [], [], []
    last = deepest if truncate else L - 1
    for layer in range(last + 1):
        sel = [h for l, h in heads if l == layer]
        if sel:
            # The selected heads' own projections, as SelectedHeads computes them: int8
            # quantisation leaves these in float32, so z comes from unquantised weights.
            with g.kept_in_fp32():
                context, probs, v = enc.attention(layer, x, bias, sel)
                zs.append(context)
                attns.append(probs)
                if norms:
                    fnorms.append(enc.fnorm(layer, v, sel))
        if layer < deepest or not truncate:
            context, _, _ = enc.attention(layer, x, bias, range(n))
            x = enc.layer_rest(layer, x, context)
    cat = lambda parts, hint: parts[0] if len(parts) == 1 else g.op("Concat", parts, hint, axis=1)  # noqa: E731
    rows4 = g.op("Unsqueeze", [mask_f, g.const([1, 3], np.int64)], "query_rows")  # [B, 1, T, 1]
    results = {"head_z": g.op("Mul", [cat(zs, "z_all"), rows4], "head_z")}
    if attention:
        results["head_attn"] = g.op("Mul", [cat(attns, "attn_all"), rows4], "head_attn")
    if norms:
        rows3 = g.op("Unsqueeze", [mask_f, g.const([1], np.int64)], "query_rows3")  # [B, 1, T]
        results["head_fnorm"] = g.op("Mul", [cat(fnorms, "fnorm_all"), rows3], "head_fnorm")
    if not truncate:
        results["last_hidden_state"] = g.op("Identity", [x], "last_hidden_state")
    N, d = len(heads), enc.d
    shapes = {"head_z": ["batch_size", N, "sequence_length", d],
              "head_attn": ["batch_size", N, "sequence_length", "sequence_length"],
              "head_fnorm": ["batch_size", N, "sequence_length"],
              "last_hidden_state": ["batch_size", "sequence_length", enc.hidden]}
    names = output_names(attention, norms, truncate)
    if list(results) != names or any(k != v for k, v in results.items()):  # nodes named after their outputs
        raise ArtifactError(f"internal: graph outputs {list(results)} are not {names}")
    inputs = [helper.make_tensor_value_info(nm, TensorProto.INT64, ["batch_size", "sequence_length"])
              for nm in ("input_ids", "attention_mask")]
    outputs = [helper.make_tensor_value_info(nm, TensorProto.FLOAT, shapes[nm]) for nm in names]
    graph = helper.make_graph(g.nodes, "headseg_selected_heads", inputs, outputs, initializer=g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="headseg-builder")
    model.ir_version = min(model.ir_version, 9)  # onnxruntime 1.18 reads IR 9 and older
    onnx.checker.check_model(model)
    return model


def model_weights(loaded: LoadedModel) -> tuple[dict, dict[str, np.ndarray]]:
    """``(config, tensors)`` of a loaded model: from its folder's safetensors, without torch, when it has one.

    A model built in memory (no folder) gives its ``state_dict``; torch is
    loaded already there.
    """
    if loaded.weights_digest is not None and loaded.info.path:
        path = Path(loaded.info.path)
        cfg = read_config(path, loaded.info.name)
        return cfg, read_encoder_tensors(path, cfg)
    if not loaded.has_weights:
        raise ModelError(f"model '{loaded.info.name}' has no weight folder and no weights in memory")
    cfg = loaded.model.config.to_dict()
    cfg.setdefault("model_type", loaded.model.config.model_type)
    sd = {k: v.detach().cpu().float().numpy() for k, v in loaded.model.state_dict().items()
          if v.is_floating_point() and k.startswith(ENCODER_MODULES)}
    return cfg, sd


def write_graph(loaded: LoadedModel, heads: Sequence[tuple[int, int]], path: str | Path, attention: bool = False,
                norms: bool = False, truncate: bool = True, opset: int = 18) -> list[str]:
    """Build the fp32 graph of ``loaded``'s ``heads`` and save it to ``path``; returns the output names."""
    import onnx

    cfg, tensors = model_weights(loaded)
    model = build_graph(cfg, tensors, heads, attention=attention, norms=norms, truncate=truncate, opset=opset)
    try:
        onnx.save(model, str(path))
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"cannot write the ONNX graph to {path}: {exc}") from None
    return output_names(attention, norms, truncate)
