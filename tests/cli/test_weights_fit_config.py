"""Issue 35 items 5 and 8: a model folder whose weights do not fit its ``config.json`` is exit 3, on every backend.

Before, a config of 10,000 layers over six layers' weights was built for minutes; missing
tensors were initialised at random by transformers (``auto`` fell back to torch and
served noise, exit 0); a mis-shaped tensor gave onnx's shape-inference RuntimeError.
Each folder here is the tiny BERT of the root conftest, copied and then broken one way.
"""

from __future__ import annotations

import builtins
import errno
import json
import os
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from headseg.analysis.errors import ModelError
from headseg.analysis.families import read_config

from cli_helpers import one_line, run

TEXT = "The committee met on Monday. It approved the budget. Rain fell all night. The river rose quickly.\n"
BACKENDS = ["auto", "onnx", "torch"]


@pytest.fixture
def doc(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path / "cache"))  # nothing cached: every backend really loads
    p = tmp_path / "doc.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


@pytest.fixture
def folder(tiny_bert_dir, tmp_path):
    d = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, d)
    return d


def _config(d, **changes):
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))
    return cfg


def _weights(d, change):
    tensors = load_file(str(d / "model.safetensors"))
    change(tensors)
    save_file(tensors, str(d / "model.safetensors"))


def _segment(doc, folder, backend, capsys):
    return run(["segment", str(doc), "--model", str(folder), "--backend", backend, "--quiet"], capsys)


def _drop_last_layer(t):
    last = max(int(k.split(".")[2]) for k in t if k.startswith("encoder.layer."))
    for k in [k for k in t if k.startswith(f"encoder.layer.{last}.")]:
        del t[k]


def _drop_one_tensor(t):
    del t["encoder.layer.0.attention.self.value.bias"]


def _shrink_ffn(t):
    k = "encoder.layer.1.intermediate.dense.weight"
    t[k] = np.ascontiguousarray(t[k][:-1])


BROKEN = {
    # what is broken: (config changes, weight change, what the one line says)
    "config claims 10,000 layers": ({"num_hidden_layers": 10_000}, None, "says 10000 layer(s)"),
    "weights lack the last layer": ({}, _drop_last_layer, "layer(s) but the weights hold"),
    "weights lack one tensor": ({}, _drop_one_tensor, "attention.self.value.bias"),
    "a tensor of another shape": ({}, _shrink_ffn, "intermediate.dense.weight"),
    "hidden size the weights lack": ({"hidden_size": 64, "num_attention_heads": 4}, None, "config.json implies"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(BROKEN))
def test_weights_that_do_not_fit_the_config_are_exit_3(doc, folder, capsys, backend, case):
    changes, change, says = BROKEN[case]
    if changes:
        _config(folder, **changes)
    if change:
        _weights(folder, change)
    rc, err = _segment(doc, folder, backend, capsys)
    assert rc == 3 and one_line(err) and says in err, err


def test_the_check_reads_headers_only_and_agrees_with_the_arrays(folder):
    """The header's shapes are the arrays' shapes, and the intact folder passes with its own tokenizer."""
    from headseg.analysis.weights import check_weights, expected_shapes, read_header

    tensors = load_file(str(folder / "model.safetensors"))
    assert {k: s for k, (_, s) in read_header(folder / "model.safetensors").items()} == {
        k: tuple(v.shape) for k, v in tensors.items()}
    cfg = read_config(folder, "tiny")
    assert set(expected_shapes(cfg)) <= set(tensors)
    check_weights(folder, cfg, vocab=cfg["vocab_size"])


def test_a_tokenizer_larger_than_the_embedding_matrix_is_refused(folder):
    from headseg.analysis.weights import check_weights

    cfg = read_config(folder, "tiny")
    with pytest.raises(ModelError, match="token ids but the embedding matrix only"):
        check_weights(folder, cfg, vocab=cfg["vocab_size"] + 1)


def test_a_truncated_safetensors_file_is_refused(folder):
    from headseg.analysis.weights import check_weights

    f = folder / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-100])
    with pytest.raises(ModelError, match="outside the file"):
        check_weights(folder, read_config(folder, "tiny"))


def test_a_pytorch_bin_folder_with_missing_weights_is_refused_by_torch(doc, folder, capsys):
    """No safetensors header to read: transformers' own loading report decides (it would initialise at random)."""
    import torch

    tensors = load_file(str(folder / "model.safetensors"))
    _drop_last_layer(tensors)
    (folder / "model.safetensors").unlink()
    torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, folder / "pytorch_model.bin")
    rc, err = _segment(doc, folder, "torch", capsys)
    assert rc == 3 and one_line(err) and "do not fit its config.json" in err, err


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_an_unreadable_model_file_is_exit_3(doc, folder, capsys, monkeypatch, name):
    """As root, chmod 000 would still be readable: the file's open is refused instead."""
    locked = str(folder / name)
    real = builtins.open

    def guarded(file, *args, **kwargs):
        if os.fspath(file) == locked:
            raise PermissionError(errno.EACCES, "Permission denied", locked)
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded)
    rc, err = _segment(doc, folder, "auto", capsys)
    assert rc == 3 and one_line(err) and "Permission denied" in err, err


def test_the_intact_folder_still_segments(doc, folder, capsys):
    rc, err = _segment(doc, folder, "torch", capsys)
    assert rc == 0, err
