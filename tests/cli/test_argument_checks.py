"""Flags and settings refused in one line (exit 2, or a device's or a profile's code) before any model
load: conflicts, out-of-range values, limits over the model's, devices and precisions; the notes' prefix.

A model that cannot be loaded (``NO_MODEL``, or ``config_only``: a folder with the embedded model's
``config.json`` and nothing else) shows that a check ran before any model load: reaching the load would
exit 3.
"""

from __future__ import annotations

import json
import logging

import pytest

from headseg.analysis.errors import InputError
from headseg.cli import main

from cli_helpers import EVAL_DATA, NO_MODEL, one_line, run


def test_item8_notes_have_one_prefix(capsys):
    from headseg.cli import _configure_process

    undo = _configure_process()
    try:
        handler = next(h for h in logging.getLogger("headseg").handlers if getattr(h, "_headseg_cli", False))
        for msg in ("headseg: note: stored results of random were made with different settings",
                    "note: stored results of random were made with different settings"):
            record = logging.LogRecord("headseg", logging.WARNING, __file__, 1, msg, None, None)
            assert handler.format(record) == \
                "headseg: note: stored results of random were made with different settings"
    finally:
        undo()


def test_item8_segments_go_with_level_topic(tmp_path, capsys):
    from headseg.segmenter.options import SegmentOptions

    (tmp_path / "a.txt").write_text("One. Two. Three.", encoding="utf-8")
    rc, err = run(["segment", str(tmp_path / "a.txt"), "--level", "unit", "--segments", "3"] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and "--segments goes with --level topic" in err, err
    with pytest.raises(InputError, match="segments goes with level topic"):
        SegmentOptions(level="unit", segments=3)
    assert SegmentOptions(level="topic", segments=3).segments == 3


def test_item8_negative_layer_is_named_as_given(tmp_path, config_only, capsys):
    rc, err = run(["inspect", "Some text here.", "--layer", "-7", "--model", config_only], capsys)
    assert rc == 2 and one_line(err) and "--layer -7 is out of range" in err and "0..5" in err, err


@pytest.mark.parametrize("spans", [[(0.0, 4.0), (5, 9)], [(0, 4), (5, 9.0)], [(0, 4.5), (5, 9)],
                                   [(True, 4), (5, 9)]])
def test_item8_splitter_float_spans_are_refused(spans):
    from headseg.analysis.text import tile_spans

    with pytest.raises(InputError, match="pairs of integers"):
        tile_spans("One. Two.", spans)
    import numpy as np

    assert tile_spans("One. Two.", [(np.int64(0), 4), (5, np.int32(9))]) == [(0, 5), (5, 9)]


def test_item11_max_tokens_over_the_model_limit(config_only, capsys):
    rc, err = run(["inspect", "Some text here.", "--max-tokens", "100000", "--model", config_only], capsys)
    assert rc == 2 and one_line(err) and "over the model's limit of 512 tokens" in err, err


def test_item11_api_checks_max_tokens_before_the_weights(embedded):
    from headseg.analysis.inspect import inspect_text

    with pytest.raises(InputError, match="outside 3..512"):
        inspect_text("Some text here.", max_tokens=100000, loaded=embedded)


@pytest.mark.parametrize("argv, message", [
    (["inspect", "Some text.", "--layer", "99", "--model", "{cfg}"], "--layer 99 is out of range"),
    (["inspect", "Some text.", "--head", "-3", "--model", "{cfg}"], "--head -3 is out of range"),
    (["study", "{text}", "--out", "{tmp}/s", "--attention-threshold", "nan", "--model", "{cfg}"],
     "--attention-threshold must be a finite number"),
    (["study", "{text}", "--out", "{tmp}/s", "--seq-len", "4096", "--model", "{cfg}"],
     "over the model's limit of 512"),
    (["export", "--heads", "abc", "--model", "{cfg}"], "'abc' is not LAYER:HEAD"),
    (["export", "--heads", "3:2", "--profile", "P", "--model", "{cfg}"], "either --profile or --heads"),
    (["export", "--out", "{tmp}/D", "--cache", "--model", "{cfg}"], "either --out DIR or --cache"),
    (["segment", "{text}", "--artifact", "{tmp}/D", "--backend", "torch", "--model", "{cfg}"],
     "does not go with --backend torch"),
    (["evaluate", "{text}", "--method", "nonsense", "--model", "{cfg}"], "unknown method 'nonsense'"),
    (["segment", "{text}", "--encoding", "nonsense", "--model", "{cfg}"], "unknown text encoding 'nonsense'"),
    (["inspect", "{text}", "--encoding", "rot13", "--model", "{cfg}"], "unknown text encoding 'rot13'"),
    (["evaluate", "{text}", "--encoding", "nonsense", "--model", "{cfg}"], "unknown text encoding"),
    (["study", "{text}", "--out", "{tmp}/s", "--encoding", "nonsense", "--model", "{cfg}"], "unknown text encoding"),
])
def test_item15_flag_conflicts_exit_2_before_the_model(tmp_path, config_only, capsys, argv, message):
    text = tmp_path / "doc.txt"
    text.write_text("One. Two.\n", encoding="utf-8")
    rc, err = run([a.format(cfg=config_only, text=text, tmp=tmp_path) for a in argv], capsys)
    assert rc == 2 and one_line(err) and message in err, err


def test_issue35_item15_tui_missing_profile_is_exit_4(doc, tmp_path, capsys):
    from headseg.analysis.errors import ProfileError

    missing = tmp_path / "missing.json"
    rc, err = run(["tui", str(doc), "--profile", str(missing)], capsys)
    assert rc == ProfileError.exit_code == 4 and one_line(err) and f"{missing}: no such file" in err, err
    rc, err = run(["segment", str(doc), "--profile", str(missing)], capsys)  # as elsewhere
    assert rc == 4 and one_line(err), err


@pytest.mark.parametrize("heads", ["99:0", "0:99", "L99H0"])
def test_issue35_item15_export_heads_the_model_lacks_is_exit_2(model_dir, tmp_path, capsys, heads):
    rc, err = run(["export", "--model", model_dir, "--heads", heads, "--out", str(tmp_path / "art")], capsys)
    assert rc == 2 and one_line(err) and err.startswith("headseg: error: --heads"), err
    assert not (tmp_path / "art").exists()


def test_issue35_item4_fp16_on_cpu_is_served_like_fp32(doc, model_dir, tmp_path, capsys, monkeypatch):
    """fp16 asked of the CPU is served (the probe once saw no answer; today it is an export and a run
    like fp32's, docs/performance.md): its cached artifact is fp16 and its segments are fp32's."""
    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path / "cache"))
    got = {}
    for precision in ("fp32", "fp16"):
        rc = main(["segment", str(doc), "--model", model_dir, "--backend", "onnx", "--device", "cpu",
                   "--precision", precision, "--format", "jsonl", "--quiet"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        got[precision] = [(r["start"], r["end"]) for r in map(json.loads, out.splitlines())]
    manifests = [json.loads(p.read_text()) for p in (tmp_path / "cache").rglob("manifest.json")]
    assert sorted(m["precision"] for m in manifests) == ["fp16", "fp32"]
    assert got["fp16"] == got["fp32"]


@pytest.mark.parametrize("argv, message", [
    (["--opset", "0"], "--opset: opset 0 has no LayerNormalization"),
    (["--opset", "9999"], "--opset: opset 9999 is newer than the installed onnx"),
    (["--out", ""], "--out: empty path"),
])
def test_export_argument_errors_before_the_model(capsys, argv, message):
    """--opset was refused by the builder or onnxruntime after the export began (exit 5); --out '' exported
    into the cache."""
    rc, err = run(["export", "--heads", "0:0"] + argv + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and message in err, err


def test_export_opset_bounds_are_the_builders():
    import onnx

    from headseg.export.builder import MIN_OPSET, check_opset

    check_opset(MIN_OPSET)
    check_opset(onnx.defs.onnx_opset_version())
    for bad in (MIN_OPSET - 1, onnx.defs.onnx_opset_version() + 1):
        with pytest.raises(Exception, match=f"opset {bad} "):
            check_opset(bad)


@pytest.mark.parametrize("argv, message", [
    (["--threads", "0"], "--threads must be a positive integer (got 0)"),
    (["--threads", "-2"], "--threads must be a positive integer (got -2)"),
    (["--api-key", ""], "--api-key must not be empty"),
])
def test_serve_argument_errors(argv, message):
    """--threads 0 started a server (segment refuses it); an empty key said '--the API key must not be empty'."""
    pytest.importorskip("fastapi")
    from headseg.cli import build_parser
    from headseg.cli.serve import config_of

    args = build_parser().parse_args(["serve"] + argv)
    with pytest.raises(InputError) as info:
        config_of(args)
    assert str(info.value) == message


def test_evaluate_redo_goes_with_out(capsys):
    """--redo without --out was accepted and meant nothing (--force without --out is refused)."""
    rc, err = run(["evaluate", str(EVAL_DATA), "--method", "random", "--redo"], capsys)
    assert rc == 2 and one_line(err) and "--redo goes with --out" in err, err


def test_notes_on_stderr_carry_the_prefix(tmp_path, capsys):
    """Every line headseg writes on stderr starts with 'headseg: ' ('results written to ...' did not)."""
    rc, err = run(["evaluate", str(EVAL_DATA), "--method", "random", "--out", str(tmp_path / "r.json")], capsys)
    assert rc == 0 and err and all(line.startswith("headseg: ") for line in err.splitlines()), err


def test_cuda_without_a_gpu_is_refused_before_the_export(tmp_path, doc, model_dir, capsys, monkeypatch):
    """`segment --device cuda` without a usable GPU exported an fp16 graph into the cache, then exited 6."""
    import headseg.export.runtime as runtime

    monkeypatch.setattr(runtime, "cuda_provider_works", lambda: False)
    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path / "cache"))
    rc, err = run(["segment", str(doc), "--device", "cuda", "--model", model_dir], capsys)
    assert rc == 6 and one_line(err) and "no usable CUDA GPU" in err, err
    assert not (tmp_path / "cache" / "onnx").exists() or not any((tmp_path / "cache" / "onnx").iterdir())


def refused(argv: list[str], capsys) -> tuple[int, str]:
    """argparse's own refusal (a value its type or choices cannot read): it exits in-process."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    return exit_.value.code, capsys.readouterr().err


@pytest.mark.parametrize("flag, value, quoted", [("--max-tokens", "abc" + "9" * 5000, "abc" + "9" * 57),
                                                 ("--level", "y" * 300, "y" * 60)])
def test_a_long_bad_value_is_echoed_shortened_with_its_length(tmp_path, capsys, flag, value, quoted):
    (tmp_path / "a.txt").write_text("One. Two. Three.", encoding="utf-8")
    rc, err = refused(["segment", str(tmp_path / "a.txt"), flag, value] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err), err
    assert f"'{quoted}…' ({len(value)} characters)" in err and len(err) < 400, err


def test_a_short_bad_value_is_echoed_whole(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("One. Two. Three.", encoding="utf-8")
    value = "x" * 80  # up to 80 characters are echoed as they are
    rc, err = refused(["segment", str(tmp_path / "a.txt"), "--max-tokens", value] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and f"invalid int value: '{value}'" in err and "characters)" not in err, err
