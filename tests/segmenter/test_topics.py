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
    from headseg.segmenter.api import Segmenter

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

    # one bad file among good ones: reported, the rest still done, non-zero exit
    (tmp_path / "bin.txt").write_bytes(b"\x00\x01")
    rc = main(["segment", str(SAMPLE), str(tmp_path / "bin.txt"), "--format", "jsonl", "--quiet"])
    cap = capsys.readouterr()
    assert rc == 1 and "binary" in cap.err and len(cap.out.splitlines()) == 3
    rc = main(["segment", str(tmp_path / "missing.txt")])
    assert rc == 2 and capsys.readouterr().err.startswith("headseg: error:")
    rc = main(["segment", str(SAMPLE), "--max-chars", "0"])
    assert rc != 0 and "positive integer" in capsys.readouterr().err
