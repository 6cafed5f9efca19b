"""Topic segmentation on the embedded model, the search, and the segment command."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from headseg.analysis.errors import HeadsegError
from headseg.cli import main
from headseg.segmenter.search import SegmentCost, boundary_strength, partition_k, partition_penalised

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.txt"


def _brute_force_k(x, k):
    """Exhaustive optimum over all partitions into k segments (independent of the DP)."""
    from itertools import combinations

    n = len(x)
    best, arg = np.inf, None
    for cuts in combinations(range(1, n), k - 1):
        edges = [0, *cuts, n]
        total = 0.0
        for a, b in zip(edges, edges[1:]):
            seg = x[a:b]
            total += ((seg - seg.mean(0)) ** 2).sum()
        if total < best - 1e-12:
            best, arg = total, list(cuts)
    return arg, best


def test_partition_k_matches_brute_force():
    rng = np.random.default_rng(0)
    for trial in range(5):
        x = rng.normal(size=(9, 3))
        for k in (1, 2, 3, 4):
            cuts = partition_k(SegmentCost(x), k)
            ref, best = _brute_force_k(x, k)
            assert cuts == ref
            edges = [0, *cuts, 9]
            assert sum(SegmentCost(x).cost(a, b) for a, b in zip(edges, edges[1:])) == pytest.approx(best)


def test_penalised_partition_finds_planted_change_points():
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(4, 16)) * 3
    lengths = [7, 12, 5, 9]
    x = np.vstack([c + rng.normal(size=(n, 16)) * 0.3 for c, n in zip(centres, lengths)])
    cuts = partition_penalised(SegmentCost(x), penalty=5.0)
    assert cuts == list(np.cumsum(lengths)[:-1])
    # a huge penalty gives one segment, a zero penalty one segment per unit
    assert partition_penalised(SegmentCost(x), penalty=1e9) == []
    assert partition_penalised(SegmentCost(x), penalty=0.0) == list(range(1, len(x)))
    strengths = boundary_strength(SegmentCost(x), cuts)
    assert len(strengths) == 3 and all(s > 0 for s in strengths)


def test_size_limits_in_search():
    x = np.zeros((6, 2))
    sizes = np.array([3, 3, 3, 3, 3, 3], float)
    cuts = partition_penalised(SegmentCost(x, sizes, max_size=7), penalty=1.0)
    edges = [0, *cuts, 6]
    assert all(sizes[a:b].sum() <= 7 for a, b in zip(edges, edges[1:]))
    assert len(cuts) == 2  # two units per segment is the fewest segments allowed
    with pytest.raises(HeadsegError):
        SegmentCost(x, sizes, max_size=2)
    with pytest.raises(HeadsegError):
        partition_k(SegmentCost(x, sizes, max_size=7), 2)


@pytest.fixture(scope="module")
def segmenter(embedded):
    from headseg.api import Segmenter

    return Segmenter(model=embedded, backend="torch")


@pytest.mark.slow
def test_sample_topics_found_exactly(segmenter):
    text = SAMPLE.read_text(encoding="utf-8")
    result = segmenter.segment(text)
    paragraphs = [i + 2 for i in range(len(text) - 1) if text[i:i + 2] == "\n\n"]
    assert result.boundaries == paragraphs
    assert "".join(s.text for s in result) == text
    assert all(s.score > 0 for s in result.segments[1:])
    units = segmenter.segment(text, level="unit")
    assert len(units) == text.count(". ") + text.count(".\n")


@pytest.mark.slow
def test_segment_cli_formats_and_errors(tmp_path, capsys, monkeypatch, embedded):
    text = SAMPLE.read_text(encoding="utf-8")
    out = tmp_path / "o.jsonl"
    rc = main(["segment", str(SAMPLE), str(SAMPLE), "--format", "jsonl", "--out", str(out), "--quiet"])
    assert rc == 0
    records = [json.loads(l) for l in out.read_text().splitlines()]
    assert [r["index"] for r in records] == [0, 1, 2, 0, 1, 2]
    first = [r for r in records if r["document"] == str(SAMPLE)][:3]
    assert "".join(r["text"] for r in first) == text
    assert all(text[r["start"]:r["end"]] == r["text"] for r in first)

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    rc = main(["segment", "-", "--format", "json", "--segments", "2", "--quiet"])
    payload = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(payload["segments"]) == 2 and payload["document"] == "<stdin>"

    # one bad file among good ones: refused before anything is segmented (issue 35 item 23)
    (tmp_path / "bin.txt").write_bytes(b"\x00\x01")
    rc = main(["segment", str(SAMPLE), str(tmp_path / "bin.txt"), "--format", "jsonl", "--quiet"])
    cap = capsys.readouterr()
    assert rc == 2 and "binary" in cap.err and cap.out == ""
    rc = main(["segment", str(tmp_path / "missing.txt")])
    assert rc == 2 and capsys.readouterr().err.startswith("headseg: error:")
    rc = main(["segment", str(SAMPLE), "--max-chars", "0"])
    assert rc != 0 and "positive integer" in capsys.readouterr().err


def _brute_force_penalised(x, penalty, weights=None):
    """Exhaustive optimum of Σ weighted scatter + penalty[start of each segment] over all partitions."""
    from itertools import product

    n = len(x)
    w = np.ones(n) if weights is None else np.asarray(weights, float)
    best, arg = np.inf, None
    for mask in product([0, 1], repeat=n - 1):
        cuts = [i + 1 for i, m in enumerate(mask) if m]
        edges = [0, *cuts, n]
        total = 0.0
        for a, b in zip(edges, edges[1:]):
            mu = (w[a:b, None] * x[a:b]).sum(0) / w[a:b].sum()
            total += (w[a:b] * ((x[a:b] - mu) ** 2).sum(1)).sum() + penalty[a]
        if total < best - 1e-12:
            best, arg = total, cuts
    return arg


def test_weighted_cost_and_per_start_penalty_match_brute_force():
    rng = np.random.default_rng(3)
    for trial in range(4):
        x = rng.normal(size=(8, 3))
        w = rng.uniform(0.2, 2.0, size=8)
        pen = rng.uniform(0.5, 4.0, size=9)
        assert partition_penalised(SegmentCost(x, weights=w), pen) == _brute_force_penalised(x, pen, w)
        # a scalar penalty is the constant array
        assert partition_penalised(SegmentCost(x), 2.0) == _brute_force_penalised(x, np.full(9, 2.0))
    cost = SegmentCost(x, weights=w)
    seg = x[2:6]
    mu = (w[2:6, None] * seg).sum(0) / w[2:6].sum()
    assert cost.cost(2, 6) == pytest.approx((w[2:6] * ((seg - mu) ** 2).sum(1)).sum())
    with pytest.raises(HeadsegError):
        SegmentCost(x, weights=np.zeros(8))
    with pytest.raises(HeadsegError):
        partition_penalised(SegmentCost(x), np.ones(3))


def test_local_statistics_match_a_direct_computation():
    from headseg.segmenter.topics import local_statistics

    rng = np.random.default_rng(4)
    x = rng.normal(size=(23, 5))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    window, lags = 6, 4
    s2, acf = local_statistics(x, window, lags)
    n = len(x)
    for i in range(n + 1):
        lo, hi = max(i - window, 0), min(i + window, n)
        adj = [((x[j + 1] - x[j]) ** 2).sum() / 2 for j in range(lo, min(hi, n - 1))]
        assert s2[i] == pytest.approx(np.mean(adj))
        pairs = [x[a] @ x[b] for a in range(lo, hi) for b in range(lo, hi) if a != b]
        for l in range(1, lags + 1):
            direct = [x[j] @ x[j + l] for j in range(lo, min(hi, n - l))]
            assert acf[i, l - 1] == pytest.approx(np.mean(direct) - np.mean(pairs))


def test_correlation_length_reads_past_one_noisy_lag_when_smoothed(monkeypatch):
    """``R`` sums the autocorrelation to its first non-positive lag; with ``acf_smoothing`` it is the first
    non-positive lag of the moving average that ends the sum (recomputed by hand)."""
    from headseg.segmenter import penalty, topics

    acf_row = np.array([1.0, -0.01, 0.5, 0.2, -0.3, 0.1])
    s2 = np.array([2.0, 3.0, 2.5, 2.0, 3.0, 2.5, 2.0, 3.0, 2.5])
    monkeypatch.setattr(penalty, "local_statistics", lambda x, window, lags: (s2, np.tile(acf_row, (len(s2), 1))))
    x = np.zeros((8, 4))  # 8 units: the cap on R (a quarter of them, 2) is above every R here
    raw = topics.boundary_penalty(x, topics.TopicParams(floor=0.0), 0.5)
    # raw: the noisy second lag ends the sum at the first; R = 1.0 / 1.0
    np.testing.assert_allclose(raw, s2 * (1 + 0.5 * 1.0))
    smooth = topics.boundary_penalty(x, topics.TopicParams(floor=0.0, acf_smoothing=3), 0.5)
    # 3-lag means: (1 - .01 + .5)/3, (-.01 + .5 + .2)/3, (.5 + .2 - .3)/3 > 0, then (.2 - .3 + .1)/3 = 0 stops
    np.testing.assert_allclose(smooth, s2 * (1 + 0.5 * (1.0 - 0.01 + 0.5 + 0.2)))
    a = np.arange(12.0).reshape(2, 6) ** 2
    direct = a.copy()
    for j in (2, 3):  # the columns with a full 5-wide window; the two at each end keep their values
        direct[:, j] = a[:, j - 2:j + 3].mean(axis=1)
    np.testing.assert_allclose(topics.moving_average(a, 5), direct)
    for bad in (0, 2, -1, 1.0, True):
        with pytest.raises(HeadsegError, match="acf_smoothing"):
            topics.TopicParams(acf_smoothing=bad)


def _planted(rng, segments, length, dim=48, noise=1.2):
    centres = rng.normal(size=(segments, dim))
    return np.vstack([c + rng.normal(size=(length, dim)) * noise for c in centres])


def test_number_of_segments_holds_as_the_document_grows_and_topics_recur():
    """Segments per planted segment do not fall as a document is repeated (no ln n in the penalty)."""
    from headseg.segmenter.topics import topic_cuts

    rng = np.random.default_rng(5)
    base = _planted(rng, 12, 6)
    ratios = []
    for times in (1, 4, 10):
        x = np.vstack([base] * times)  # every topic comes back `times` times
        cuts = topic_cuts(x)
        ratios.append((len(cuts) + 1) / (12 * times))
        # every planted boundary is found
        assert set(range(6, len(x), 6)) <= set(cuts)
    assert max(ratios) - min(ratios) <= 0.15 * min(ratios)


def test_local_penalty_follows_segment_length():
    """Longer planted segments raise the bar (correlation length), short ones lower it."""
    from headseg.segmenter.topics import TopicParams, boundary_penalty, prepare_vectors

    rng = np.random.default_rng(6)
    p = TopicParams()
    short = prepare_vectors(_planted(rng, 20, 4), p)
    long = prepare_vectors(_planted(rng, 8, 12), p)
    assert np.median(boundary_penalty(long, p, p.penalty)) > np.median(boundary_penalty(short, p, p.penalty))


def _paragraph_starts(text):
    return [i + 2 for i in range(len(text) - 2) if text[i:i + 2] == "\n\n"]


@pytest.mark.slow
@pytest.mark.parametrize("times", [3, 5])
def test_repeated_sample_keeps_every_topic(segmenter, times):
    text = (SAMPLE.read_text(encoding="utf-8").strip() + "\n\n") * times
    result = segmenter.segment(text)
    assert len(result) == 3 * times
    assert result.boundaries == _paragraph_starts(text)


@pytest.mark.slow
def test_recurring_topics_in_order_a_b_a_c_b_c(segmenter):
    a, b, c = SAMPLE.read_text(encoding="utf-8").strip().split("\n\n")
    text = "\n\n".join([a, b, a, c, b, c]) + "\n"
    result = segmenter.segment(text)
    assert len(result) == 6
    assert result.boundaries == _paragraph_starts(text)
    # exact k and the size limits still hold
    assert len(segmenter.segment(text, segments=4)) == 4
    limited = segmenter.segment(text, max_chars=300)
    assert all(len(s.text) <= 300 for s in limited) and "".join(s.text for s in limited) == text


@pytest.mark.slow
def test_units_in_other_scripts(segmenter):
    cases = json.loads((SAMPLE.parents[1] / "tests" / "fixtures" / "scripts.json").read_text(encoding="utf-8"))
    for script, parts in cases.items():
        text = "".join(parts)
        units = segmenter.segment(text, level="unit")
        assert [s.text for s in units] == parts, script


@pytest.mark.slow
def test_sentence_splitter_hook(segmenter, embedded):
    from headseg.analysis.errors import InputError
    from headseg.api import Segmenter

    text = "alpha beta; gamma delta; epsilon"

    def on_semicolons(t):
        # spans without the separating spaces, as pysbd and spaCy return them
        out, start = [], 0
        for part in t.split("; "):
            out.append((start, start + len(part) + (1 if start + len(part) < len(t) else 0)))
            start += len(part) + 2
        return out

    units = segmenter.segment(text, level="unit", sentence_splitter=on_semicolons)
    assert [s.text for s in units] == ["alpha beta; ", "gamma delta; ", "epsilon"]
    assert len(segmenter.segment(text, level="unit")) == 1  # the rules see no sentence end
    own = Segmenter(model=embedded, backend="torch", sentence_splitter=on_semicolons)
    assert [s.text for s in own.segment(text, level="unit")] == ["alpha beta; ", "gamma delta; ", "epsilon"]
    assert len(own.segment(text, segments=2)) == 2
    with pytest.raises(InputError):
        segmenter.segment(text, level="unit", sentence_splitter=lambda t: [(0, 5)])
    with pytest.raises(HeadsegError):
        Segmenter(model=embedded, backend="torch", sentence_splitter="not callable")


def test_line_groups_join_short_units_of_one_line_only():
    from headseg.segmenter.lines import group_vectors, line_groups, starts_same_line

    text = "Hi. Yes please. Book it.\nNo. A very long sentence here.\nOk."
    starts = [0, 4, 16, 25, 29, 56]
    units = list(zip(starts, starts[1:] + [len(text)]))
    tokens = [2, 3, 3, 2, 20, 2]
    same = starts_same_line(text, units)
    assert list(same) == [False, True, True, False, True, False]
    assert list(line_groups(same, tokens, 8)) == [0, 0, 0, 1, 2, 3]
    assert list(line_groups(same, tokens, 5)) == [0, 0, 1, 2, 3, 4]
    assert list(line_groups(same, tokens, 0)) == [0, 1, 2, 3, 4, 5]
    # a group never outgrows a size limit (characters here)
    chars = np.asarray([b - a for a, b in units], float)
    assert list(line_groups(same, tokens, 8, chars, (16,))) == [0, 0, 1, 2, 3, 4]
    x = np.arange(12, dtype=float).reshape(6, 2)
    gx, gt, first = group_vectors(x, tokens, np.asarray([0, 0, 0, 1, 2, 3]))
    assert list(first) == [0, 3, 4, 5] and list(gt) == [8, 2, 20, 2]
    assert gx[0] == pytest.approx((x[:3] * np.asarray(tokens[:3])[:, None]).sum(0) / 8)


def test_short_segment_surcharge_and_grouped_cuts_map_to_units():
    """The surcharge only ever removes boundaries; cuts on line groups are unit indices."""
    from headseg.segmenter.topics import TopicParams, topic_cuts

    rng = np.random.default_rng(7)
    x = _planted(rng, 6, 4, noise=2.0)
    tokens = np.full(len(x), 6)
    plain = topic_cuts(x, TopicParams(short_surcharge=0.0, line_tokens=0), unit_tokens=tokens)
    taxed = topic_cuts(x, TopicParams(short_surcharge=2.0, short_tokens=60, line_tokens=0), unit_tokens=tokens)
    assert len(taxed) <= len(plain)
    # two units per line, grouped: every cut falls on a line start, and exact k still holds
    lines = np.repeat(np.arange(len(x) // 2), 2)
    cuts = topic_cuts(x, TopicParams(line_tokens=32), unit_tokens=tokens, lines=lines)
    assert all(c % 2 == 0 for c in cuts)
    assert len(topic_cuts(x, TopicParams(line_tokens=32), segments=5, unit_tokens=tokens, lines=lines)) == 4
    # more segments than groups: the units themselves
    assert len(topic_cuts(x, TopicParams(line_tokens=32), segments=20, unit_tokens=tokens, lines=lines)) == 19


@pytest.mark.parametrize("line, expected", [
    ("1 .", True), ("6.4 .", True), ("(b)", True), ("IV.", True), ("## Results", True), ("3.1 Methods", True),
    ("2. Related work", True), ("Introduction", True), ("Elburn , Ill .", True),
    ("2. We ran the tests.", False), ("Yes please.", False), ("Thanks!", False), ("Is it snowing out", False),
    ("The prospects look great .", False), ("Where is the hospital?", False), ("第一章", False), ("", False),
    ("== Early life ==", True), ("=== Art education and first professional work ===", True),
    ("= = Public use = =", True), ("==========", False), ("a == b", False), ("== ==", False),
])
def test_looks_like_heading(line, expected):
    from headseg.segmenter.units import looks_like_heading

    assert looks_like_heading(line) is expected


def test_headings_join_the_line_after_them():
    from headseg.segmenter.lines import heading_units, line_groups, starts_same_line

    text = "1. Bees\nBees dance. They fly.\nIntroduction\nBread rises.\nOK so.\nThe end.\n## Last"
    starts = [0, 8, 20, 30, 43, 56, 63, 72]
    units = list(zip(starts, starts[1:] + [len(text)]))
    assert [text[a:b].strip() for a, b in units] == [
        "1. Bees", "Bees dance.", "They fly.", "Introduction", "Bread rises.", "OK so.", "The end.", "## Last"]
    tokens = np.asarray([3, 3, 3, 1, 3, 3, 3, 3])
    heads = heading_units(text, units, tokens, 8)
    # "OK so." is a sentence; the last heading has nothing after it
    assert list(heads) == [True, False, False, True, False, False, False, True]
    assert not heading_units(text, units, tokens, 0).any()
    assert list(heading_units(text, units, tokens, 2)) == [False, False, False, True, False, False, False, False]
    same = starts_same_line(text, units)
    # a heading's group takes the next unit whatever the token cap; units on one line still group under it
    assert list(line_groups(same, tokens, 0, headings=heads)) == [0, 0, 1, 2, 2, 3, 4, 5]
    assert list(line_groups(same, tokens, 32, headings=heads)) == [0, 0, 0, 1, 1, 2, 3, 4]
    # never past a size limit
    chars = np.asarray([b - a for a, b in units], float)
    assert list(line_groups(same, tokens, 0, chars, (10,), headings=heads)) == [0, 1, 2, 3, 4, 5, 6, 7]


def test_a_heading_opens_the_segment_after_it():
    """A heading whose vector leans back to the topic before it still opens the next segment."""
    from headseg.segmenter.topics import TopicParams, topic_cuts

    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(2, 32)) * 3
    x = np.vstack([a + rng.normal(size=(8, 32)), a + rng.normal(size=(1, 32)), b + rng.normal(size=(8, 32))])
    tokens = np.full(len(x), 12)
    tokens[8] = 2  # a heading's few tokens
    heads = np.zeros(len(x), bool)
    heads[8] = True
    plain = topic_cuts(x, TopicParams(), unit_tokens=tokens)
    assert plain == [9]  # alone, unit 8 goes with the topic it resembles
    assert topic_cuts(x, TopicParams(), unit_tokens=tokens, headings=heads) == [8]
    assert topic_cuts(x, TopicParams(), segments=2, unit_tokens=tokens, headings=heads) == [8]


@pytest.mark.slow
def test_numbered_headings_open_their_sections(segmenter):
    paragraphs = SAMPLE.read_text(encoding="utf-8").strip().split("\n\n")
    for labels in (["1.", "2.", "3."], ["## Bees", "## Bread", "## Computers"]):
        text = "\n\n".join(f"{h}\n{p}" for h, p in zip(labels, paragraphs)) + "\n"
        result = segmenter.segment(text)
        assert [s.text.split("\n")[0] for s in result] == labels
        assert "".join(s.text for s in result) == text


def test_min_spread_no_topics_in_text_that_barely_changes():
    from headseg.segmenter.topics import TopicParams, topic_boundaries

    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(2, 64))
    t = np.linspace(0.0, 1.0, 120)[:, None]
    # repeated text drifts smoothly: the units barely differ, so σ² is tiny and the drift looked like topics
    drift = a + 0.08 * t * b + 0.002 * rng.normal(size=(120, 64))
    drift /= np.linalg.norm(drift, axis=1, keepdims=True)
    spread = float(np.square(drift - drift.mean(0)).sum(1).mean())
    assert spread < TopicParams().min_spread
    assert topic_boundaries(drift, TopicParams(), tokens=np.full(120, 20))[0] == []
    # without the rule the same vectors were cut into many segments
    assert len(topic_boundaries(drift, TopicParams(min_spread=0), tokens=np.full(120, 20))[0]) > 3
    # real topics are far above the threshold and still cut
    two = np.vstack([a + 0.3 * rng.normal(size=(60, 64)), b + 0.3 * rng.normal(size=(60, 64))])
    two /= np.linalg.norm(two, axis=1, keepdims=True)
    assert topic_boundaries(two, TopicParams(), tokens=np.full(120, 20))[0] == [60]
