"""The batched unit detector gives exactly the one-window-at-a-time decoder's units (issue 15)."""

from __future__ import annotations

import numpy as np
import pytest

from headseg.analysis.norms import is_punctuation
from headseg.analysis.text import make_window, tokenize, window_width
from headseg.segmenter import units as units_mod
from headseg.api import Segmenter
from headseg.segmenter.encode import UnitEncoder
from headseg.segmenter.units import UnitParams, _allowed_gaps, block_contrast, detect_lines


def sequential_detect(text, doc, tok_lo, tok_hi, segmenter, params):
    """One model call per window, left to right from the range's start (reference).

    With commit="first" this is the detector as it was before batching."""
    tokenizer = segmenter.tokenizer
    width = window_width(tokenizer, params.window)
    starts = []
    pos = tok_lo
    while tok_hi - pos > params.min_tokens:
        end = min(pos + width, tok_hi)
        win = make_window(doc, pos, end, tokenizer, sentence_id=0, with_tokens=False)
        z = segmenter.capture([win]).z[0][:, ~win.special].astype(np.float64)
        score = block_contrast(z, segmenter.detect_weights, params.block)
        offs = doc.offsets[pos:end]
        ok = _allowed_gaps(text, offs)
        t = end - pos
        valid = ok.copy()
        valid[: params.min_tokens] = False
        if end < tok_hi:
            valid[max(t - params.block, 0):] = False
        else:
            valid[max(t - params.min_tokens + 1, 0):] = False
        gaps = score[1:]
        mu, sd = gaps.mean(), gaps.std() + 1e-12
        z_score = (score - mu) / sd
        chosen = []
        toks = [text[a:b] for a, b in offs]
        last_ok = t if end >= tok_hi else t - params.margin
        for i in range(1, t):
            lo, hi = max(i - params.radius, 1), min(i + params.radius + 1, t)
            if not (z_score[i] >= params.threshold and score[i] >= score[lo:hi].max()):
                continue
            j = i
            while j < t and is_punctuation(toks[j]):
                j += 1
            if not (j < t and valid[j]):
                continue
            if not chosen:
                chosen.append(int(j))
                if params.commit == "first":
                    break
            elif j < last_ok and j - chosen[-1] >= params.min_tokens:
                chosen.append(int(j))
        if not chosen:
            if end >= tok_hi:
                break
            cand = np.flatnonzero(valid)
            late = cand[cand >= t // 2]  # no clear peak: the strongest gap of the window's second half
            cand = late if late.size else cand
            chosen = [int(cand[np.argmax(score[cand])]) if cand.size else t - 1]
        starts.extend(pos + c for c in chosen)
        pos += chosen[-1]
    return starts


WORDS = ("the river rose quickly and farmers moved their cattle to higher ground while rain fell "
         "all night on the hills the council met on monday to discuss the budget and new bus routes "
         "a storm is expected next week according to the weather service").split()


def _unpunctuated(n_words, seed):
    rng = np.random.default_rng(seed)
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), n_words))


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch", batch_size=7)


def _case(seg):
    text = _unpunctuated(180, 0) + "\n" + _unpunctuated(7, 1) + "\n" + _unpunctuated(90, 2)
    doc = tokenize(text, seg.loaded.tokenizer)
    tok_start = doc.offsets[:, 0]
    lines = [(0, text.index("\n")), (text.index("\n") + 1, text.rindex("\n")), (text.rindex("\n") + 1, len(text))]
    ranges = [(int(np.searchsorted(tok_start, a)), int(np.searchsorted(tok_start, b))) for a, b in lines]
    return text, doc, ranges


@pytest.mark.parametrize("chunk", [16, 40, 256])
def test_batched_first_commit_equals_sequential(seg, monkeypatch, chunk):
    # small chunks force many decoders that must meet the reference chain exactly
    monkeypatch.setattr(units_mod, "CHUNK_TOKENS", chunk)
    text, doc, ranges = _case(seg)
    params = UnitParams(commit="first")
    got = detect_lines(text, doc, ranges, seg.encoder, params)
    want = [sequential_detect(text, doc, lo, hi, seg.encoder, params) for lo, hi in ranges]
    assert got == want
    assert len(want[0]) > 5 and want[1] == []


def test_batched_all_commit_equals_sequential_from_the_start(seg, monkeypatch):
    # one decoder per range (chunk longer than any range): the multi-commit decoder from the range start
    monkeypatch.setattr(units_mod, "CHUNK_TOKENS", 10_000)
    text, doc, ranges = _case(seg)
    params = UnitParams(commit="all")
    got = detect_lines(text, doc, ranges, seg.encoder, params)
    assert got == [sequential_detect(text, doc, lo, hi, seg.encoder, params) for lo, hi in ranges]
    first = detect_lines(text, doc, ranges, seg.encoder, UnitParams(commit="first"))
    # every unit keeps the minimum length
    for starts, (lo, hi) in zip(got, ranges):
        edges = [lo] + starts + [hi]
        assert all(b - a >= params.min_tokens for a, b in zip(edges[:-1], edges[1:]))
    assert sum(map(len, got)) > 0 and sum(map(len, first)) > 0


