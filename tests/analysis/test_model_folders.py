"""Broken model folders give one ModelError line (exit 3), never a traceback (issue 15)."""

from __future__ import annotations

import json

import pytest

from headseg.analysis.errors import ModelError
from headseg.analysis.model import load_model
from headseg.cli import main


@pytest.fixture(scope="module")
def saved(tiny_bert_dir):
    return tiny_bert_dir


def _copy(saved, dst, tokenizer=True, edit=None):
    import shutil

    shutil.copytree(saved, dst)
    if not tokenizer:
        for p in dst.iterdir():
            if p.name.startswith(("tokenizer", "vocab", "special_tokens")):
                p.unlink()
    if edit is not None:
        cfg = json.loads((dst / "config.json").read_text())
        (dst / "config.json").write_text(json.dumps(edit(cfg)))
    return dst


def test_a_good_copy_loads(saved, tiny_bert):
    assert load_model(saved).info.fingerprint == tiny_bert.info.fingerprint


@pytest.mark.parametrize("case, kwargs, message", [
    ("no_tokenizer", dict(tokenizer=False), "cannot load the tokenizer"),
    ("string_heads", dict(edit=lambda c: {**c, "num_attention_heads": "four"}),
     "'num_attention_heads' must be a positive integer, not 'four'"),
    ("float_layers", dict(edit=lambda c: {**c, "num_hidden_layers": 2.5}), "'num_hidden_layers' must be a positive"),
    ("bool_hidden", dict(edit=lambda c: {**c, "hidden_size": True}), "'hidden_size' must be a positive"),
    ("string_eps", dict(edit=lambda c: {**c, "layer_norm_eps": "tiny"}), "'layer_norm_eps' must be a number"),
    ("indivisible", dict(edit=lambda c: {**c, "hidden_size": 30}), "not a multiple of num_attention_heads"),
    ("json_list", dict(edit=lambda c: [c]), "expected a JSON object, found a JSON list"),
    ("json_number", dict(edit=lambda c: 3), "expected a JSON object, found a JSON int"),
])
def test_broken_folder_is_one_line_exit_3(saved, tmp_path, capsys, case, kwargs, message):
    folder = _copy(saved, tmp_path / case, **kwargs)
    with pytest.raises(ModelError, match=message):
        load_model(folder)
    rc = main(["inspect", "two words. here", "--layer", "0", "--model", str(folder)])
    err = capsys.readouterr().err
    assert rc == 3
    assert err.startswith("headseg: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert message.split("'")[0] in err
