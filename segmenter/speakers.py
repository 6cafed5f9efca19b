"""Transcripts: speaker labels at line starts are not what a unit says.

A meeting transcript labels every turn with its speaker ("B: Okay , well",
"Professor E: So ."); the label's tokens are a large share of a short turn and
say who speaks, not what about, so a unit vector pooled over them drifts with
the speaker instead of the topic (measured on the meeting dev sets:
docs/segmenter.md, *Meetings*).  When a text reads as a transcript, each unit
that starts a labelled line is pooled over its text after the label; its
span, and so every segment's offsets, stay as they are.

A text reads as a transcript when at least half of its lines start with a
label (a capitalised name of at most four words and 40 characters, then a
colon and a space), at least two different labels occur, and labels repeat
(at most one distinct label per two labelled lines), so prose with a few
"Note: ..." lines is left alone.  O(U) in the number of units.
"""

from __future__ import annotations

import re
from typing import Sequence

from headseg.analysis.text import ANY_LINE_BREAK

#: a speaker label at a line start: "B: ", "Professor E: ", "Dr. Smith: "
SPEAKER_LABEL = re.compile(r"[ \t]*([A-Z][\w.'\-]*(?: [\w.'\-]+){0,3})[ \t]*:[ \t]+")
#: the share of lines that must carry a label for a text to read as a transcript
MIN_LABELLED = 0.5
#: labelled lines per distinct label, at least
MIN_REPEAT = 2


def line_labels(text: str) -> list[tuple[int, int]]:
    """``(line start, label end)`` of each labelled line of ``text`` (label end: where its words begin),
    or an empty list when the text does not read as a transcript."""
    labelled, names, lines = [], set(), 0
    start = 0
    while start <= len(text):
        m = ANY_LINE_BREAK.search(text, start)
        end = len(text) if m is None else m.start()
        if text[start:end].strip():
            lines += 1
            m = SPEAKER_LABEL.match(text, start, end)
            if m and len(m.group(1)) <= 40 and m.end() < end:
                labelled.append((start, m.end()))
                names.add(m.group(1))
        start = end + 1
    if not lines or len(labelled) < MIN_LABELLED * lines or len(names) < 2 \
            or len(names) * MIN_REPEAT > len(labelled):
        return []
    return labelled


def content_spans(text: str, units: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans the unit vectors are pooled over: ``units`` as they are, except that in a transcript
    (:func:`line_labels`) a unit starting at a labelled line's start begins after the label."""
    labels = dict(line_labels(text))
    if not labels:
        return list(units)
    out = []
    for a, b in units:
        skip = labels.get(a)
        out.append((skip, b) if skip is not None and skip < b else (a, b))
    return out