def _units_counting_windows(seg, monkeypatch, text):
    """``seg.units(text)`` (checked to tile ``text``) and the size of every model call it made."""
    calls = []
    real = UnitEncoder.capture

    def counting(self, windows, heads=None, hidden=False):
        calls.append(len(windows))
        return real(self, windows, heads, hidden)

    monkeypatch.setattr(UnitEncoder, "capture", counting)
    spans = seg.units(text, mode="auto")
    monkeypatch.setattr(UnitEncoder, "capture", real)
    assert "".join(text[a:b] for a, b in spans) == text
    assert spans[0][0] == 0 and all(b == c for (_, b), (c, _) in zip(spans, spans[1:]))
    return calls, spans


def test_units_tile_and_batches_across_stretches(seg, monkeypatch):
    text = ". ".join(_unpunctuated(150, s) for s in range(4))
    calls, spans = _units_counting_windows(seg, monkeypatch, text)
    # several windows share each model call (the sequential decoder made one call per unit)
    assert max(calls) > 1 and len(calls) < len(spans)


@pytest.mark.slow
def test_item14_repeated_word_costs_linear_work(embedded, monkeypatch):
    # Issue 23 item 14: on one word repeated, the decoders' chains never meet exactly; each ran to
    # the end of the text (windows grew with the square of the length: 986 windows for 4000 words)
    # and every window without a clear peak cut a min_tokens unit.  Now a decoder joins the next
    # one's chain JOIN_TOKENS past its start, and such a window cuts in its second half.
    seg = Segmenter(model=embedded, backend="torch")
    small = sum(_units_counting_windows(seg, monkeypatch, "word " * 1000)[0])
    calls, spans = _units_counting_windows(seg, monkeypatch, "word " * 4000)
    large = sum(calls)
    assert large <= 4.6 * small
    assert large <= 4000 / 16  # at most one 64-token window per 16 tokens (it was one per 4)
    assert np.median([b - a for a, b in spans]) >= 5 * 32  # units of half a window or more ("word " = 1 token)
    # and no topics in it: one segment, unless a hard limit cuts it
    assert len(seg.segment("word " * 1000)) == 1
    limited = seg.segment("word " * 1000, max_tokens=128)
    assert all(s.token_count <= 128 for s in limited) and len(limited) >= 1000 // 128


def test_forced_join_keeps_units_within_the_limits(seg, monkeypatch):
    monkeypatch.setattr(units_mod, "CHUNK_TOKENS", 40)
    monkeypatch.setattr(units_mod, "JOIN_TOKENS", 8)
    text = "word " * 900 + "\n" + _unpunctuated(300, 3)
    doc = tokenize(text, seg.loaded.tokenizer)
    tok_start = doc.offsets[:, 0]
    cut = text.index("\n")
    ranges = [(0, int(np.searchsorted(tok_start, cut))), (int(np.searchsorted(tok_start, cut + 1)), len(doc))]
    params = UnitParams()
    got = detect_lines(text, doc, ranges, seg.encoder, params)
    for starts, (lo, hi) in zip(got, ranges):
        edges = [lo] + starts + [hi]
        assert edges == sorted(edges)
        assert all(b - a >= params.min_tokens for a, b in zip(edges[:-1], edges[1:-1]))
        # a unit is at most a window, plus the join's min_tokens
        assert max(b - a for a, b in zip(edges[:-1], edges[1:])) <= params.window + params.min_tokens


def test_unit_calls_carry_their_units_and_owners(tokenizer):
    """Issue 47: each call says which units it pools and which of them owns each window (the encoder
    used to work that out again with np.unique); every unit whole in one call, each window once."""
    from headseg.segmenter.encode import unit_calls, unit_windows

    text = ("Short one. " + "A much longer unit that runs on and on without a stop " * 12 + ". Tiny. "
            + "Another long stretch of words follows here " * 9)
    doc = tokenize(text, tokenizer)
    n = len(text)
    units = [(0, 11), (11, n // 2), (n // 2, n // 2 + 40), (n // 2 + 40, n)]
    windows, owner = unit_windows(doc, units, tokenizer, 32)
    assert np.bincount(owner).max() > 1  # some unit has several windows
    calls = unit_calls(windows, owner, batch_size=3)
    assert sorted(np.concatenate([c.windows for c in calls]).tolist()) == list(range(len(windows)))
    seen = []
    for c in calls:
        assert c.units[c.owners].tolist() == owner[c.windows].tolist()  # owners index the call's units
        assert sorted(set(c.owners.tolist())) == list(range(len(c.units)))
        assert len(c.windows) <= 3 or len(c.units) == 1  # a unit over the batch is a call of its own
        seen += c.units.tolist()
    assert sorted(seen) == sorted(set(owner.tolist()))  # each unit in exactly one call
    longest = [max(len(windows[i]) for i in np.flatnonzero(owner == u)) for u in seen]
    assert longest == sorted(longest)  # shorter units first: less padding
