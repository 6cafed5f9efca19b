"""A text prepared once: the Document's features are the text's, checked on construction, and every level reads them."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from headseg.analysis.errors import HeadsegError
from headseg.analysis.segments import Segmentation
from headseg.analysis.text import tokenize
from headseg.api import Segmenter
from headseg.segmenter import lines
from headseg.segmenter.document import Document, TokenCount, after_sentence_end, at_line_start
from headseg.segmenter.structure import line_starts, read_markdown

TEXT = ("Introduction\nThe committee met on Monday. It approved the budget.\n\n"
        "Rain fell all night. The river rose.\nFarmers moved their cattle. The market opened late.\n\n"
        "2. Results\nSales rose. Prices fell. Everyone was pleased with the outcome of the long year.\n")


def spans(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    """Units tiling ``text``: each piece and the whitespace after it."""
    out, pos = [], 0
    for p in pieces:
        a = text.index(p, pos)
        out.append(a)
        pos = a + len(p)
    out[0] = 0
    return list(zip(out, out[1:] + [len(text)]))


PIECES = ["Introduction", "The committee met on Monday.", "It approved the budget.", "Rain fell all night.",
          "The river rose.", "Farmers moved their cattle.", "The market opened late.", "2. Results", "Sales rose.",
          "Prices fell.", "Everyone was pleased with the outcome of the long year."]


@pytest.fixture(scope="module")
def doc(tokenizer):
    return Document.build(TEXT, tokenize(TEXT, tokenizer), spans(TEXT, PIECES))


def test_features_are_the_texts_recomputed_independently(doc, tokenizer):
    units = spans(TEXT, PIECES)
    tokens = tokenize(TEXT, tokenizer)
    # a token belongs to the unit its first character falls in
    starts = tokens.offsets[:, 0]
    want = [int(((starts >= a) & (starts < b)).sum()) for a, b in units]
    assert doc.unit_tokens.tolist() == want and doc.token_ranges[:, 1].tolist() == np.cumsum(want).tolist()
    # same line: no line break between two unit starts
    assert doc.same_line.tolist() == [i > 0 and "\n" not in TEXT[units[i - 1][0]:a] for i, (a, _) in enumerate(units)]
    assert doc.paragraph_starts.tolist() == [i > 0 and "\n\n" in TEXT[units[i - 1][0]:a]
                                             for i, (a, _) in enumerate(units)]
    assert doc.prose is False  # 11 units on 6 lines: under two a line
    assert doc.starts.tolist() == [a for a, _ in units]
    assert doc.at_line.tolist() == [a == 0 or TEXT[a - 1] == "\n" for a, _ in units]
    assert doc.after_end.tolist() == [after_sentence_end(TEXT, a) for a, _ in units]
    assert doc.lines == tuple(line_starts(TEXT))
    assert all(at_line_start(TEXT, a) == v for (a, _), v in zip(units, doc.at_line))
    # the headings: the two labels alone on their lines, at any limit that holds their tokens
    heads = [TEXT[a:b].strip() for (a, b), h in zip(units, doc.headings(8)) if h]
    assert heads == ["Introduction", "2. Results"]
    for limit in (0, 1, 3, 8, 24, 40, 2, 30):  # a shorter limit after a longer one: derived from it
        assert doc.headings(limit).tolist() == lines.heading_units(TEXT, units, doc.unit_tokens, limit).tolist()


def test_the_features_cannot_be_changed(doc):
    for name in ("unit_tokens", "same_line", "paragraph_starts", "starts", "token_ranges", "at_line", "after_end"):
        with pytest.raises(ValueError):
            getattr(doc, name)[0] = 1
    with pytest.raises(AttributeError):
        doc.units = ()


def test_construction_refuses_what_is_not_one_text(doc, tokenizer):
    tokens = tokenize(TEXT, tokenizer)
    with pytest.raises(HeadsegError, match="tile"):
        Document.build(TEXT, tokens, [(0, 10), (11, len(TEXT))])  # a gap
    with pytest.raises(HeadsegError, match="end at"):
        Document.build(TEXT, tokens, [(0, 10), (10, len(TEXT) - 1)])
    with pytest.raises(HeadsegError, match="tokens"):
        Document.build(TEXT + " ", tokens, [(0, len(TEXT) + 1)])
    with pytest.raises(HeadsegError, match="one same_line value per unit"):
        Document(**{**{f.name: getattr(doc, f.name) for f in fields(Document) if f.init}, "same_line": doc.same_line[:-1]})
    with pytest.raises(HeadsegError, match="structure"):
        Document.build(TEXT, tokens, spans(TEXT, PIECES), structure=read_markdown("# other\n"))


def test_a_counter_counts_spans_once(tokenizer):
    calls = []

    def counter(s: str) -> int:
        calls.append(s)
        return len(s.split())

    count = TokenCount(TEXT, tokenize(TEXT, tokenizer), counter)
    assert count.span(0, 40) == len(TEXT[:40].split()) and count.span(0, 40) == count.span(0, 40)
    assert calls == [TEXT[:40]] and not count.exact


def test_finish_annotates_without_checking_again(doc, monkeypatch):
    starts = [doc.units[3][0], doc.units[7][0]]
    flat = Segmentation.from_boundaries(TEXT, starts, [0.5, 0.7])
    checked = []
    real = Segmentation.__post_init__
    monkeypatch.setattr(Segmentation, "__post_init__", lambda self: (checked.append(1), real(self)))
    done = doc.finish(flat)
    assert checked == []  # the spans are the checked ones: not checked again
    assert [s.token_count for s in done] == [doc.span_tokens(s.start, s.end) for s in flat]
    assert [(s.start, s.end, s.text, s.score) for s in done] == [(s.start, s.end, s.text, s.score) for s in flat]
    assert all(s.token_count is None for s in flat)  # the original is left as it was


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch", window_tokens=64)


def test_every_level_reads_the_one_document(seg, monkeypatch):
    """A tree of several levels derives the text features once: the document's, built once per text."""
    built, scanned = [], []
    real_build, real_same = Document.build.__func__, lines.starts_same_line

    def build(cls, *args, **kwargs):
        built.append(1)
        return real_build(cls, *args, **kwargs)

    import importlib

    monkeypatch.setattr(Document, "build", classmethod(build))
    # wherever the segmenter could read the text's lines again, the reading is counted
    for name in ("document", "topics", "tree", "levels", "blocks", "limits", "pipeline"):
        mod = importlib.import_module(f"headseg.segmenter.{name}")
        if hasattr(mod, "starts_same_line"):
            monkeypatch.setattr(mod, "starts_same_line", lambda *a: (scanned.append(1), real_same(*a))[1])
    text = TEXT * 6
    r = seg.segment(text, level="tree", depth=3, max_tokens=40)
    assert len(r.nodes) > len(r.segments)  # more than one level searched
    assert len(built) == 1 and len(scanned) == 1
    assert "".join(s.text for s in r) == text and all(s.token_count <= 40 for s in r)
    d = seg.document(text, {"max_tokens": 40})
    assert r.meta["units"] == len(d) and all(d.span_tokens(a, b) <= 40 for a, b in d.units)


def test_tokens_handed_over_are_read_as_they_are(seg, monkeypatch):
    """Issue 47: a caller that tokenized a text (the service, to count it) hands the tokens over; the
    pipeline reads them instead of tokenizing again, and the result is the text's own."""
    from headseg.analysis.text import TokenizedText

    text = TEXT * 3
    options = {"level": "tree", "depth": 2, "max_tokens": 40}
    want = [r.to_dict() for r in seg.segment_many([text, "Short. Text."], options)]
    tokens = seg.tokenize(text)
    assert isinstance(tokens, TokenizedText) and tokens.text == text
    encoded = []
    real = seg.encoder.tokenizer.encode
    monkeypatch.setattr(seg.encoder.tokenizer, "encode", lambda t: encoded.append(t) or real(t))
    got = [r.to_dict() for r in seg.segment_many([tokens, "Short. Text."], options)]
    assert got == want
    assert encoded == ["Short. Text."]  # the plain text alone was tokenized
    d = seg.document(tokens, {"max_tokens": 40})
    assert d.tokens is tokens and d.units == seg.document(text, {"max_tokens": 40}).units
