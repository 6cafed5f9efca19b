"""evaluate --out reuses a stored result only when the method signature matches (issue 15)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from headseg.analysis.profile import HeadProfile
from headseg.cli import main
from headseg.evaluation import HeadsegMethod
from headseg.segmenter.evaluation.baselines import RandomMethod
from headseg.segmenter.evaluation.harness import Dataset, ResultStore, evaluate, signature_diff
from headseg.segmenter.evaluation.loaders import iter_documents

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "eval"


class Counting(HeadsegMethod):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.calls = 0

    def predict(self, doc, k=None):
        self.calls += 1
        return super().predict(doc, k)


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir):
    return tiny_bert_dir


def _profile(path, info, heads, topic):
    HeadProfile(model_fingerprint=info.fingerprint, heads=heads, weights=[1.0] * len(heads),
                num_layers=info.num_layers, num_heads=info.num_heads,
                topic_heads=topic, topic_weights=[1.0] * len(topic)).save(path)
    return str(path)


def _dataset():
    return [Dataset("docs", str(FIX / "docs.jsonl"), list(iter_documents(FIX / "docs.jsonl")))]


def _boundaries(out):
    recs = json.loads(Path(out).read_text())["records"]
    return {k: r["boundaries"] for k, r in recs.items()}


def test_changed_profile_recomputes_and_matches_a_fresh_run(tmp_path, model_dir, tiny_bert, caplog):
    p1 = _profile(tmp_path / "p1.json", tiny_bert.info, [(2, 0), (2, 1)], [(0, 0)])
    p2 = _profile(tmp_path / "p2.json", tiny_bert.info, [(1, 3)], [(2, 2), (2, 3)])
    out = tmp_path / "r.json"
    first = Counting(model=str(model_dir), profile=p1, backend="torch")
    evaluate(_dataset(), [first], store=ResultStore(out), quiet=True)
    assert first.calls == 3
    same = Counting(model=str(model_dir), profile=p1, backend="torch")
    evaluate(_dataset(), [same], store=ResultStore(out), quiet=True)
    assert same.calls == 0  # identical signature: reused
    second = Counting(model=str(model_dir), profile=p2, backend="torch")
    with caplog.at_level(logging.WARNING, logger="headseg"):
        [s] = evaluate(_dataset(), [second], store=ResultStore(out), quiet=True)
    assert second.calls == 3
    assert "profile_hash" in caplog.text and "recomputing" in caplog.text
    # what is stored and summarised now is what a fresh run with p2 gives
    fresh_out = tmp_path / "fresh.json"
    [f] = evaluate(_dataset(), [Counting(model=str(model_dir), profile=p2, backend="torch")],
                   store=ResultStore(fresh_out), quiet=True)
    assert _boundaries(out) == _boundaries(fresh_out)
    assert s.metrics == f.metrics
    sig = json.loads(out.read_text())["methods"]["headseg"]["signature"]
    assert sig["profile_hash"] == HeadProfile.load(p2).hash()
    assert sig["model_fingerprint"] == tiny_bert.info.fingerprint
    assert sig["backend"]["kind"] == "TorchBackend" and "headseg" in sig["versions"]


def test_changed_seed_recomputes(tmp_path, capsys, caplog):
    out = tmp_path / "r.json"
    args = ["evaluate", str(FIX / "choi_dir"), "--method", "random", "--quiet", "--json"]
    assert main(args + ["--out", str(out), "--seed", "0"]) == 0
    capsys.readouterr()
    with caplog.at_level(logging.WARNING, logger="headseg"):
        assert main(args + ["--out", str(out), "--seed", "7"]) == 0
    reused = json.loads(capsys.readouterr().out)
    assert "different settings (params.seed)" in caplog.text
    assert main(args + ["--seed", "7"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    assert reused[0]["metrics"] == fresh[0]["metrics"]
    recs = json.loads(out.read_text())["records"]
    docs = list(iter_documents(FIX / "choi_dir"))
    for d in docs:
        assert recs[f"choi_dir|{d.id}|random|none"]["boundaries"] == RandomMethod(seed=7).predict(d).unit_boundaries(d)


def test_records_without_a_signature_are_recomputed(tmp_path):
    out = tmp_path / "r.json"
    evaluate(_dataset(), [RandomMethod(seed=3)], store=ResultStore(out), quiet=True)
    data = json.loads(out.read_text())
    for rec in data["records"].values():
        del rec["signature"]  # as written before signatures existed
        rec["boundaries"] = []
    out.write_text(json.dumps(data))
    evaluate(_dataset(), [RandomMethod(seed=3)], store=ResultStore(out), quiet=True)
    docs = _dataset()[0].documents
    recs = json.loads(out.read_text())["records"]
    for d in docs:
        assert recs[f"docs|{d.id}|random|none"]["boundaries"] == RandomMethod(seed=3).predict(d).unit_boundaries(d)


def test_signature_diff_names_nested_keys():
    a = {"params": {"seed": 0, "p": 0.1}, "versions": {"headseg": "1"}, "model_fingerprint": "x"}
    b = {"params": {"seed": 1, "p": 0.1}, "versions": {"headseg": "2"}, "model_fingerprint": "x"}
    assert signature_diff(a, b) == ["params.seed", "versions.headseg"]
    assert signature_diff(a, a) == []
