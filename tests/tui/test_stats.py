"""Per-head statistics for the grid: recomputed independently, and the report adapter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from headseg.analysis.errors import InputError
from headseg.analysis.inspect import summarise
from headseg.tui.precomputed import load_precomputed
from headseg.tui.stats import DOC_STATS, document_statistics, extract_per_head, load_report_stats, window_statistics

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tui"


@pytest.fixture(scope="module")
def doc():
    return load_precomputed(FIXTURES / "doc_tiny.npz")


def test_window_statistics_against_inspect_summary(doc):
    """mean distance / within-sentence share equal `headseg inspect`'s summary on content tokens."""
    w = doc.window(1)
    m = doc.matrices(1)
    k = 10
    got = window_statistics(w, m, k=k)
    c = w.content
    sub = type(w)(w.index, w.input_ids[c], w.offsets[c], w.special[c], w.sentence_ids[c],
                  [w.tokens[i] for i in c], w.doc_start, w.start_char, w.end_char)
    for layer in range(doc.num_layers):
        for head in range(doc.num_heads):
            s = m.s[layer, head][np.ix_(c, c)]
            ref = summarise(s, sub, k)
            assert got["mean distance"][layer, head] == pytest.approx(ref["mean_distance_top"])
            assert got["within-sentence share"][layer, head] == pytest.approx(ref["same_sentence_top"])
            toks = [sub.tokens[i].lstrip("#").lower() for i in range(len(c))]
            rep = np.mean([toks[i] == toks[j] for i, j, _ in ref["top_pairs"]])
            assert got["repetition"][layer, head] == pytest.approx(rep)


def test_separator_focus_by_hand(doc):
    w = doc.window(0)
    m = doc.matrices(0)
    got = window_statistics(w, m)["separator focus"]
    for layer in range(doc.num_layers):
        for head in range(doc.num_heads):
            a = m.attn[layer, head]
            rows = [sum(a[i, j] for j in range(len(w)) if w.special[j]) for i in range(len(w)) if not w.special[i]]
            assert got[layer, head] == pytest.approx(np.mean(rows), rel=1e-5)


def test_document_statistics_average_windows(doc):
    per = [window_statistics(doc.window(i), doc.matrices(i)) for i in range(2)]
    got = document_statistics(doc, max_windows=2)
    assert list(got) == list(DOC_STATS)
    for name in DOC_STATS:
        assert got[name].shape == (doc.num_layers, doc.num_heads)
        np.testing.assert_allclose(got[name], (per[0][name] + per[1][name]) / 2)


def test_extract_per_head_dict_records_and_shapes():
    L, H = 2, 3
    g = [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]
    report = {
        "version": 1,
        "per_head": {"separator_focus": g, "bad": [[1, 2]], "nested": {"cls": g}},
        "norms": {"per_head": {"separator_focus": [[9, 9, 9], [9, 9, 9]]}},
        "ranking": {"heads": [{"layer": 1, "head": 2, "score": 0.9, "name": "x"}, {"layer": 0, "head": 0, "score": 0.1}]},
    }
    got = extract_per_head(report, L, H)
    assert set(got) == {"separator focus", "nested/cls", "separator focus (2)", "score"}
    np.testing.assert_array_equal(got["separator focus"], np.asarray(g))
    np.testing.assert_array_equal(got["separator focus (2)"], np.full((2, 3), 9.0))
    score = got["score"]
    assert score[1, 2] == 0.9 and score[0, 0] == 0.1 and np.isnan(score[0, 1])
    # Another model size: the [L][H] arrays no longer fit; records do while their heads exist.
    assert set(extract_per_head(report, 3, 3)) == {"score"}
    assert extract_per_head(report, 2, 2) == {}


def test_study_report_schema_flat_layer_major():
    """report.json of `headseg study` stores per-head lists flat, index layer * H + head."""
    L, H = 2, 3
    flat = [0.0, 1.0, 2.0, 10.0, 11.0, 12.0]
    report = {
        "schema": 1,
        "attention": {"separator_norm": flat, "share_weight": [[1.0, 0.0]] * 6, "token_counts": [1, 2]},
        "variants": {"quantile": {"identical": flat, "count": [5] * 6, "layers": {"mean_distance": [1.0, 2.0]}}},
        "selection": {"score": flat, "selected": [{"layer": 0, "head": 1, "score": 1.0, "weight": 1.0}]},
        "histograms": {"all_pairs": [1] * 6},
        "sampling": {"offsets": [0] * 6},
        "focus": {"top_token": ["a"] * 6},
    }
    got = extract_per_head(report, L, H)
    assert list(got) == ["separator focus (norm)", "repetition", "selection score", "variants/quantile/count"]
    np.testing.assert_array_equal(got["repetition"], [[0, 1, 2], [10, 11, 12]])
    assert got["repetition"][1, 0] == flat[1 * H + 0]


def test_load_report_stats_fixture_and_errors(tmp_path):
    got = load_report_stats(FIXTURES / "report_tiny.json", 3, 4)
    assert list(got) == ["separator focus (norm)", "within-sentence share", "selection score",
                         "variants/quantile/count", "block score"]
    np.testing.assert_allclose(got["separator focus (norm)"] + got["block score"], np.ones((3, 4)))
    np.testing.assert_allclose(got["within-sentence share"], got["block score"])
    with pytest.raises(InputError, match="no such file"):
        load_report_stats(tmp_path / "none.json", 3, 4)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="cannot read"):
        load_report_stats(bad, 3, 4)
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"per_head": {}}), encoding="utf-8")
    with pytest.raises(InputError, match="no per-head statistics for a 3x4 model"):
        load_report_stats(empty, 3, 4)
