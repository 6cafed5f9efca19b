"""Short texts of a few unrelated paragraphs come back as one segment a paragraph (issue 33).

The texts here were written for this test and are not in the tuning set
(benchmarks/data/everyday_paragraphs.txt); the structural rules are checked on
their own, by hand-made inputs.
"""

from __future__ import annotations

import numpy as np
import pytest

from headseg.analysis.errors import HeadsegError
from headseg.segmenter.lines import lines_are_paragraphs, paragraph_bonus, paragraph_starts, starts_same_line
from headseg.segmenter.topics import TopicParams, boundary_penalty, local_statistics

TEXTS = [
    [
        "The orchard behind the school has twelve old apple trees. Pupils pick the fruit every autumn and "
        "press it into juice. The juice is sold at the winter fair to pay for new books. Last year they "
        "made almost two hundred bottles.",
        "Our broadband provider will upgrade the local exchange next week. The work starts on Monday night "
        "and lasts until Wednesday. Customers may lose their connection for up to an hour. Speeds should "
        "double once the new equipment is in place.",
        "A pod of dolphins was seen in the bay on Sunday morning. Fishermen said the animals followed their "
        "boats for almost an hour. Marine biologists believe the warm water brought them closer to the shore. "
        "Visitors are asked not to approach them in small boats.",
    ],
    [
        "The violin lessons move to the music room on the first floor. Students should bring their own "
        "instrument and a music stand. Lessons last forty minutes and start on the hour. A piano is "
        "available for accompaniment.",
        "Mix the flour, sugar and butter until the dough feels like sand. Press it into a tin and bake it for "
        "fifteen minutes. Spread the lemon curd over the warm base. Leave the tart to cool before cutting it "
        "into squares.",
        "The motorway bridge will be closed for repairs over the long weekend. Traffic heading north will be "
        "sent along the coast road. Drivers should expect delays of up to forty minutes. The bridge reopens "
        "on Tuesday at six in the morning.",
    ],
    [
        "Our printer keeps jamming when it prints on both sides of the page. The technician cleaned the "
        "rollers and replaced a worn belt. It now prints fifty pages without a single jam. A new toner "
        "cartridge has been ordered as well.",
        "Astronomers have spotted a comet that will be visible without a telescope in March. It should appear "
        "low in the western sky just after sunset. The best views will come from places far from city lights. "
        "The comet will not return for another six thousand years.",
        "The youth football league needs more referees for the spring season. Training is free and takes two "
        "Saturday mornings. Referees are paid for every match they take charge of. Anyone over sixteen can "
        "apply through the league website.",
    ],
]


@pytest.fixture(scope="module")
def segmenter():
    from headseg.api import Segmenter

    return Segmenter(quiet=True)


@pytest.mark.slow
@pytest.mark.parametrize("joint", ["\n\n", "\n", "\r\n\r\n", "\r", "\u2029"],
                         ids=["blank-lines", "line-breaks", "crlf-blank-lines", "cr-line-breaks", "paragraph-separators"])
@pytest.mark.parametrize("paragraphs", TEXTS, ids=["orchard", "violin", "printer"])
def test_three_unrelated_paragraphs_are_three_segments(segmenter, paragraphs, joint):
    text = joint.join(paragraphs) + "\n"
    starts = [text.index(p) for p in paragraphs]
    result = segmenter.segment(text)
    assert [s.start for s in result] == starts
    assert "".join(s.text for s in result) == text


TURNS = "Grad G: So I think it crashed. It does that. I restart it.\nPostdoc B: Did you save it? I hope so. Yes.\n"


def _units(text):
    from headseg.analysis.text import split_sentences

    return split_sentences(text)


