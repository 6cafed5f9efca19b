"""Boundaries as evidence (issue 48): the permutation test, the gate, and what a user sees.

The texts were written for these tests: none is in a dev family (benchmarks/data) or the tuning.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from headseg.analysis.errors import HeadsegError
from headseg.segmenter.evidence import (CONFIDENCE_RANGE, SCALE_FREE, EvidenceParams, Parts, boundary_evidence,
                                       boundary_parts, boundary_z, confidence, directions, evidence_input,
                                       evidence_of, likeness, project)
from headseg.segmenter.gate import confidences, gate, to_anchors
from headseg.segmenter.search import SegmentCost
from headseg.segmenter.topics import TopicParams


def blocks(sizes, dim=40, spread=0.25, seed=0):
    """Unit vectors in blocks: each block around its own random direction, with noise."""
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        centre = rng.standard_normal(dim)
        out.append(centre + spread * math.sqrt(dim) * rng.standard_normal((n, dim)) / math.sqrt(dim) * 4)
    return np.vstack(out)


def test_the_observed_saving_is_the_search_scatter_saved():
    # the test's statistic, recomputed independently from the search's own segment cost
    x = blocks([7, 9], seed=1)
    p = EvidenceParams(dims=8)
    y = project(x, p)
    w = np.linspace(0.5, 1.5, len(x))
    cost = SegmentCost(y, weights=w)
    saved = cost.cost(0, 16) - cost.cost(0, 7) - cost.cost(7, 16)
    from headseg.segmenter.evidence import _savings

    cx = np.vstack([np.zeros((1, y.shape[1])), np.cumsum(y * w[:, None], axis=0)])
    cw = np.concatenate([[0.0], np.cumsum(w)])
    assert _savings(cx, cw)[6] == pytest.approx(saved, rel=1e-9)


def test_projection_keeps_distances_of_a_small_text_exactly():
    x = blocks([5, 6], dim=300, seed=2)
    y = project(x, EvidenceParams(dims=32))
    d = lambda a: ((a[:, None, :] - a[None, :, :]) ** 2).sum(-1)  # noqa: E731
    assert np.allclose(d(x), d(y))  # 11 units span at most 10 directions: nothing is lost


def test_distinct_blocks_keep_their_boundaries_and_noise_loses_its_own():
    x = blocks([12, 12, 12], seed=3)
    kept, sure = gate(x, None, [12, 24], 1.0)
    assert kept == [12, 24] and all(0 < c < 1 for c in sure)
    assert gate(one_subject(36, seed=4), None, [12, 24], 1.0)[0] == []


def one_subject(n, dim=40, seed=0):
    """``n`` unit vectors of one subject, as a model gives them: a shared direction, and noise around it."""
    rng = np.random.default_rng(seed)
    return 3.0 * rng.standard_normal(dim) + rng.standard_normal((n, dim))


def test_the_evidence_is_the_permutation_z_and_the_sides_likeness():
    # recomputed independently: the cosine of the two sides' mean directions, and the evidence's sum
    x = np.vstack([blocks([6, 6], seed=11)[:6], one_subject(6, seed=12)])
    x[3] = 0.0  # a zero vector counts for neither side's direction
    p = EvidenceParams()
    t = evidence_input(x, None, p)
    u = [v / np.linalg.norm(v) if np.linalg.norm(v) else v for v in x]
    left, right = np.sum(u[:6], axis=0), np.sum(u[6:], axis=0)
    cos = left @ right / np.linalg.norm(left) / np.linalg.norm(right)
    assert likeness(t, 0, 6, 12) == pytest.approx(cos, rel=1e-12)
    z, n = boundary_z(t.y, t.w, 0, 6, 12, p)
    assert boundary_evidence(t, 0, 6, 12, p) == (pytest.approx(z + p.likeness_weight * (p.likeness_center - cos)), n)
    assert boundary_evidence(t, 0, 6, 12, EvidenceParams(likeness_weight=0.0)) == (z, n)


def test_the_likeness_of_vectors_centred_in_place_is_that_of_the_vectors_as_they_came():
    # the search centres its own copy in place; what directions() kept before must give the same evidence
    x = np.vstack([blocks([7, 9], seed=14), one_subject(8, seed=15)]) + 2.0
    p = EvidenceParams()
    came = directions(x)
    centred = x - x.mean(axis=0)
    moved = evidence_input(centred, None, p, own=True, came=came)
    kept = evidence_input(x.copy(), None, p)
    for a, m, b in ((0, 7, 16), (7, 16, 24), (0, 16, 24)):
        assert likeness(moved, a, m, b) == pytest.approx(likeness(kept, a, m, b), abs=1e-12)
        assert boundary_evidence(moved, a, m, b, p)[0] == pytest.approx(boundary_evidence(kept, a, m, b, p)[0], abs=1e-9)
    # without what came, vectors it may centre in place are not read as they came: it takes no ownership
    raw = x.copy()
    evidence_input(raw, None, p, own=True)
    assert np.array_equal(raw, x)


def test_sides_alike_in_the_model_space_need_more_evidence():
    # the same relative contrast, once between unrelated directions and once on a shared one
    rng = np.random.default_rng(13)
    a, b = rng.standard_normal(40), rng.standard_normal(40)
    contrast = np.vstack([a + 0.3 * rng.standard_normal((8, 40)), b + 0.3 * rng.standard_normal((8, 40))])
    shared = contrast + 40.0 * rng.standard_normal(40)  # the same differences on top of one subject
    p = EvidenceParams()
    unlike, alike = evidence_input(contrast, None, p), evidence_input(shared, None, p)
    assert likeness(unlike, 0, 8, 16) < 0.3 < 0.9 < likeness(alike, 0, 8, 16)
    z_unlike, z_alike = boundary_z(unlike.y, unlike.w, 0, 8, 16, p)[0], boundary_z(alike.y, alike.w, 0, 8, 16, p)[0]
    assert z_alike == pytest.approx(z_unlike, abs=1e-6)  # centred, the permutation test sees the same text
    assert boundary_evidence(alike, 0, 8, 16, p)[0] < boundary_evidence(unlike, 0, 8, 16, p)[0] - 4
    with pytest.raises(HeadsegError):
        EvidenceParams(likeness_weight=-1.0)


def test_the_weakest_goes_first_and_its_neighbours_are_tested_again():
    # a cut inside the first block is weak; removing it leaves the true cut at 12
    x = blocks([12, 12], seed=5)
    kept, _ = gate(x, None, [6, 12], 1.0)
    assert kept == [12]


def test_a_boundary_the_limits_need_stays():
    noise = one_subject(30, seed=6)
    assert gate(noise, None, [10, 20], 1.0, fits=lambda a, b: b - a <= 15) == \
        (gate(noise, None, [10, 20], -math.inf)[0], gate(noise, None, [10, 20], -math.inf)[1])


def test_a_confidence_floor_removes_boundaries_below_it():
    x = blocks([10, 10, 10], seed=7)
    sure = confidences(x, None, [10, 20])
    assert len(sure) == 2 and all(0 < c < 1 for c in sure)
    assert gate(x, None, [10, 20], -math.inf, min_confidence=1.0)[0] == []
    kept, kept_sure = gate(x, None, [10, 20], -math.inf, min_confidence=min(sure))
    assert kept == [10, 20] and kept_sure == pytest.approx(sure)


def test_the_test_is_deterministic_and_confidence_grows_with_evidence():
    x = blocks([8, 8], seed=8)
    p = EvidenceParams()
    y, w = project(x, p), np.ones(16)
    assert boundary_z(y, w, 0, 8, 16, p) == boundary_z(y, w, 0, 8, 16, p)
    more_z = [confidence(Parts(z, 0.5, 20), p) for z in (-1.0, 0.0, 2.0, 8.0, 30.0)]
    less_alike = [confidence(Parts(2.0, cos, 20), p) for cos in (0.95, 0.7, 0.4, 0.1)]
    assert np.all(np.diff(more_z) > 0) and np.all(np.diff(less_alike) > 0)
    # the logistic regression as documented, recomputed
    t = p.bias + p.z_weight * 2.0 + p.alike_weight * 0.4 + p.length_weight * math.log(20)
    assert confidence(Parts(2.0, 0.4, 20), p) == round(1 / (1 + math.exp(-t)), 3)
    # never certain either way: the dev families hold too few boundaries out there to calibrate it
    assert confidence(Parts(500.0, -1.0, 2), p) == CONFIDENCE_RANGE[1] < 1
    assert confidence(Parts(-500.0, 1.0, 10**6), p) == CONFIDENCE_RANGE[0] > 0


def test_the_confidence_reads_the_parts_the_evidence_sums():
    x = blocks([8, 8], seed=8)
    p = EvidenceParams()
    t = evidence_input(x, None, p)
    parts = boundary_parts(t, 0, 8, 16, p)
    assert parts.z == boundary_z(t.y, t.w, 0, 8, 16, p)[0] and parts.likeness == likeness(t, 0, 8, 16)
    assert boundary_evidence(t, 0, 8, 16, p) == (pytest.approx(parts.z + p.likeness_weight * (p.likeness_center
                                                                                             - parts.likeness)), 16)
    # the gate's confidence is the calibration of those parts
    assert gate(x, None, [8], -math.inf, params=p)[1] == [pytest.approx(confidence(parts, p))]


def test_a_kept_boundary_moves_to_the_heading_that_opens_its_section():
    # the subject changes at unit 12, where a heading opens a section; the search cut two units further
    # down (after the section's first lines): the evidence keeps a boundary, the heading says where
    x = blocks([12, 14], seed=11)
    p = EvidenceParams()
    assert gate(x, None, [14], 1.0, params=p)[0] == [14]
    kept, sure = gate(x, None, [14], 1.0, params=p, anchors=[12, 20])
    assert kept == [12]
    # its confidence is that of the boundary where it now is, recomputed
    assert sure == [confidence(boundary_parts(evidence_input(x, None, p), 0, 12, 26, p), p)]
    # without a gate (min_evidence -inf) the search's places stand
    assert gate(x, None, [14], -math.inf, params=p, anchors=[12, 20])[0] == [14]


def test_a_boundary_at_a_heading_stays_and_a_heading_without_evidence_is_not_taken():
    x = blocks([12, 14], seed=11)
    p = EvidenceParams()
    t = evidence_input(x, None, p)
    assert to_anchors(t, [12], [3, 12, 20], 1.0, 0.0, p) == [12]
    # the nearest heading after the cut opens a section two units from the end: no evidence there
    assert evidence_of(boundary_parts(t, 0, 24, 26, p), p) < 1.0
    assert to_anchors(t, [10], [24], 1.0, 0.0, p) == [10]
    # nor where the limits forbid either segment, or outside the boundary's neighbours
    assert to_anchors(t, [14], [12], 1.0, 0.0, p, fits=lambda a, b: b - a <= 13) == [14]
    assert to_anchors(t, [5, 14], [4], 1.0, 0.0, p) == [5, 14]


def test_each_boundary_moves_between_its_neighbours_as_moved():
    x = blocks([10, 10, 10], seed=12)
    p = EvidenceParams()
    t = evidence_input(x, None, p)
    moved = to_anchors(t, [12, 21], [10, 20], 1.0, 0.0, p)
    assert moved == [10, 20]
    # of two headings equally near, the stronger boundary wins
    for cut, heads in ((11, [10, 12]), (19, [18, 20])):
        e = {h: evidence_of(boundary_parts(t, 0, h, 30, p), p) for h in heads}
        assert to_anchors(t, [cut], heads, 1.0, 0.0, p) == [max(heads, key=e.get)]


def test_the_search_moves_its_cut_to_a_heading_the_prior_names():
    from headseg.segmenter.cuts import CutPrior
    from headseg.segmenter.topics import topic_boundaries

    x = blocks([12, 14], seed=11)
    level = np.zeros(26, dtype=np.int64)
    plain = CutPrior(np.ones(26, dtype=bool), np.zeros(26), level)
    cuts, _ = topic_boundaries(x, TopicParams(), cut_prior=plain)
    assert cuts == [12]
    # a heading two units below the subject's change: the boundary opens at the heading
    level[14] = 2
    assert topic_boundaries(x, TopicParams(), cut_prior=CutPrior(np.ones(26, dtype=bool), np.zeros(26), level))[0] == [14]


def test_bad_boundaries_and_knobs_are_refused():
    x = blocks([5, 5])
    with pytest.raises(HeadsegError):
        gate(x, None, [5, 5], 1.0)
    with pytest.raises(HeadsegError):
        gate(x, None, [0], 1.0)
    with pytest.raises(HeadsegError):
        EvidenceParams(draws=1)
    with pytest.raises(HeadsegError):
        EvidenceParams(z_weight=0.0)
    with pytest.raises(HeadsegError):
        EvidenceParams(alike_weight=0.5)  # sides more alike would make a boundary surer


# --- what a user sees, with the embedded model -------------------------------------------------

EMAILS = [
    "Dear Mr Patel, thank you for your order of the oak dining table. It left our workshop this morning and "
    "should reach you on Thursday. The driver will call you an hour before he arrives.\n\n"
    "The table comes in two parts, the top and the frame. Our driver will carry both inside and put them "
    "together for you. Please make sure there is a clear path from the door to the room.\n\n"
    "If Thursday does not suit you, reply to this e-mail and we will find another day for the delivery. "
    "Thank you again for choosing our workshop for your new table.",
    "Hi team, the quarterly review meeting moves from Tuesday to Wednesday at ten. We need the larger room "
    "because the regional managers are joining us this time.\n\n"
    "Please bring the sales figures for your region and a short summary of the quarter. Each region gets "
    "fifteen minutes to present its numbers at the meeting.\n\n"
    "Coffee and lunch will be served after the meeting. Let me know by Monday if you cannot attend, so that "
    "I can tell the caterers how many people to expect.",
    "Hello Sara, I have looked at the drawings for your kitchen extension. The plans are clear and the new "
    "wall can carry the weight of the roof without extra support.\n\n"
    "The builders can start on the extension in the first week of May. They expect the walls and the roof "
    "of the kitchen to take about six weeks.\n\n"
    "I will send you the final price for the kitchen extension by Friday. Please call me if you want to "
    "change anything in the drawings before we order the materials.",
]

TWO_SUBJECTS = [
    "The volcano on the island erupted again on Sunday night. Lava flowed down its eastern slope towards "
    "the sea. Scientists measured hundreds of small earthquakes under the crater.\n\n"
    "Villages near the volcano were evacuated as a precaution. Ash from the eruption closed the small "
    "airport for two days. The lava has now slowed, but the crater is still active.\n\n"
    "Knitting a scarf is a good first project for a beginner. You need two needles, a ball of thick wool "
    "and a pair of scissors. Start by casting on about thirty stitches.\n\n"
    "Knit every row until the scarf is as long as you want it. Then cast off the stitches and weave the "
    "loose ends of wool into the edge. A simple scarf takes a beginner about a week.",
    "Our chess club meets every Thursday evening in the library. Players of every level are welcome, and "
    "boards and clocks are provided. Beginners can ask for a short lesson before the games.\n\n"
    "In spring the club holds a tournament of seven rounds. The winner receives a small trophy and a book "
    "about chess openings. Entry to the tournament is free for members.\n\n"
    "Tomatoes grow best in a sunny spot with rich soil. Plant the seedlings deep, so that the stem grows "
    "extra roots. Water them at the base, never on the leaves.\n\n"
    "Tie the plants to a cane as they grow taller. Pinch out the side shoots every week so that the plant "
    "puts its strength into the fruit. Pick the tomatoes when they are fully red.",
]

THREE = (
    "The weather this week will stay cold and wet across the whole region. Rain is expected on Monday and "
    "Tuesday, with strong winds along the coast. Temperatures will drop below freezing at night, so roads may "
    "be icy in the early morning. Snow is possible on the hills above three hundred metres on Wednesday. By "
    "the weekend the sky should clear, the wind will ease and the sun will return.\n\n"
    "To make a simple tomato soup, start by chopping one onion and two cloves of garlic. Fry them gently in "
    "olive oil until they are soft. Add a tin of chopped tomatoes, a cup of vegetable stock and a pinch of "
    "salt. Let it simmer for twenty minutes, then blend it until smooth. A spoon of cream on top makes it "
    "richer, and a few leaves of fresh basil give it colour. Serve it hot with fresh bread.\n\n"
    "Our football club is looking for new players for the under-twelve team this season. Training takes "
    "place every Wednesday evening at the school field. No experience is needed, just bring boots and a "
    "water bottle.")


@pytest.fixture(scope="module")
def segmenter():
    from headseg.api import Segmenter

    return Segmenter(quiet=True)


@pytest.mark.parametrize("text", [
    EMAILS[0], pytest.param(EMAILS[1], marks=pytest.mark.xfail(strict=True, reason=(
        "the limit of the evidence: this notice's last paragraph (catering, replies) stands apart from the "
        "meeting's agenda strongly enough to be cut; 92 % of the dev family's one-subject texts stay whole "
        "(docs/results.md)"))), EMAILS[2]])
def test_an_email_on_one_subject_in_three_paragraphs_stays_whole(segmenter, text):
    assert text.count("\n\n") == 2
    assert len(segmenter.segment(text)) == 1


@pytest.mark.parametrize("text", TWO_SUBJECTS)
def test_two_subjects_of_two_paragraphs_each_give_two_segments(segmenter, text):
    result = segmenter.segment(text)
    second = text.index(text.split("\n\n")[2])
    assert [s.start for s in result] == [0, second]
    assert 0 <= result[1].confidence <= 1 and result[0].confidence is None


def test_every_boundary_has_a_confidence_and_the_floor_of_one_keeps_none(segmenter):
    result = segmenter.segment(THREE)
    assert len(result) == 3
    assert all(0 <= s.confidence <= 1 for s in result[1:])
    assert len(segmenter.segment(THREE, min_confidence=1.0)) == 1
    low = min(s.confidence for s in result[1:])
    assert len(segmenter.segment(THREE, min_confidence=low)) == 3
    assert [r["confidence"] for r in result.to_records()] == [None] + [round(s.confidence, 6) for s in result[1:]]


def test_a_size_limit_never_glues_two_subjects_together(segmenter):
    # three unrelated paragraphs of 211 tokens in all under max_tokens=256: the implicit size target
    # (0.6 x 256) used to merge the last two (soup and football: 78 + 133 tokens before issue 48)
    paragraphs = THREE.split("\n\n")
    assert 200 <= sum(s.token_count for s in segmenter.segment(THREE)) <= 256
    result = segmenter.segment(THREE, max_tokens=256)
    assert [s.start for s in result] == [0, THREE.index(paragraphs[1]), THREE.index(paragraphs[2])]
    assert all(s.token_count <= 256 for s in result)


SHORT_THREE = (
    "The forecast for the weekend promises clear skies on Saturday, with temperatures climbing to twenty-four "
    "degrees by the afternoon. A light breeze from the west should keep the evening pleasant, though clouds may "
    "gather late on Sunday.\n\n"
    "To make the soup, soften two chopped onions in butter, then add a kilo of diced pumpkin and a litre of "
    "vegetable stock. Simmer for twenty minutes, blend until smooth and season with nutmeg, salt and a little "
    "cream.\n\n"
    "The home side scored twice in the last ten minutes to win the derby, after trailing for most of the match. "
    "Their coach praised the substitutes, who changed the game, and the fans stayed long after the final "
    "whistle to celebrate.\n")


@pytest.mark.parametrize("max_tokens", [256, 512])
def test_short_paragraphs_of_unrelated_subjects_stay_apart_under_a_size_limit(segmenter, max_tokens):
    # two sentences a paragraph, 140 tokens in all: six units cannot give 3 standard deviations of evidence
    # (z 1.2 and 1.6), but the sides are unlike and the boundaries' confidence high; they were one chunk
    paragraphs = SHORT_THREE.split("\n\n")
    free = segmenter.segment(SHORT_THREE)
    assert [s.start for s in free] == [0, SHORT_THREE.index(paragraphs[1]), SHORT_THREE.index(paragraphs[2])]
    assert sum(s.token_count for s in free) < 0.6 * max_tokens  # the whole text is under the target
    assert [s.start for s in segmenter.segment(SHORT_THREE, max_tokens=max_tokens)] == [s.start for s in free]


def test_the_unit_level_has_no_confidence(segmenter):
    assert all(s.confidence is None for s in segmenter.segment(THREE, level="unit"))


def test_exactly_k_segments_keep_every_boundary_and_still_say_how_sure(segmenter):
    result = segmenter.segment(EMAILS[0], segments=3)
    assert len(result) == 3 and all(0 <= s.confidence <= 1 for s in result[1:])


def _keep(found, free, tokens, max_tokens, target, spans=None, max_chars=None):
    from headseg.segmenter.apart import keep_apart
    from headseg.segmenter.request import SearchRequest

    x = blocks([10, 10, 10], seed=11)  # three topics: the boundaries at 10 and 20 are sure
    request = SearchRequest(max_tokens=max_tokens, target_tokens=target, keep_apart=3.0, max_chars=max_chars)
    return keep_apart(x, None, np.asarray(tokens), found, free, [0.5] * len(free), request, None, spans)


def test_a_size_target_moves_its_nearest_cut_onto_a_sure_boundary():
    # units of 10 tokens; the target cut at 8 and 23, two units from the topics' boundaries at 10 and 20
    tokens = [10] * 30
    assert _keep([8, 23], [10, 20], tokens, max_tokens=200, target=100) == [10, 20]
    # a cut further than half a target stays and the sure boundary is added beside it
    assert _keep([4, 23], [10, 20], tokens, max_tokens=200, target=100) == [4, 10, 20]
    # a move that would break a hard limit is not made: units 0-9 of 8 characters, 10-22 of 4, 23-29 of 5; moving 8 to 10
    # would make the first chunk 80 > 75 characters, so 10 is added; 23 moves to 20 (chunks of 40 and 47)
    widths = [8] * 10 + [4] * 13 + [5] * 7
    ends = np.cumsum(widths).tolist()
    spans = list(zip([0, *ends[:-1]], ends))
    assert _keep([8, 23], [10, 20], tokens, 200, 100, spans, max_chars=75) == [8, 10, 20]
    # a target cut already on a sure boundary stays; one that is itself sure is never moved away
    assert _keep([10, 23], [10, 20], tokens, max_tokens=200, target=100) == [10, 20]


def test_the_likeness_term_is_the_default_models_alone(segmenter, tiny_bert):
    # fitted on the embedded model's scale; another model's profile tests z alone
    from headseg import Segmenter

    assert segmenter.params.evidence == EvidenceParams() and EvidenceParams().likeness_weight > 0
    other = Segmenter(model=tiny_bert, backend="torch")
    assert other.params.evidence == EvidenceParams(likeness_weight=0.0, **SCALE_FREE)
    # its confidence reads no likeness either (another model's cosines are on another scale)
    p = other.params.evidence
    assert p.alike_weight == 0 and boundary_parts(evidence_input(blocks([8, 8], seed=3), None, p), 0, 8, 16, p).likeness == 0
    mine = TopicParams(min_evidence=2.0)
    assert Segmenter(model=tiny_bert, backend="torch", params=mine).params is mine  # given knobs are the user's
