"""The graph builder (issue 21): written from config.json + model.safetensors, it gives torch's and optimum's numbers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from headseg.analysis import TorchBackend, load_model, windows_from_text
from headseg.analysis.errors import ModelError
from headseg.analysis.model import fingerprint_model
from headseg.analysis.profile import HeadProfile
from headseg.analysis.weights import dir_fingerprint, read_encoder_tensors
from headseg.export.builder import build_graph, write_graph
from headseg.export.session import OnnxSession

TEXT = (
    "The committee met on Monday. It approved the budget, after a long debate! "
    "Rain fell all night; the river rose quickly. Farmers moved their cattle to higher ground. "
    "Stocks fell sharply in early trading. Analysts blamed rising interest rates and weak demand."
)
HEADS = [(0, 1), (1, 2), (2, 0), (2, 3)]


def _save(kind: str, tokenizer, path, seed=0, **extra):
    """A tiny random encoder of ``kind`` saved as a model folder (safetensors, tokenizer.json)."""
    import torch
    from transformers import BertConfig, BertModel, ElectraConfig, ElectraModel, RobertaConfig, RobertaModel

    from headseg.analysis.tokenizer import as_tokenizer

    torch.manual_seed(seed)
    common = dict(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=160, **extra)
    if kind == "bert":
        model = BertModel(BertConfig(**common), add_pooling_layer=False)
    elif kind == "roberta":
        # padding_idx 0 (the BERT tokenizer's pad): positions count from 1, from the ids
        model = RobertaModel(RobertaConfig(pad_token_id=tokenizer.pad_token_id, **common), add_pooling_layer=False)
    else:
        model = ElectraModel(ElectraConfig(embedding_size=16, **common))
    with torch.no_grad():  # LayerNorm weights away from 1/0, so that a wrong one shows
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.add_(torch.randn_like(p) * 0.2)
    model.save_pretrained(path)
    as_tokenizer(tokenizer).save(path)
    return path


@pytest.fixture(scope="module", params=["bert", "roberta", "electra"])
def model_dir(request, tokenizer, tmp_path_factory):
    return _save(request.param, tokenizer, tmp_path_factory.mktemp(request.param))


def _windows(tok):
    ws = windows_from_text(TEXT, tok, max_tokens=20) + windows_from_text(TEXT, tok, max_tokens=48)[:2]
    ws += windows_from_text("Short one.", tok, max_tokens=48)
    assert len({len(w) for w in ws}) >= 3  # padded batches
    return ws


def _rel(ref, got, mask=None):
    if mask is not None:
        ref, got = ref * mask, got * mask
    return float(np.abs(ref - got).max() / np.abs(ref).max())


def test_builder_matches_torch_and_optimum(model_dir, tmp_path):
    loaded = load_model(model_dir, weights=False)  # the builder reads the folder: no torch weights
    assert not loaded.has_weights
    names = write_graph(loaded, HEADS, tmp_path / "b.onnx", attention=True, norms=True)
    assert not loaded.has_weights and names == ["head_z", "head_attn", "head_fnorm"]
    ws = _windows(loaded.tokenizer)
    pad = loaded.tokenizer.pad_token_id or 0
    got = OnnxSession(tmp_path / "b.onnx", device="cpu").run_batch(ws, pad, names)
    ref = TorchBackend(load_model(model_dir)).capture(ws, heads=HEADS, attention=True, norms=True)
    m = ref.attention_mask
    assert got["head_z"].shape == ref.z.shape == (len(ws), len(HEADS), m.shape[1], 8)
    assert _rel(ref.z, got["head_z"]) <= 1e-4
    assert _rel(ref.attn, got["head_attn"], m[:, None, :, None]) <= 1e-4
    assert _rel(ref.fnorm, got["head_fnorm"], m[:, None, :]) <= 1e-4
    # padded query rows are exactly zero
    assert np.all(got["head_z"][np.broadcast_to(~m[:, None, :, None], got["head_z"].shape)] == 0)
    if load_model(model_dir).info.model_type == "electra":
        return  # optimum's config for SelectedHeads reads hidden_size for the embeddings: not a reference here
    pytest.importorskip("optimum.exporters.onnx", reason="the reference exporter is the 'export-reference' extra")
    from headseg.export.reference import export_graph

    export_graph(load_model(model_dir), HEADS, tmp_path / "o.onnx", attention=True, norms=True)
    opt = OnnxSession(tmp_path / "o.onnx", device="cpu").run_batch(ws, pad, names)
    for name in names:
        assert _rel(opt[name], got[name]) <= 1e-4, name


def test_untruncated_graph_has_every_layer(model_dir, tmp_path):
    loaded = load_model(model_dir, weights=False)
    names = write_graph(loaded, [(0, 1)], tmp_path / "full.onnx", truncate=False)
    assert names == ["head_z", "last_hidden_state"]
    ws = _windows(loaded.tokenizer)
    got = OnnxSession(tmp_path / "full.onnx", device="cpu").run_batch(ws, loaded.tokenizer.pad_token_id or 0, names)
    import torch

    from headseg.analysis.capture import pad_batch

    ids, mask = pad_batch(ws, loaded.tokenizer.pad_token_id or 0)
    with torch.no_grad():
        hidden = load_model(model_dir).model(input_ids=torch.as_tensor(ids),
                                             attention_mask=torch.as_tensor(mask.astype(np.int64))).last_hidden_state
    assert _rel(hidden.numpy(), got["last_hidden_state"], mask[..., None]) <= 1e-4


def test_fingerprint_without_torch_equals_torch_fingerprint(model_dir):
    cfg = json.loads((model_dir / "config.json").read_text())
    assert dir_fingerprint(model_dir, cfg) == fingerprint_model(load_model(model_dir).model)


def test_unsupported_model_type_is_one_line(model_dir, tmp_path):
    cfg = json.loads((model_dir / "config.json").read_text())
    tensors = read_encoder_tensors(model_dir, cfg)
    with pytest.raises(ModelError, match="model type 'gpt2' is not a BERT-family") as e:
        build_graph({**cfg, "model_type": "gpt2"}, tensors, HEADS)
    assert "\n" not in str(e.value)
    with pytest.raises(ModelError, match="activation 'swish' is not supported") as e:
        build_graph({**cfg, "hidden_act": "swish"}, tensors, HEADS)
    with pytest.raises(ModelError, match="absolute position embeddings only"):
        build_graph({**cfg, "position_embedding_type": "relative_key"}, tensors, HEADS)


def test_bin_only_folder_is_refused_without_unpickling(tokenizer, tmp_path):
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    d = tmp_path / "bin"
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=32), add_pooling_layer=False
              ).save_pretrained(d, safe_serialization=False)
    assert (d / "pytorch_model.bin").is_file() and not (d / "model.safetensors").exists()
    cfg = json.loads((d / "config.json").read_text())
    with pytest.raises(ModelError, match="convert it to model.safetensors") as e:
        read_encoder_tensors(d, cfg)
    assert "\n" not in str(e.value)
    assert dir_fingerprint(d, cfg) is None  # only torch can fingerprint it
    # serving: `auto` says why and uses torch; `onnx` is an ArtifactError
    from headseg.analysis.tokenizer import as_tokenizer
    from headseg.analysis.errors import ArtifactError
    from headseg.export.backends import make_backend

    as_tokenizer(tokenizer).save(d)
    loaded = load_model(d, weights=False)
    info = loaded.info
    prof = HeadProfile(model_fingerprint=info.fingerprint, heads=[(0, 1)], weights=[1.0], model_name=info.name,
                       num_layers=1, num_heads=2, topic_heads=[(0, 1)])
    assert make_backend(loaded, prof, backend="auto", device="cpu", quiet=True).name == "torch"
    with pytest.raises(ArtifactError, match="convert it to model.safetensors"):
        make_backend(loaded, prof, backend="onnx", device="cpu", quiet=True)


def test_builder_fp32_engine_gives_torch_boundaries_on_embedded_model(embedded, tmp_path):
    """A few documents: the builder's fp32 artifact segments exactly as the torch path does."""
    from headseg import Segmenter
    from headseg.export.exporter import export_artifact
    from headseg.analysis.profile import resolve_profile

    profile = resolve_profile(embedded.info, None)
    art = tmp_path / "fp32"
    m = export_artifact(embedded, profile.capture_heads, profile.hash(), art, precision="fp32", profile=profile)
    assert m.versions["exporter"] == "builder" and m.parity["reference"] == "torch fp32 cpu"
    assert m.parity["z_max_abs_error"] <= 1e-4
    torch_seg = Segmenter(backend="torch", quiet=True)
    onnx_seg = Segmenter(artifact=art, backend="onnx", device="cpu", quiet=True)
    docs = [
        TEXT + " The orchestra played Brahms to a full hall. The audience stood to applaud the soloist.",
        "Rain fell all night. The river rose. Farmers moved cattle.\n\nThe council met. It discussed bus routes. "
        "Tickets will cost more. A storm is expected next week. The football season opened with a win.",
    ]
    for doc in docs:
        assert onnx_seg.segment(doc).boundaries == torch_seg.segment(doc).boundaries


