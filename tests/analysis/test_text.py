"""Sentences, tokenization with offsets, windows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headseg.analysis import make_windows, split_sentences, tokenize
from headseg.analysis.errors import InputError


def test_split_sentences_examples():
    text = "Dr. Smith arrived. He sat down!  Then: nothing?\nNew line here\r\nAnd the end"
    spans = split_sentences(text)
    parts = [text[a:b] for a, b in spans]
    assert parts == ["Dr. Smith arrived. ", "He sat down!  ", "Then: nothing?\n", "New line here\r\n", "And the end"]


def test_a_line_ends_at_every_break_str_splitlines_knows():
    # text pasted from word processors and PDF tools breaks its lines with the Unicode separators, old
    # Mac files with a lone CR: each ends a line (and so a unit) as LF does; CR LF is one break
    for brk in ("\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"):
        text = f"First line here{brk}Second line here{brk}Third"
        assert text.splitlines() == ["First line here", "Second line here", "Third"]
        assert [text[a:b] for a, b in split_sentences(text)] == [f"First line here{brk}", f"Second line here{brk}",
                                                                 "Third"], repr(brk)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .!?\n\r\t\"')…é😀中\u2028\u2029\x85")), max_size=80))
def test_split_sentences_tiles_any_text(text):
    spans = split_sentences(text)
    assert "".join(text[a:b] for a, b in spans) == text
    assert all(b > a for a, b in spans)
    assert all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))


def test_tokenize_offsets_point_at_the_token(tokenizer):
    text = "Héllo   world, the CAT's 3.5 kg!\nNext line."
    doc = tokenize(text, tokenizer)
    assert len(doc) > 5
    prev_end = 0
    for tid, (a, b) in zip(doc.ids, doc.offsets):
        assert prev_end <= a < b <= len(text)
        piece = tokenizer.convert_ids_to_tokens(int(tid)).removeprefix("##")
        # the uncased vocabulary lowercases and strips accents
        assert tokenizer.backend_tokenizer.normalizer.normalize_str(text[a:b]) == piece
        prev_end = b
    # sentence ids follow the sentence spans
    starts = [s for s, _ in doc.sentences]
    for (a, _), sid in zip(doc.offsets, doc.sentence_ids):
        assert starts[sid] <= a and (sid + 1 == len(starts) or a < starts[sid + 1])
    assert doc.sentence_ids[-1] == 1  # "...kg!\n" and "Next line."


def test_windows_cover_the_document_with_stride(tokenizer):
    text = " ".join(f"word{i} is here." for i in range(200))
    doc = tokenize(text, tokenizer)
    wins = make_windows(doc, tokenizer, max_tokens=32, stride=10)
    width = 30
    assert all(len(w) <= 32 for w in wins)
    assert wins[0].doc_start == 0
    assert wins[-1].doc_start + width == len(doc)  # last window aligned to the end
    assert all(b.doc_start - a.doc_start <= 10 for a, b in zip(wins, wins[1:]))
    covered = np.zeros(len(doc), bool)
    for w in wins:
        assert w.tokens[0] == "[CLS]" and w.tokens[-1] == "[SEP]"
        assert w.special.tolist() == [True] + [False] * (len(w) - 2) + [True]
        assert w.sentence_ids[0] == -1 and w.sentence_ids[-1] == -1
        np.testing.assert_array_equal(w.input_ids[1:-1], doc.ids[w.doc_start : w.doc_start + len(w) - 2])
        np.testing.assert_array_equal(w.offsets[1:-1], doc.offsets[w.doc_start : w.doc_start + len(w) - 2])
        assert w.start_char == w.offsets[1, 0] and w.end_char == w.offsets[-2, 1]
        covered[w.doc_start : w.doc_start + len(w) - 2] = True
    assert covered.all()
    # no overlap by default
    plain = make_windows(doc, tokenizer, max_tokens=32)
    assert [w.doc_start for w in plain[:-1]] == list(range(0, 30 * (len(plain) - 1), 30))


def test_windows_bad_parameters(tokenizer):
    doc = tokenize("some text here", tokenizer)
    with pytest.raises(InputError):
        make_windows(doc, tokenizer, max_tokens=2)
    with pytest.raises(InputError):
        make_windows(doc, tokenizer, max_tokens=16, stride=15)
    assert make_windows(tokenize("", tokenizer), tokenizer) == []


# Exact units in scripts without Latin punctuation: each list is the text cut by hand.
SCRIPT_CASES = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "scripts.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("script", sorted(SCRIPT_CASES))
def test_split_sentences_in_other_scripts(script):
    parts = SCRIPT_CASES[script]
    text = "".join(parts)
    spans = split_sentences(text)
    assert [text[a:b] for a, b in spans] == parts
    assert len(spans) == 5


@pytest.mark.parametrize("text, parts", [
    ("We met at 5 p.m. yesterday. It rained.", ["We met at 5 p.m. yesterday. ", "It rained."]),
    ("Wir treffen uns am 3. Mai in Berlin. Dann fahren wir.", ["Wir treffen uns am 3. Mai in Berlin. ", "Dann fahren wir."]),
    ("1. Mix the flour. 2. Add water.", ["1. Mix the flour. ", "2. Add water."]),
    ("See you at 9 a.m. Then we go.", ["See you at 9 a.m. ", "Then we go."]),
    ("Pi is 3.14 here. It is (roughly) 3.14159! Done?! Yes…  No.", ["Pi is 3.14 here. ", "It is (roughly) 3.14159! ",
                                                                   "Done?! ", "Yes…  ", "No."]),
    ('He said "Stop." Then he left.', ['He said "Stop." ', "Then he left."]),
    ("Ask Dr. Who. Mr. X agreed.", ["Ask Dr. Who. ", "Mr. X agreed."]),
])
def test_split_sentences_guards_abbreviations_and_numbers(text, parts):
    spans = split_sentences(text)
    assert [text[a:b] for a, b in spans] == parts


def test_tile_spans_absorbs_whitespace_and_rejects_bad_spans():
    from headseg.analysis.text import tile_spans

    text = "  One. Two.\n Three"
    # spans as pysbd/spaCy give them: the whitespace between sentences left out
    assert tile_spans(text, [(2, 6), (7, 11), (13, 18)]) == [(0, 7), (7, 13), (13, 18)]
    assert tile_spans("   ", []) == [(0, 3)]
    assert tile_spans("", []) == []
    for bad in ([(2, 6), (5, 11)],            # overlap
                [(7, 11), (2, 6)],            # order
                [(2, 6), (13, 18)],           # "Two." uncovered
                [(2, 6), (7, 11)],            # "Three" uncovered
                [],
                [(2, 6), (6, 6)],             # empty
                [(2, 6), (7, 99)],            # outside
                [("a", "b")]):
        with pytest.raises(InputError):
            tile_spans(text, bad)


def test_runs_of_terminal_punctuation_split_in_linear_steps():
    # issue 35 item 7: each start inside a run of terminals rescanned the run ('.' * N was quadratic);
    # counted in regex steps (a match attempt per start), not in time
    import headseg.analysis.text as text_mod

    for run in (".", "?!", "。"):
        spans = text_mod.split_sentences(run * 20000 + " next")
        assert spans[0][0] == 0 and spans[-1][1] == len(run) * 20000 + 5
        attempts = sum(1 for _ in text_mod._SENT_END.finditer(run * 2000, overlapped=True))
        assert attempts <= 2000 // len(run) + 2  # at most one match per start, and none inside the run
    assert text_mod.split_sentences("Hi!!! There. Wait...what? Yes.") == [(0, 6), (6, 13), (13, 26), (26, 30)]
