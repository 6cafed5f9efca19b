"""Model loading errors, input validation, profiles, norms and the inspect command."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from headseg.analysis.errors import InputError, ModelError, ProfileError
from headseg.analysis.reading import read_text
from headseg.analysis.writing import atomic_write_json
from headseg.analysis.model import load_model, resolve_model_path
from headseg.analysis.norms import attention_shares, coefficient_of_variation, token_categories
from headseg.analysis.profile import HeadProfile
from headseg.cli import main


def test_read_text_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_text(tmp_path / "missing.txt")
    with pytest.raises(InputError, match="directory"):
        read_text(tmp_path)
    (tmp_path / "bin").write_bytes(b"\x00\x01\x02abc")
    with pytest.raises(InputError, match="binary"):
        read_text(tmp_path / "bin")
    (tmp_path / "latin").write_bytes("café".encode("latin-1"))
    with pytest.raises(InputError, match="not valid utf-8 at byte 3"):
        read_text(tmp_path / "latin")
    assert read_text(tmp_path / "latin", encoding="latin-1") == "café"
    (tmp_path / "empty").write_text("  \n\t")
    with pytest.raises(InputError, match="empty"):
        read_text(tmp_path / "empty")
    (tmp_path / "big").write_text("x" * 100)
    with pytest.raises(InputError, match="over the limit"):
        read_text(tmp_path / "big", max_bytes=50)
    (tmp_path / "bom").write_bytes("\ufeffhello".encode("utf-8"))
    assert read_text(tmp_path / "bom") == "hello"


def test_atomic_write_leaves_no_temp_files(tmp_path):
    atomic_write_json(tmp_path / "a" / "x.json", {"k": [1, 2]})
    assert json.loads((tmp_path / "a" / "x.json").read_text()) == {"k": [1, 2]}
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["x.json"]
    import os

    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "a" / "x.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_model_resolution_errors(tmp_path):
    with pytest.raises(ModelError, match="no such directory"):
        resolve_model_path(tmp_path / "nope")
    with pytest.raises(ModelError, match="no config.json"):
        resolve_model_path(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ModelError, match="not a supported BERT-family encoder"):
        load_model(tmp_path)
    with pytest.raises(ModelError, match="not in the local Hugging Face cache"):
        resolve_model_path("someorg/some-model-that-is-not-cached")


def test_embedded_model_info_and_fingerprint(embedded):
    info = embedded.info
    assert (info.num_layers, info.num_heads, info.hidden_size, info.head_dim) == (6, 12, 384, 32)
    assert info.model_type == "bert"
    # same weights through a copied directory give the same fingerprint
    from headseg.analysis.model import fingerprint_model

    assert fingerprint_model(embedded.model) == info.fingerprint


def test_local_directory_model(tmp_path, tiny_roberta):
    tiny_roberta.model.save_pretrained(tmp_path)
    tiny_roberta.tokenizer.save(tmp_path)
    loaded = load_model(str(tmp_path))
    assert loaded.info.model_type == "roberta"
    assert loaded.info.fingerprint == tiny_roberta.info.fingerprint
    assert loaded.info.num_heads == 4


def test_profile_round_trip_and_mismatch(tmp_path, tiny_bert, embedded):
    p = HeadProfile(model_fingerprint=tiny_bert.info.fingerprint, heads=[(2, 1), (1, 0)], weights=[0.7, 0.3],
                    scores=[2.0, 1.0], model_name="tiny", num_layers=3, num_heads=4)
    p.save(tmp_path / "heads.json")
    q = HeadProfile.load(tmp_path / "heads.json")
    assert q.heads == [(2, 1), (1, 0)] and q.weights == [0.7, 0.3] and q.hash() == p.hash()
    q.check_model(tiny_bert.info)
    with pytest.raises(ProfileError, match="was made for model"):
        q.check_model(embedded.info)
    (tmp_path / "bad.json").write_text('{"heads": 3}')
    with pytest.raises(ProfileError, match="not a valid head profile"):
        HeadProfile.load(tmp_path / "bad.json")
    with pytest.raises(ProfileError):
        HeadProfile(model_fingerprint="x", heads=[(0, 0)], weights=[])


def test_norm_shares_hand_computed():
    tokens = ["[CLS]", "the", "cat", ",", "[SEP]"]
    special = np.array([1, 0, 0, 0, 1], bool)
    masks = token_categories(tokens, special)
    assert [k for k, m in masks.items() if m[3]] == ["punct"]
    assert masks["frequent"].tolist() == [False, True, False, False, False]
    attn = np.zeros((1, 5, 5))
    attn[0, :, 4] = 0.5  # half the weight on [SEP]
    attn[0, :, 2] = 0.5  # half on "cat"
    fnorm = np.array([[1.0, 1.0, 3.0, 1.0, 1.0]])  # but "cat" has three times the norm
    shares = attention_shares(attn, fnorm, masks)
    assert shares["sep"]["weight"][0] == pytest.approx(0.5)
    assert shares["sep"]["norm"][0] == pytest.approx(0.25)
    assert shares["other"]["norm"][0] == pytest.approx(0.75)
    assert coefficient_of_variation(fnorm)[0] == pytest.approx(np.std(fnorm) / np.mean(fnorm))


def test_cli_version_and_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    from importlib.metadata import version

    assert f"headseg {version('headseg')}" in capsys.readouterr().out


def test_cli_inspect_errors_are_one_line(tmp_path, capsys):
    (tmp_path / "bin.txt").write_bytes(b"\x00\x00binary")
    rc = main(["inspect", str(tmp_path / "bin.txt")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("headseg: error:") and "binary" in err
    rc = main(["inspect", "some text", "--model", str(tmp_path / "nomodel")])
    err = capsys.readouterr().err
    assert rc == 3 and "no such directory" in err and "Traceback" not in err


@pytest.mark.slow
def test_cli_inspect_save_round_trip(tmp_path, capsys, embedded):
    out = tmp_path / "x.npz"
    rc = main(["inspect", "The cat sat. The dog ran, fast.", "--layer", "5", "--head", "3", "--save", str(out), "--json"])
    assert rc == 0
    shown = json.loads(capsys.readouterr().out)
    data = np.load(out)
    assert data["Z"].shape == (6, 12, len(shown["tokens"]), 32)
    z = data["Z"][5, 3].astype(np.float64)
    s = z @ z.T
    np.fill_diagonal(s, 0)
    np.testing.assert_allclose(data["S"][5, 3], s, rtol=1e-4, atol=1e-4)
    top = shown["top_pairs"][0]
    assert top["value"] == pytest.approx(float(np.triu(s, 1).max()), rel=1e-4)
    np.testing.assert_allclose(data["norm_attention"], data["A"] * data["fnorm"][..., None, :], rtol=1e-6)
    assert str(data["fingerprint"]) == embedded.info.fingerprint


def test_console_script_exit_code(tmp_path):
    r = subprocess.run([sys.executable, "-m", "headseg", "inspect", str(tmp_path / "missing.txt")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("headseg: error:") and "no such file" in r.stderr
