"""The TUI data layer against independent calls of the analysis API."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from headseg.analysis import TorchBackend, context_similarity, windows_from_text
from headseg.analysis.errors import InputError
from headseg.analysis.norms import norm_weighted_attention
from headseg.analysis.text import split_sentences
from headseg.tui.data import (
    KINDS,
    DocumentModel,
    ModelSource,
    read_document,
    spans_to_token_ids,
)
from headseg.tui.precomputed import load_precomputed, save_precomputed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tui"
TEXT = (FIXTURES / "sample.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def doc(tiny_bert):
    return DocumentModel.from_text(TEXT, ModelSource(tiny_bert), max_tokens=24)


def test_windows_are_the_analysis_windows(doc, tiny_bert):
    want = windows_from_text(TEXT, tiny_bert.tokenizer, max_tokens=24)
    assert len(doc) == len(want) == doc.total_windows
    for a, b in zip(doc.windows, want):
        np.testing.assert_array_equal(a.input_ids, b.input_ids)
        np.testing.assert_array_equal(a.offsets, b.offsets)


def test_matrices_match_a_batched_capture(doc, tiny_bert):
    # One padded batch of all windows: a different code path from the TUI's one-window calls.
    acts = TorchBackend(tiny_bert).capture(doc.windows, heads=None, attention=True, norms=True)
    L, H = tiny_bert.info.num_layers, tiny_bert.info.num_heads
    for b, w in enumerate(doc.windows):
        t = len(w)
        z = acts.z[b, :, :t].reshape(L, H, t, -1)
        attn = acts.attn[b, :, :t, :t].reshape(L, H, t, t)
        fnorm = acts.fnorm[b, :, :t].reshape(L, H, t)
        for layer, head in [(0, 0), (1, 3), (2, 2)]:
            s = context_similarity(z[layer, head])
            np.testing.assert_allclose(doc.matrix(b, layer, head, "similarity"), s, rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(doc.matrix(b, layer, head, "sentences"), s, rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(doc.matrix(b, layer, head, "attention"), attn[layer, head], atol=1e-6)
            np.testing.assert_allclose(
                doc.matrix(b, layer, head, "norm"),
                norm_weighted_attention(attn[layer, head], fnorm[layer, head]),
                rtol=1e-4,
                atol=1e-7,
            )
            # ‖α f(x)‖ by hand: each column j scaled by ‖f(x_j)‖.
            a = attn[layer, head]
            np.testing.assert_allclose(
                doc.matrix(b, layer, head, "norm")[:, 3], a[:, 3] * fnorm[layer, head, 3], rtol=1e-4
            )


def test_bad_head_and_kind(doc):
    with pytest.raises(InputError):
        doc.matrix(0, 3, 0, "similarity")
    with pytest.raises(Exception, match="unknown matrix kind"):
        doc.matrix(0, 0, 0, "entropy")


def test_cache_is_lru_and_computes_once():
    class Counting:
        name, num_layers, num_heads, fingerprint, tokenizer = "c", 1, 1, "fp", None

        def __init__(self):
            self.calls = []

        def compute(self, w):
            from headseg.tui.data import WindowMatrices

            self.calls.append(w.index)
            t = len(w)
            return WindowMatrices(z=np.ones((1, 1, t, 2)), attn=np.ones((1, 1, t, t)) / t, fnorm=np.ones((1, 1, t)))

    from headseg.analysis.text import Window

    wins = [
        Window(i, np.zeros(3, np.int64), np.zeros((3, 2), np.int64), np.zeros(3, bool), np.zeros(3, np.int64),
               ["a", "b", "c"], 0, 0, 1)
        for i in range(4)
    ]
    src = Counting()
    d = DocumentModel("abc", wins, src, cache_size=2)
    d.matrices(0)
    d.matrices(1)
    d.matrices(0)  # hit: 0 becomes most recent
    d.matrices(2)  # evicts 1
    assert src.calls == [0, 1, 2]
    assert d.is_cached(0) and d.is_cached(2) and not d.is_cached(1)
    d.matrices(1)
    assert src.calls == [0, 1, 2, 1]


def test_precomputed_round_trip(doc, tmp_path):
    path = tmp_path / "doc.npz"
    save_precomputed(path, doc)
    back = load_precomputed(path)
    assert back.text == doc.text and len(back) == len(doc)
    assert (back.num_layers, back.num_heads) == (doc.num_layers, doc.num_heads)
    assert back.source.fingerprint == doc.source.fingerprint
    for i in range(len(doc)):
        assert back.window(i).tokens == doc.window(i).tokens
        assert back.window(i).start_char == doc.window(i).start_char
        for kind in KINDS:
            np.testing.assert_array_equal(back.matrix(i, 2, 1, kind), doc.matrix(i, 2, 1, kind))


def test_committed_fixture_matches_the_tiny_model(tiny_bert):
    """The snapshot fixture is what the tiny model computes on the fixture text (regenerate with make_fixture.py)."""
    back = load_precomputed(FIXTURES / "doc_tiny.npz")
    assert back.source.fingerprint == tiny_bert.info.fingerprint
    live = DocumentModel.from_text(back.text, ModelSource(tiny_bert), max_tokens=32)
    assert len(live) == len(back)
    for i in range(len(back)):
        np.testing.assert_allclose(back.matrix(i, 1, 2, "similarity"), live.matrix(i, 1, 2, "similarity"), rtol=1e-3, atol=1e-6)


def test_load_precomputed_errors(tmp_path):
    with pytest.raises(InputError, match="no such"):
        load_precomputed(tmp_path / "missing.npz")
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros(2))
    with pytest.raises(InputError, match="not a headseg TUI document"):
        load_precomputed(bad)


def test_from_text_limits_windows_with_a_note(tiny_bert):
    d = DocumentModel.from_text(TEXT, ModelSource(tiny_bert), max_tokens=16, max_windows=2)
    full = windows_from_text(TEXT, tiny_bert.tokenizer, max_tokens=16)
    assert len(d) == 2 and d.total_windows == len(full) > 2
    assert d.note == f"showing the first 2 of {len(full)} windows"
    with pytest.raises(InputError):
        DocumentModel.from_text("   \n", ModelSource(tiny_bert))


def test_read_document_cases(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        read_document(empty)
    binary = tmp_path / "x.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 10)
    with pytest.raises(InputError, match="binary"):
        read_document(binary)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café crème".encode("latin-1"))
    with pytest.raises(InputError, match="not valid utf-8"):
        read_document(latin)
    with pytest.raises(InputError, match="no such file"):
        read_document(tmp_path / "nope.txt")
    ok = tmp_path / "ok.txt"
    ok.write_text("Short text.", encoding="utf-8")
    assert read_document(ok) == ("Short text.", "")


def test_read_document_huge_keeps_the_start(tmp_path):
    line = "Ünïcödé line with accents é and more words.\n"
    big = tmp_path / "big.txt"
    big.write_text(line * 200, encoding="utf-8")
    size = big.stat().st_size
    text, note = read_document(big, head_bytes=1000)
    assert note.startswith(f"{size:,}-byte file")
    assert text.endswith("\n") and line * (text.count("\n")) == text
    assert 0 < len(text.encode()) <= 1000
    # No line break in reach: cut must not split a multi-byte character.
    one = tmp_path / "one.txt"
    one.write_text("é" * 2000, encoding="utf-8")
    text, note = read_document(one, head_bytes=1001)
    assert text == "é" * 500 and note


def test_spans_to_token_ids(tiny_bert):
    w = windows_from_text(TEXT, tiny_bert.tokenizer, max_tokens=64)[0]
    spans = split_sentences(TEXT)
    ids = spans_to_token_ids(w, spans)
    # With sentence spans this is exactly the window's sentence ids.
    np.testing.assert_array_equal(ids, w.sentence_ids)
    assert (ids[w.special] == -1).all()
    assert (spans_to_token_ids(w, [])[~w.special] == 0).all()


def _npz_bytes(**arrays) -> bytes:
    import io

    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _fixture_with(**changes) -> bytes:
    with np.load(FIXTURES / "doc_tiny.npz") as f:
        arrays = {k: f[k] for k in f.files}
    arrays.update(changes)
    return _npz_bytes(**arrays)


@pytest.mark.parametrize("content", [
    b"",  # an empty file: numpy's EOFError
    (FIXTURES / "doc_tiny.npz").read_bytes()[:2000],  # cut short: zipfile's BadZipFile
    _npz_bytes(shape=np.array(3)),  # TypeError
    _fixture_with(w0_pos=np.array([0])),  # IndexError
    _fixture_with(w0_attn=np.zeros((3, 4, 31, 31), np.float32)),  # matrices of another window size
    _fixture_with(w0_z=np.zeros((2, 4, 32, 8), np.float32)),  # fewer layers than the shape says
], ids=["empty", "truncated", "scalar-shape", "short-pos", "attn-size", "z-layers"])
def test_a_damaged_precomputed_document_is_one_input_error(tmp_path, content):
    """Each of these was a traceback (or, for the shapes, an IndexError later, in the app's drawing)."""
    path = tmp_path / "doc.npz"
    path.write_bytes(content)
    with pytest.raises(InputError, match="not a headseg TUI document"):
        load_precomputed(path)
    path.write_bytes(_fixture_with())
    assert load_precomputed(path).text == load_precomputed(FIXTURES / "doc_tiny.npz").text