@pytest.mark.parametrize("text,expected", [
    # a blank line opens a paragraph, whatever the lines hold
    ("One is here. Two is here.\n\nThree is here. Four is here.\n", [False, False, True, False]),
    # paragraphs a line: each line break opens one
    ("One a. Two a. Three a.\nFour b. Five b. Six b.\n", [False, False, False, True, False, False]),
    # one sentence a line (the benchmark sets) and a transcript's turns are no paragraphs
    ("One is here.\nTwo is here.\nThree is here.\n", [False, False, False]),
    (TURNS, [False] * 6),
    # no line break at all: one paragraph
    ("One is here. Two is here. Three is here.", [False, False, False]),
    # every line break str.splitlines knows is one: CR LF, a lone CR (old Mac files), the Unicode
    # separators pasted from word processors; a PARAGRAPH SEPARATOR alone opens a paragraph
    ("One is here. Two is here.\r\n\r\nThree is here. Four is here.\r\n", [False, False, True, False]),
    ("One a. Two a. Three a.\rFour b. Five b. Six b.\r", [False, False, False, True, False, False]),
    ("One a. Two a. Three a.\u2028Four b. Five b. Six b.", [False, False, False, True, False, False]),
    ("One is here. Two is here.\u2029Three is here. Four is here.", [False, False, True, False]),
    # a line of other whitespace (a no-break space, a tab) is blank
    ("One is here. Two is here.\n\u00a0\t\nThree is here.", [False, False, True]),
    # a page break (FF) ends a line and opens no paragraph: one sentence a line is no prose in paragraphs
    ("One is here.\nTwo is here.\x0cThree is here.", [False, False, False]),
])
def test_paragraph_starts(text, expected):
    units = _units(text)
    assert len(units) == len(expected)
    same = starts_same_line(text, units)
    assert paragraph_starts(text, units, same).tolist() == expected


def test_transcripts_and_one_sentence_lines_are_not_paragraph_lines():
    for text, want in ((TURNS, False), ("A a. B b. C c.\nD d. E e. F f.\n", True), ("A a.\nB b.\n", False)):
        units = _units(text)
        assert lines_are_paragraphs(text, units, starts_same_line(text, units)) is want


def test_paragraph_bonus_shrinks_as_paragraphs_grow_in_number():
    opens = np.array([False, False, True, False, True, False])
    b = paragraph_bonus(opens, 0.6, 4.0, 0.5)
    np.testing.assert_allclose(b, [0, -0.5, 0.6, -0.5, 0.6, -0.5])  # 3 paragraphs: 0.6 · min(1, 4/3)
    many = np.zeros(41, dtype=bool)
    many[1::4] = True  # 11 paragraphs
    b = paragraph_bonus(many, 0.6, 4.0, 0.5)
    np.testing.assert_allclose(b[many], 0.6 * 4 / 11)
    assert paragraph_bonus(np.zeros(5, dtype=bool), 0.6, 4.0, 0.5) is None  # one paragraph: no prior
    assert paragraph_bonus(opens, 0.0, 4.0, 0.0) is None


def test_paragraph_knobs_are_checked():
    for bad in ({"paragraph_bonus": 1.0}, {"paragraph_bonus": -0.1}, {"paragraph_surcharge": -1},
                {"paragraph_count": float("inf")}, {"paragraph_bonus": True}):
        with pytest.raises(HeadsegError, match=next(iter(bad))):
            TopicParams(**bad)


def test_correlation_length_is_at_most_a_quarter_of_the_units_seen():
    # on 8 units a near-zero first lag before a larger second one read as a length of twenty; the
    # length is now capped at a quarter of the units the statistics saw, and computed as before otherwise
    rng = np.random.default_rng(1)  # 8 random units whose first lag is small beside the next ones
    params = TopicParams()
    x = rng.normal(size=(8, 4))
    s2, acf = local_statistics(x, params.window, params.max_lag)
    keep = np.cumprod(acf > 0, axis=1)
    raw = np.where(acf[:, 0] > 0, (acf * keep).sum(axis=1) / np.maximum(acf[:, 0], 1e-12), 0.0)
    assert (raw > 8 / 4).any()  # the case the cap is for
    length = np.minimum(raw, 8 / 4)
    beta = boundary_penalty(x, params, params.penalty)
    np.testing.assert_allclose(beta, s2 * np.maximum(1 + params.penalty * length, params.floor))
    long = rng.normal(size=(400, 4))
    s2, acf = local_statistics(long, params.window, params.max_lag)
    keep = np.cumprod(acf > 0, axis=1)
    raw = np.where(acf[:, 0] > 0, (acf * keep).sum(axis=1) / np.maximum(acf[:, 0], 1e-12), 0.0)
    assert raw.max() < 100  # a long text never meets the cap
    np.testing.assert_allclose(boundary_penalty(long, params, params.penalty),
                               s2 * np.maximum(1 + params.penalty * raw, params.floor))
