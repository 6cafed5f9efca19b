"""Corpus reading and sample planning of the study."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from headseg.analysis.errors import InputError
from headseg.analysis.study.corpus import (
    build_window,
    pass_offsets,
    plan_samples,
    read_corpus,
    strip_markers,
    van_der_corput,
)
from headseg.analysis.text import make_windows, tokenize

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "study"


def test_strip_markers_and_crlf():
    assert strip_markers("==========\r\nA b .\r\n==========\r\nC d .\r\n") == "A b .\nC d .\n"
    assert strip_markers("x\n  ==========  \ny") == "x\ny"
    assert strip_markers("a ========== b") == "a ========== b"  # only whole marker lines


def test_read_corpus_folder_jsonl_and_order():
    docs = read_corpus([str(FIX / "docs"), str(FIX / "corpus.jsonl")])
    assert [Path(d.source.split(":")[0]).name for d in docs] == ["a.txt", "b.ref", "corpus.jsonl", "corpus.jsonl"]
    assert "==========" not in docs[1].text and "\r" not in docs[1].text
    assert docs[1].text.startswith("The orchestra played")
    assert docs[2].text.startswith("A small boat")
    assert docs[3].source.endswith(":2")


def test_read_corpus_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_corpus([str(tmp_path / "missing.txt")])
    (tmp_path / "empty.txt").write_text("  \n")
    with pytest.raises(InputError, match="corpus is empty"):
        read_corpus([str(tmp_path / "empty.txt")])
    (tmp_path / "only_markers.ref").write_text("==========\n==========\n")
    with pytest.raises(InputError, match="corpus is empty"):
        read_corpus([str(tmp_path / "only_markers.ref")])
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"txt": "no"}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2: .*\"text\""):
        read_corpus([str(tmp_path / "bad.jsonl")])
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    with pytest.raises(InputError, match="broken.jsonl:1: not valid JSON"):
        read_corpus([str(tmp_path / "broken.jsonl")])
    (tmp_path / "bin.txt").write_bytes(b"abc\x00def")
    with pytest.raises(InputError, match="binary"):
        read_corpus([str(tmp_path / "bin.txt")])
    sub = tmp_path / "nothing"
    sub.mkdir()
    (sub / "image.png").write_bytes(b"x")
    with pytest.raises(InputError, match="no text files"):
        read_corpus([str(sub)])


def test_van_der_corput_offsets():
    assert [van_der_corput(k) for k in range(5)] == [0.0, 0.5, 0.25, 0.75, 0.125]
    offs = pass_offsets(8)
    assert offs[:4] == [0, 4, 2, 6]
    assert sorted(offs) == list(range(8))


def test_plan_samples_passes_and_determinism():
    lengths = [100, 35, 5]
    # pass 0 (offset 0, width 10): 10 + 3 + 1 (short doc whole) = 14 windows
    plan, info = plan_samples(lengths, 10, 14, seed=0)
    assert info["passes"] == 1 and info["drawn"] == 14 and not info["exhausted"]
    assert plan == sorted([(0, s) for s in range(0, 91, 10)] + [(1, 0), (1, 10), (1, 20), (2, 0)])
    # 20 samples: all of pass 0, plus 6 of pass 1 (offset 5: 9 + 3 windows), drawn with the seed
    plan, info = plan_samples(lengths, 10, 20, seed=0)
    assert info["passes"] == 2 and info["offsets"] == [0, 5] and len(plan) == 20
    extra = [p for p in plan if p[1] % 10 == 5]
    assert len(extra) == 6 and all(p[0] in (0, 1) for p in extra)
    assert plan == plan_samples(lengths, 10, 20, seed=0)[0]
    assert len(set(plan)) == 20
    other = plan_samples(lengths, 10, 20, seed=1)[0]
    assert other != plan
    # every window lies inside its document
    for d, s in plan:
        assert s + min(10, lengths[d]) <= lengths[d]


def test_plan_samples_exhausted_corpus():
    plan, info = plan_samples([12], 4, 1000, seed=0)
    # every offset 0..3, full windows only: 3 + 2 + 2 + 2
    assert info["exhausted"] and info["drawn"] == len(plan) == 9 and info["passes"] == 4
    with pytest.raises(InputError):
        plan_samples([12], 4, 0, seed=0)


def test_build_window_matches_make_windows(tokenizer):
    text = (FIX / "docs" / "a.txt").read_text()
    doc = tokenize(text, tokenizer)
    ref = make_windows(doc, tokenizer, max_tokens=32)
    w = build_window(doc, ref[1].doc_start, 30, tokenizer, 32)
    np.testing.assert_array_equal(w.input_ids, ref[1].input_ids)
    np.testing.assert_array_equal(w.sentence_ids, ref[1].sentence_ids)
    np.testing.assert_array_equal(w.offsets, ref[1].offsets)
    assert w.tokens == ref[1].tokens and w.doc_start == ref[1].doc_start
    assert text[w.start_char : w.end_char] == text[ref[1].start_char : ref[1].end_char]
