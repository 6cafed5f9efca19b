"""Head profiles with NaN, infinite or negative weights are refused (exit 4), not run into one segment (issue 15)."""

from __future__ import annotations

import json

import pytest

from headseg.analysis.errors import ProfileError
from headseg.analysis.profile import HeadProfile
from headseg.cli import main


def _profile(info, weights, topic_weights=None):
    d = {"version": 1, "model_fingerprint": info.fingerprint, "num_layers": info.num_layers,
         "num_heads": info.num_heads,
         "heads": [{"layer": 2, "head": h, "weight": w} for h, w in enumerate(weights)]}
    if topic_weights is not None:
        d["topic_heads"] = [{"layer": 2, "head": h, "weight": w} for h, w in enumerate(topic_weights)]
    return d


@pytest.mark.parametrize("weights, topic", [
    ([float("nan"), 1.0], None),
    ([float("inf"), 1.0], None),
    ([1.0, -0.5], None),
    ([0.0, 0.0], None),
    ([0.5, 0.5], [float("-inf"), 1.0]),
    ([0.5, 0.5], [float("nan"), 1.0]),
])
def test_non_finite_weights_are_refused(tmp_path, tiny_bert, weights, topic):
    with pytest.raises(ProfileError, match="finite non-negative|all zero"):
        HeadProfile.from_dict(_profile(tiny_bert.info, weights, topic))
    # through a file too (JSON spells them NaN / Infinity, which Python's json reads)
    p = tmp_path / "heads.json"
    p.write_text(json.dumps(_profile(tiny_bert.info, weights, topic)))
    with pytest.raises(ProfileError):
        HeadProfile.load(p)


def test_finite_weights_still_load(tiny_bert):
    prof = HeadProfile.from_dict(_profile(tiny_bert.info, [0.25, 0.75], [1.0, 0.0]))
    assert prof.weights == [0.25, 0.75] and prof.topic_weights == [1.0, 0.0]


def test_segment_with_a_nan_profile_exits_4(tmp_path, tiny_bert, capsys):
    model = tmp_path / "model"
    tiny_bert.model.save_pretrained(model)
    tiny_bert.tokenizer.save(model)
    prof = tmp_path / "heads.json"
    prof.write_text(json.dumps(_profile(tiny_bert.info, [float("nan"), 1.0])))
    doc = tmp_path / "doc.txt"
    doc.write_text("One sentence here. Another one there. And a third.\n")
    capsys.readouterr()  # transformers 5 shows a progress bar while saving the model
    rc = main(["segment", str(doc), "--model", str(model), "--profile", str(prof), "--backend", "torch", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 4 and err.startswith("headseg: error: ") and err.count("\n") == 1
    assert "finite non-negative" in err


def test_default_topic_heads_are_the_last_layer_and_the_first_at_a_quarter():
    from headseg.analysis.profile import FIRST_LAYER_TOPIC_WEIGHT

    base = dict(model_fingerprint="f", heads=[(1, 0)], weights=[1.0], num_layers=3, num_heads=2)
    heads, weights = HeadProfile(**base).topic_selection()
    assert heads == [(2, 0), (2, 1), (0, 0), (0, 1)]
    assert weights == pytest.approx([0.5, 0.5, FIRST_LAYER_TOPIC_WEIGHT / 2, FIRST_LAYER_TOPIC_WEIGHT / 2])
    assert sorted(HeadProfile(**base).capture_heads) == [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1)]
    # a one-layer model has only its last layer
    assert HeadProfile(**{**base, "num_layers": 1}).topic_selection() == ([(0, 0), (0, 1)], [0.5, 0.5])
    # the default selection is part of the hash: an artifact made for the last layer alone is not reused
    last_only = HeadProfile(**base, topic_heads=[(2, 0), (2, 1)], topic_weights=[0.5, 0.5])
    explicit = HeadProfile(**base, topic_heads=heads, topic_weights=weights)
    assert HeadProfile(**base).hash() == explicit.hash() != last_only.hash()
