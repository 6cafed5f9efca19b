"""Writing an ONNX graph node by node: :class:`GraphWriter`, the helpers :mod:`.builder` writes an encoder with.

Every method adds nodes (standard ONNX ops only) and returns the name of the
value it computes, so a layer reads like the arithmetic it is.  Weights are
float32 initializers; a linear layer is ``MatMul`` + ``Add`` with the weight
stored ``[in, out]``, the form onnxruntime's dynamic quantisation and its
attention and GELU fusions recognise.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np

#: Additive bias for padded keys.  Not ``finfo(float32).min`` as transformers uses:
#: after fp16 conversion that constant becomes -inf and ``0 * -inf`` is NaN.
#: ``exp(-1e4)`` is exactly 0 in fp32 and fp16, so real tokens see the same softmax.
MASK_BIAS = -10000.0

#: the end of the names of nodes that int8 quantisation leaves in float32 (the selected heads' own projections)
KEEP_FP32 = "_keepfp32"


class GraphWriter:
    """Nodes, initializers and unique value names of one ONNX graph under construction."""

    def __init__(self):
        self.nodes: list = []
        self.initializers: list = []
        self._names: dict[str, int] = {}
        self._consts: dict[tuple, str] = {}
        self._keep = False

    @contextmanager
    def kept_in_fp32(self) -> Iterator[None]:
        """Nodes added inside are named to stay float32 when the graph is quantised (:data:`KEEP_FP32`)."""
        self._keep = True
        try:
            yield
        finally:
            self._keep = False

    def fresh(self, hint: str) -> str:
        """A value name not used before, from ``hint``."""
        n = self._names.get(hint, 0)
        self._names[hint] = n + 1
        return hint if n == 0 else f"{hint}_{n}"

    def weight(self, name: str, array: np.ndarray, dtype=np.float32) -> str:
        """An initializer holding ``array`` (as ``dtype``); returns its name."""
        from onnx import numpy_helper

        name = self.fresh(name)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array, dtype=dtype), name))
        return name

    def const(self, value, dtype=np.float32) -> str:
        """A small constant (scalar or list), written once however often it is used."""
        arr = np.asarray(value, dtype=dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._consts:
            self._consts[key] = self.weight("const", arr, dtype)
        return self._consts[key]

    def op(self, op_type: str, inputs: Sequence[str], hint: str | None = None, **attrs) -> str:
        """One node with one output; returns the output's name."""
        from onnx import helper

        out = self.fresh(hint or op_type.lower())
        name = f"n{len(self.nodes)}_{op_type}" + (KEEP_FP32 if self._keep else "")
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=name, **attrs))
        return out

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray, hint: str) -> str:
        """``x @ weightᵀ + bias`` for a torch ``Linear`` weight ``[out, in]``."""
        w = self.weight(f"{hint}.weight", np.asarray(weight).T)
        b = self.weight(f"{hint}.bias", bias)
        return self.op("Add", [self.op("MatMul", [x, w], f"{hint}.mm"), b], hint)

    def layer_norm(self, x: str, gamma: np.ndarray, beta: np.ndarray, eps: float, hint: str) -> str:
        """LayerNorm over the last axis (``LayerNormalization``, opset 17 and later)."""
        g = self.weight(f"{hint}.weight", gamma)
        b = self.weight(f"{hint}.bias", beta)
        return self.op("LayerNormalization", [x, g, b], hint, axis=-1, epsilon=float(eps))

    def activation(self, x: str, name: str) -> str:
        """The activation ``name`` (a key of :data:`ACTIVATIONS`) of ``x``."""
        if name == "relu":
            return self.op("Relu", [x])
        if name == "gelu":
            # exact GELU, x · ½ · (1 + erf(x / √2)): the node order torch exports, fused by onnxruntime
            e = self.op("Erf", [self.op("Div", [x, self.const(math.sqrt(2.0))])])
            return self.op("Mul", [self.op("Mul", [x, self.op("Add", [e, self.const(1.0)])]), self.const(0.5)], "gelu")
        # tanh approximation: ½ x (1 + tanh(√(2/π) (x + 0.044715 x³)))
        cube = self.op("Mul", [self.op("Mul", [x, x]), x])
        inner = self.op("Add", [x, self.op("Mul", [cube, self.const(0.044715)])])
        t = self.op("Tanh", [self.op("Mul", [inner, self.const(math.sqrt(2.0 / math.pi))])])
        return self.op("Mul", [self.op("Mul", [x, self.const(0.5)]), self.op("Add", [t, self.const(1.0)])], "gelu")

    def split_heads(self, x: str, heads: int, head_dim: int) -> str:
        """``[B, T, heads·d]`` → ``[B, heads, T, d]``."""
        r = self.op("Reshape", [x, self.const([0, 0, heads, head_dim], np.int64)])
        return self.op("Transpose", [r], perm=[0, 2, 1, 3])

    def merge_heads(self, x: str, width: int) -> str:
        """``[B, heads, T, d]`` → ``[B, T, heads·d]``."""
        t = self.op("Transpose", [x], perm=[0, 2, 1, 3])
        return self.op("Reshape", [t, self.const([0, 0, width], np.int64)])


#: ``hidden_act`` values of config.json the builder writes (transformers' names)
ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu_fast": "tanh"}
