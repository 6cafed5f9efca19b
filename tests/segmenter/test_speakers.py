"""Transcripts: speaker labels are left out of the unit vectors, the offsets stay as they are."""

import numpy as np
import pytest

from headseg.analysis.text import tokenize
from headseg.api import Segmenter
from headseg.segmenter.encode import encode_units
from headseg.segmenter.speakers import content_spans, line_labels

MEETING = ("B: Okay , well , I think we're ready to begin .\n"
           "B: The remote control needs a new case .\n"
           "C: Mm-hmm .\n"
           "A: The case could be made of rubber , it is cheap .\n"
           "C: And the buttons ?\n"
           "B: Rubber buttons are fine .\n"
           "Project Manager D: Then the budget . We have twelve euros per unit .\n"
           "A: That is tight .\n")


def test_a_transcript_is_recognised_and_its_labels_found():
    labels = line_labels(MEETING)
    lines = [i for i in range(len(MEETING)) if i == 0 or MEETING[i - 1] == "\n"]
    assert [s for s, _ in labels] == lines
    # each label ends where the words begin, exactly
    for s, e in labels:
        assert MEETING[s:e].endswith(": ") and MEETING[e] != " "
    assert dict(labels)[MEETING.index("Project")] == MEETING.index("Then")


@pytest.mark.parametrize("brk", ["\r\n", "\r", "\u2028"])
def test_a_transcript_with_other_line_breaks_has_the_same_labels(brk):
    # a file saved on Windows or old Macs, or pasted with Unicode line separators, is the same transcript
    text = MEETING.replace("\n", brk)
    shift = len(brk) - 1
    lines = [i for i in range(len(MEETING)) if i == 0 or MEETING[i - 1] == "\n"]
    expected = [(s + shift * k, e + shift * k) for k, (s, e) in enumerate(line_labels(MEETING))]
    assert [s for s, _ in expected] == [i + shift * k for k, i in enumerate(lines)]
    assert line_labels(text) == expected


@pytest.mark.parametrize("text", [
    "Note: this is prose.\nIt goes on for a while.\nAnd on.\nAnd on again.\n",  # one label, few lines
    "A: one\nA: two\nA: three\nA: four\n",  # one speaker
    "A: x\nB: y\nC: z\nD: w\n",  # labels that never repeat
    "Plain prose without any labels.\nTwo lines of it.\n",
])
def test_other_text_is_left_alone(text):
    assert line_labels(text) == []
    units = [(0, 5), (5, len(text))]
    assert content_spans(text, units) == units


def test_content_spans_skip_the_label_of_units_that_start_a_line():
    units = [(0, 24), (24, 48), (48, len(MEETING))]
    spans = content_spans(MEETING, units)
    assert spans[0] == (3, 24)  # "B: " skipped
    assert spans[1] == (24, 48)  # not at a labelled line start
    assert spans[2][1] == len(MEETING)


@pytest.fixture(scope="module")
def seg(embedded):
    return Segmenter(model=embedded, backend="torch")


def test_unit_vectors_of_a_transcript_are_pooled_after_the_labels(seg):
    doc = tokenize(MEETING, seg.loaded.tokenizer)
    units = seg.units(MEETING, doc=doc)
    got = seg.unit_vectors(doc, units)

    def encode(spans):
        return encode_units([(doc, spans)], seg.loaded.tokenizer, seg.backend, seg.topic_heads,
                            seg.topic_weights, seg.batch_size, seg.window_tokens,
                            output_weight=seg.profile.topic_output_weight)[0]

    np.testing.assert_allclose(got, encode(content_spans(MEETING, units)), rtol=0, atol=1e-9)
    assert not np.allclose(got, encode(units), atol=1e-3)


def test_segments_of_a_transcript_keep_their_offsets(seg):
    text = MEETING * 3
    result = seg.segment(text)
    assert "".join(s.text for s in result) == text
    starts = {a for a, _ in seg.units(text)}
    assert all(s.start in starts for s in result)
