"""A unit whose token ids an earlier unit has is encoded once (``encode.distinct_units``): its vector is
the same function of the same ids.  Checked against encoding every unit, and in the backend's calls:
``'*' * N`` (cut every ``GROUP_TOKENS``, 64 tokens) costs the same model windows at any length (issue 49, item 9)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.hostile_cost import make
from headseg.analysis.text import tokenize
from headseg.api import Segmenter
from headseg.segmenter import encode as encode_mod
from headseg.segmenter.encode import distinct_units, encode_units, unit_windows

LINES = ["Yeah.\n", "Okay.\n", "The bees left the hive at dawn and flew to the clover field.\n", "Yeah.\n",
         "Okay, so the budget for the remote control is twelve euros fifty.\n", "Yeah.\n", "Okay.\n"]


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch", batch_size=3)


def _spans(text: str) -> list[tuple[int, int]]:
    out, a = [], 0
    for line in text.splitlines(keepends=True):
        out.append((a, a + len(line)))
        a += len(line)
    return out


def _encode(seg, items):
    return encode_units(items, seg.loaded.tokenizer, seg.backend, seg.topic_heads, seg.topic_weights,
                        seg.batch_size, seg.window_tokens, output_weight=seg.profile.topic_output_weight)


class Windows:
    """The windows the backend is given (after repeated units are left out)."""

    def __init__(self, seg, monkeypatch):
        self.count = 0
        backend = seg.backend
        call = type(backend).unit_vectors

        def counted(b, windows, *a, **k):
            self.count += len(windows)
            return call(b, windows, *a, **k)

        monkeypatch.setattr(type(backend), "unit_vectors", counted)


def test_repeated_units_get_the_first_ones_vector_and_the_model_sees_each_once(seg, monkeypatch):
    one = "".join(LINES)
    two = "Okay.\nThe bees left the hive at dawn and flew to the clover field.\nSomething else.\n"
    items = [(tokenize(t, seg.loaded.tokenizer), _spans(t)) for t in (one, two)]
    c = Windows(seg, monkeypatch)
    got = _encode(seg, items)
    distinct = {line for t in (one, two) for line in t.splitlines(keepends=True)}
    # a unit's ids are its text's, so the model saw one window per distinct line
    assert c.count == len(distinct) == 5
    # every vector equals the one encoded without leaving anything out (the batch may differ: float noise)
    monkeypatch.setattr(encode_mod, "distinct_units", lambda w, o, n: (list(w), o, np.arange(n)))
    every = _encode(seg, items)
    for g, e in zip(got, every):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-5)
    # repeats are the first occurrence's row exactly, across documents too
    lines = [line for t in (one, two) for line in t.splitlines(keepends=True)]
    rows = np.vstack(got)
    for i, line in enumerate(lines):
        j = lines.index(line)
        assert np.array_equal(rows[i], rows[j])
        if j == i and line != "Okay.\n":
            assert not np.allclose(rows[i], rows[lines.index("Okay.\n")])


def test_distinct_units_keys_on_every_window_of_a_unit(seg):
    """Two long units that share their first window but not their second are both encoded."""
    tok = seg.loaded.tokenizer
    text = "alpha beta gamma " * 20 + "delta.\n" + "alpha beta gamma " * 20 + "omega.\n"
    doc = tokenize(text, tok)
    units = _spans(text)
    windows, owner = unit_windows(doc, units, tok, 16)
    assert len(windows) > 2 * len(units)  # several windows a unit
    kept, kept_owner, first = distinct_units(windows, owner, len(units))
    assert first.tolist() == [0, 1] and len(kept) == len(windows)
    twice = text[:units[0][1]] * 2
    windows, owner = unit_windows(tokenize(twice, tok), _spans(twice), tok, 16)
    kept, kept_owner, first = distinct_units(windows, owner, 2)
    assert first.tolist() == [0, 0] and len(kept) == len(windows) // 2 and set(kept_owner.tolist()) == {0}


@pytest.mark.parametrize("kind", ["stars", "dots", "brackets"])
def test_a_run_of_one_symbol_costs_the_same_model_windows_at_any_length(seg, monkeypatch, kind):
    counts = []
    for n in (2_000, 8_000):
        c = Windows(seg, monkeypatch)
        text = make(kind, n)
        assert "".join(s.text for s in seg.segment(text)) == text
        counts.append(c.count)
    # the 64-token pieces are the same ids: a handful of distinct ones (the run's ends), whatever its length
    assert counts[1] <= counts[0] + 2 and counts[1] <= 8, counts


@pytest.mark.parametrize("kind", ["stars", "dots", "tiny", "headings"])
def test_units_of_a_hostile_run_hold_about_64_tokens(seg, kind):
    """Each unit is a row of every search array (about 9 KB of vectors in each copy), so the runs are read
    in units of up to ``GROUP_TOKENS`` (64): at 32, 1 MB of '.' peaked at 1.5 GB."""
    from headseg.segmenter.runs import GROUP_TOKENS

    text = make(kind, 8_000)
    doc = seg.document(text)
    tokens = len(seg.tokenize(text))
    assert GROUP_TOKENS == 64
    assert tokens / len(doc.units) >= 0.75 * GROUP_TOKENS, (tokens, len(doc.units))
