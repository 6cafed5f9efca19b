"""Issue 49, item 18: overlapped chunks as chunks with their text, in the records (``overlap_chars``), the
text format and the library, rebuilt exactly from the records; the code block's chunks begin at line starts."""

from __future__ import annotations

import json

import pytest

from headseg.analysis.errors import HeadsegError
from headseg.analysis.segments import RECORD_FIELDS, Segment, Segmentation
from headseg.analysis.text import tokenize
from headseg.formats import FORMATS, document_records
from headseg.segmenter.document import TokenCount

TEXT = "Aa. Bb. Cc. Dd. Ee."  # segments "Aa. Bb. " | "Cc. Dd. " | "Ee."; chunks repeat one sentence


def _by_hand() -> Segmentation:
    seg = Segmentation.from_boundaries(TEXT, [8, 16], [0.5, 0.25])
    seg.chunks = [Segment(0, 8, TEXT[0:8], 0.0, 4), Segment(4, 16, TEXT[4:16], 0.5, 6),
                  Segment(12, 19, TEXT[12:19], 0.25, 5)]
    return seg


def test_records_are_the_chunks_with_what_they_repeat():
    rows = _by_hand().to_records("d")
    assert [tuple(r) for r in rows] == [RECORD_FIELDS] * 3 and RECORD_FIELDS[-1] == "overlap_chars"
    assert [(r["index"], r["start"], r["end"], r["text"], r["overlap_chars"], r["token_count"]) for r in rows] == [
        (0, 0, 8, "Aa. Bb. ", 0, 4), (1, 4, 16, "Bb. Cc. Dd. ", 4, 6), (2, 12, 19, "Dd. Ee.", 4, 5)]
    # the segment is the chunk's text from overlap_chars on
    assert [r["text"][r["overlap_chars"]:] for r in rows] == [s.text for s in _by_hand()]
    # without overlapped chunks the field is there and None
    plain = Segmentation.from_boundaries(TEXT, [8, 16], [0.5, 0.25]).to_records()
    assert [r["overlap_chars"] for r in plain] == [None] * 3 and [r["start"] for r in plain] == [0, 8, 16]


def test_records_and_the_json_record_rebuild_segments_and_chunks():
    seg = _by_hand()
    for back in (Segmentation.from_records(seg.to_records("d")), Segmentation.from_dict(seg.to_dict("d"))):
        assert back.text == TEXT
        assert [(s.start, s.end) for s in back] == [(0, 8), (8, 16), (16, 19)]
        assert [(c.start, c.end, c.token_count) for c in back.chunks] == [(0, 8, 4), (4, 16, 6), (12, 19, 5)]
        assert back.to_records("d") == seg.to_records("d")  # the records round-trip exactly
        assert [s.token_count for s in back] == [None] * 3  # a chunk's record counts the chunk, not its segment


def test_the_text_and_jsonl_formats_write_the_chunks():
    seg = _by_hand()
    enc = FORMATS.get("text").encoder(True)
    out = enc.documents([("d", seg)])
    assert "----- segment 2/3  chars 4-16  score 0.500  overlap 4 chars -----\nBb. Cc. Dd. \n" in out
    lines = FORMATS.get("jsonl").encoder(False).documents([("d", seg)])
    assert [json.loads(x) for x in lines.splitlines()] == document_records([("d", seg)])
    head = lines.encode()
    assert FORMATS.get("jsonl").recognise("x", head)
    # an output of the layout before overlap_chars is still recognised as headseg's
    old = json.dumps({k: v for k, v in seg.to_records("d")[0].items() if k != "overlap_chars"}).encode()
    assert FORMATS.get("jsonl").recognise("x", old)


@pytest.mark.parametrize("chunks, why", [
    ([Segment(0, 8, TEXT[0:8]), Segment(4, 16, TEXT[4:16])], "2 overlapped chunks for 3 segments"),
    ([Segment(0, 8, TEXT[0:8]), Segment(4, 16, TEXT[4:16]), Segment(4, 19, TEXT[4:19])], "chunk 2"),
    ([Segment(0, 8, TEXT[0:8]), Segment(4, 15, TEXT[4:15]), Segment(12, 19, TEXT[12:19])], "chunk 1"),
])
def test_chunks_that_do_not_hold_their_segment_are_refused(chunks, why):
    with pytest.raises(HeadsegError, match=why):
        Segmentation(TEXT, Segmentation.from_boundaries(TEXT, [8, 16]).segments, chunks=chunks)


def test_mixed_records_are_refused():
    rows = _by_hand().to_records("d")
    rows[1]["overlap_chars"] = None
    with pytest.raises(HeadsegError):
        Segmentation.from_records(rows)


@pytest.fixture(scope="module")
def seg(tiny_bert):
    from headseg import Segmenter

    return Segmenter(model=tiny_bert, backend="torch", window_tokens=64)


LONG = "\n\n".join(" ".join([t] * 3) for t in [
    "The committee met on Monday. It approved the budget after a long debate.",
    "Rain fell all night. The river rose quickly over its banks.",
    "The orchestra tuned its instruments. The violins began a slow melody.",
] * 3)


def test_the_library_gives_chunks_with_their_token_counts(seg):
    r = seg.segment(LONG, overlap=1, max_tokens=64, target_tokens=24)
    assert len(r.chunks) == len(r) > 2 and r.meta["chunks"] == [[c.start, c.end] for c in r.chunks]
    count = TokenCount(LONG, tokenize(LONG, seg.encoder.tokenizer), None)
    for c, s in zip(r.chunks, r):
        assert c.text == LONG[c.start:c.end] and c.end == s.end and c.token_count == count.span(c.start, c.end)
        assert c.token_count <= 64 and c.headings == s.headings and c.score == s.score
    assert any(c.start < s.start for c, s in zip(r.chunks, r))
    assert Segmentation.from_records(r.to_records()).text == LONG
    # without overlap: no chunks, the records as before
    assert not seg.segment(LONG, max_tokens=64, target_tokens=24).chunks


def test_an_overlapped_chunk_of_code_begins_at_a_line_start(seg):
    code = "Intro.\n\n```\n" + "".join(f"    value_{i} = compute_something({i}, {i + 1})\n" for i in range(12)) + "```\n"
    # an explicit size target (small chunks, room for the overlap under the limit)
    r = seg.segment(code, overlap=2, max_tokens=40, target_tokens=20, structure="markdown")
    inner = [c for c, s in zip(r.chunks, r) if c.start < s.start]
    assert inner
    for c in r.chunks + r.segments:
        assert c.start == 0 or code[c.start - 1] == "\n", code[c.start - 8:c.start + 8]