BLOCKED = textwrap.dedent("""
    import json, socket, sys
    class Block:  # as if torch, transformers and optimum were not installed
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "transformers", "optimum"):
                raise ImportError("blocked: " + name)
    sys.meta_path.insert(0, Block())
    attempts = []
    def refuse(*a, **k):
        attempts.append(repr(a[:2]))
        raise OSError("network blocked by the test")
    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.getaddrinfo = refuse
    socket.create_connection = refuse
    from headseg.analysis import load_model, windows_from_text
    from headseg.analysis.profile import HeadProfile
    from headseg.export.provision import export_to_cache, find_cached
    from headseg.export.onnx_backend import OnnxBackend
    loaded = load_model(sys.argv[1], weights=False)
    info = loaded.info
    heads = [(0, 1), (2, 3)]
    prof = HeadProfile(model_fingerprint=info.fingerprint, heads=heads, weights=[1.0, 1.0], model_name=info.name,
                       num_layers=info.num_layers, num_heads=info.num_heads, topic_heads=heads)
    art = export_to_cache(loaded, prof, sys.argv[2], quiet=True)        # the first export
    again = find_cached(info.fingerprint, prof.hash(), [sys.argv[2]], loaded.weights_digest)  # a warm run
    acts = OnnxBackend(loaded, again, device="cpu").capture(windows_from_text("A cat. A dog sat.", loaded.tokenizer))
    print(json.dumps({"art": str(art), "again": str(again), "shape": list(acts.z.shape), "attempts": attempts,
                      "torch": [m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "optimum")]}))
""")


def _blocked_run(model_dir, precision, tmp_path):
    import os

    cache = tmp_path / "cache"
    env = {**os.environ, "HEADSEG_CACHE": str(cache)}
    r = subprocess.run([sys.executable, "-c", BLOCKED, str(model_dir), precision], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_export_to_cache_imports_no_torch(tiny_bert_dir, precision, tmp_path):
    got = _blocked_run(tiny_bert_dir, precision, tmp_path)
    assert got["torch"] == [] and got["art"] == got["again"] and got["shape"][1] == 2


def test_issue23_item7_first_export_and_warm_run_make_no_network_call(tiny_bert_dir, tmp_path):
    got = _blocked_run(tiny_bert_dir, "int8", tmp_path)
    assert got["attempts"] == []
