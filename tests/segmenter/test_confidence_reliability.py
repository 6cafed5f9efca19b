"""How often a boundary of each confidence is right: the reliability table of
``headseg.segmenter.evaluation.calibration`` and ``headseg evaluate --calibration``, recomputed here by hand
and from the results file."""

from __future__ import annotations

import json

import pytest

from benchmarks.common import segmentation_root
from headseg.analysis.errors import HeadsegError
from headseg.cli import main
from headseg.segmenter.evaluation.calibration import ReliabilityBin, confidence_hits, format_reliability, hits, reliability
from headseg.segmenter.evaluation.harness import Dataset, ResultStore, evaluate
from headseg.segmenter.evaluation.loaders import Document, snap_each, snap_offsets
from headseg.segmenter.evaluation.methods import Method, Prediction

SEG = segmentation_root() / "choi" / "1" / "3-5"


def test_a_boundary_is_right_within_one_reference_unit():
    ref = [5, 12]
    found = [3, 4, 6, 7, 11, 13, 14, 9]
    conf = [0.1, 0.2, 0.3, None, 0.5, 0.6, 0.7, 0.8]
    assert hits(ref, found, conf) == [(0.1, False), (0.2, True), (0.3, True), (0.5, True), (0.6, True),
                                      (0.7, False), (0.8, False)]
    assert hits([], [3], [0.9]) == [(0.9, False)]
    with pytest.raises(HeadsegError, match="2 boundaries but 1 confidences"):
        hits(ref, [1, 2], [0.5])
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(HeadsegError, match="must be in"):
            hits(ref, [5], [bad])


def test_the_table_bins_by_tenths_and_counts_as_by_hand():
    pairs = [(0.0, False), (0.05, True), (0.1, True), (0.15, False), (0.35, True), (0.95, True), (1.0, False),
             (0.9, True)]
    table = reliability(pairs)
    assert [b.label for b in table] == ["0.0–0.1", "0.1–0.2", "0.3–0.4", "0.9–1.0"]
    assert [b.boundaries for b in table] == [2, 2, 1, 3]
    assert table[0].confidence == pytest.approx(0.025) and table[0].right == 0.5
    assert table[3].confidence == pytest.approx((0.95 + 1.0 + 0.9) / 3) and table[3].right == pytest.approx(2 / 3)
    assert reliability([]) == []
    assert [b.label for b in reliability(pairs, bins=2)] == ["0.0–0.5", "0.5–1.0"]
    with pytest.raises(HeadsegError):
        reliability(pairs, bins=0)


def test_a_bin_is_read_only_with_thirty_boundaries():
    few = ReliabilityBin("0.8–0.9", 29, 0.85, 0.5)
    assert few.calibrated is None
    assert ReliabilityBin("0.8–0.9", 30, 0.85, 0.76).calibrated is True
    assert ReliabilityBin("0.8–0.9", 30, 0.85, 0.74).calibrated is False
    text = format_reliability([few, ReliabilityBin("0.9–1.0", 40, 0.92, 0.5)])
    assert "| 0.8–0.9 | 29 | 0.850 | 0.500 | (< 30) |" in text and "| 0.9–1.0 | 40 | 0.920 | 0.500 | no |" in text


def test_snap_each_keeps_the_order_and_snap_offsets_is_its_set():
    starts, end = [0, 5, 10, 20], 30
    offsets = [11, 0, 6, 30, 19, 4]
    assert snap_each(offsets, starts, end) == [2, None, 1, None, 3, 1]
    assert snap_offsets(offsets, starts, end) == [1, 2, 3]


def test_two_offsets_on_one_unit_keep_the_higher_confidence():
    doc = Document(id="d", units=["aa", "bb", "cc", "dd"], boundaries=[2])
    starts = doc.starts
    pred = Prediction(chars=[starts[1], starts[1] + 1, starts[3], 0], confidence=[0.4, 0.7, None, 0.9])
    assert pred.unit_confidence(doc) == {1: 0.7}  # unit 3 has none; offset 0 is the start, not a boundary
    assert Prediction(units=[1, 3], confidence=[0.2, 0.6]).unit_confidence(doc) == {1: 0.2, 3: 0.6}
    assert Prediction(units=[1]).unit_confidence(doc) == {}
    with pytest.raises(HeadsegError, match="1 confidences for 2 boundaries"):
        Prediction(units=[1, 2], confidence=[0.5]).unit_confidence(doc)


class Confident(Method):
    """Cuts before every second unit, with a confidence that falls along the document."""

    name = "confident"

    def predict(self, doc, k=None):
        cuts = list(range(2, doc.n, 2))
        return Prediction(units=cuts, confidence=[round(1 - i / max(1, len(cuts)), 3) for i in range(len(cuts))])


def test_records_keep_one_confidence_per_boundary_and_the_hits_read_them(tmp_path):
    docs = [Document(id="a", units=list("abcdefgh"), boundaries=[2, 5]), Document(id="b", units=list("pqrs"), boundaries=[3])]
    store = ResultStore(tmp_path / "r.json")
    evaluate([Dataset("toy", "toy", docs)], [Confident()], store=store, quiet=True)
    recs = json.loads((tmp_path / "r.json").read_text())["records"]
    a = next(r for r in recs.values() if r["doc"] == "a")
    assert a["boundaries"] == [2, 4, 6] and a["confidence"] == [1.0, 0.667, 0.333]
    pairs, with_conf, without = confidence_hits(store, [Dataset("toy", "toy", docs)], "confident", "none")
    # a: 2 right (2), 4 right (5 within one), 6 right (5 within one); b: 2 right (3 within one)
    assert (with_conf, without) == (2, 0)
    assert pairs == [(1.0, True), (0.667, True), (0.333, True), (1.0, True)]


@pytest.mark.skipif(not SEG.is_dir(), reason="the shared segmentation data is not here")
def test_cli_calibration_table_is_the_results_files_boundaries_binned(tmp_path, capsys):
    out = tmp_path / "results.json"
    data = tmp_path / "choi"
    data.mkdir()
    for f in sorted(SEG.iterdir())[:6]:
        (data / f.name).write_bytes(f.read_bytes())
    assert main(["evaluate", str(data), "--method", "headseg,even", "--calibration", "--json", "--quiet",
                 "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {"summaries", "calibration"} and set(printed["calibration"]) == {"headseg"}
    table = printed["calibration"]["headseg"]
    results = json.loads(out.read_text())
    ref = {d: info["boundaries"] for d, info in next(iter(results["datasets"].values()))["documents"].items()}
    recs = [r for r in results["records"].values() if r["method"] == "headseg"]
    assert table["documents"] == len(recs) == 6 and table["documents_without"] == 0
    # recomputed from the stored boundaries, their confidences and the references, without the library
    found = [(c, any(abs(b - r) <= 1 for r in ref[rec["doc"]])) for rec in recs
             for b, c in zip(rec["boundaries"], rec["confidence"])]
    assert found and all(0 <= c <= 1 for c, _ in found)
    assert sum(b["boundaries"] for b in table["bins"]) == len(found)
    for b in table["bins"]:
        lo = float(b["label"].split("–")[0])
        inside = [(c, r) for c, r in found if lo <= c < lo + 0.1 or (lo == 0.9 and c == 1.0)]
        assert b["boundaries"] == len(inside)
        assert b["confidence"] == pytest.approx(sum(c for c, _ in inside) / len(inside))
        assert b["right"] == pytest.approx(sum(r for _, r in inside) / len(inside))
    # the text form prints the same table
    assert main(["evaluate", str(data), "--method", "headseg", "--calibration", "--quiet", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "confidence of headseg's boundaries" in text and "(6 documents with confidences)" in text
    first = table["bins"][-1]
    assert f"| {first['label']} | {first['boundaries']} | {first['confidence']:.3f} | {first['right']:.3f} |" in text


def test_a_hand_edited_record_of_bad_confidences_counts_as_without(tmp_path):
    docs = [Document(id="a", units=list("abcdefgh"), boundaries=[2, 5])]
    store = ResultStore(tmp_path / "r.json")
    evaluate([Dataset("toy", "toy", docs)], [Confident()], store=store, quiet=True)
    rec = next(iter(store.records.values()))
    for bad in (["x", 0.5, 0.2], [0.5, 0.2], [2.0, 0.5, 0.2], [True, 0.5, 0.2], "0.5"):
        rec["confidence"] = bad
        assert confidence_hits(store, [Dataset("toy", "toy", docs)], "confident", "none") == ([], 0, 1)
    rec["confidence"] = [None, 0.5, 1]
    assert confidence_hits(store, [Dataset("toy", "toy", docs)], "confident", "none") == ([(0.5, True), (1.0, True)], 1, 0)


class Miscounted(Method):
    """Gives one confidence too few: that document's failure, not the run's."""

    name = "miscounted"

    def predict(self, doc, k=None):
        return Prediction(units=[1, 2], confidence=[0.5])


def test_a_method_with_one_confidence_too_few_fails_that_document_only(tmp_path):
    docs = [Document(id="a", units=list("abcd"), boundaries=[2]), Document(id="b", units=list("pqrs"), boundaries=[1])]
    store = ResultStore(tmp_path / "r.json")
    (summary,) = evaluate([Dataset("toy", "toy", docs)], [Miscounted()], store=store, quiet=True)
    assert (summary.ok, summary.failed) == (0, 2)
    assert all("1 confidences for 2 boundaries" in r["error"] for r in store.records.values())


def test_the_diagram_is_a_png_marked_as_headsegs():
    import io

    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.image
    import matplotlib.pyplot as plt

    from headseg.segmenter.evaluation.calibration import is_reliability_png, reliability_png

    table = [ReliabilityBin("0.1–0.2", 40, 0.15, 0.2), ReliabilityBin("0.8–0.9", 50, 0.85, 0.9)]
    png = reliability_png({"headseg": table, "another": table[:1]})
    assert matplotlib.image.imread(io.BytesIO(png)).shape[:2] == (600, 600)  # 5 inches at 120 dpi
    assert is_reliability_png(png[:4096])
    fig = plt.figure()
    other = io.BytesIO()
    fig.savefig(other, format="png")  # a PNG headseg did not draw
    plt.close(fig)
    assert not is_reliability_png(other.getvalue()[:4096]) and not is_reliability_png(b"not a png")
    # a library drawing leaves its host's matplotlib alone: its backend and its open figures
    before = matplotlib.get_backend()
    try:
        matplotlib.use("svg")
        kept = plt.figure()
        reliability_png({"headseg": table})
        assert matplotlib.get_backend() == "svg" and plt.get_fignums() == [kept.number]
        plt.close(kept)
    finally:
        matplotlib.use(before)


@pytest.mark.skipif(not SEG.is_dir(), reason="the shared segmentation data is not here")
def test_cli_draws_the_diagram_and_replaces_only_its_own(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    from headseg.segmenter.evaluation.calibration import is_reliability_png

    data = tmp_path / "choi"
    data.mkdir()
    for f in sorted(SEG.iterdir())[:4]:
        (data / f.name).write_bytes(f.read_bytes())
    out, png = tmp_path / "results.json", tmp_path / "diagram.png"
    args = ["evaluate", str(data), "--method", "headseg", "--quiet", "--out", str(out)]
    assert main(args + ["--calibration-png", str(png)]) == 0
    assert is_reliability_png(png.read_bytes()[:4096])
    assert "confidence of headseg's boundaries" in capsys.readouterr().out  # the table comes with it
    assert main(args + ["--calibration-png", str(png)]) == 0  # its own diagram is replaced
    # a file headseg did not write is refused before any work, and kept; --force replaces it
    mine = tmp_path / "mine.png"
    mine.write_bytes(b"\x89PNG my own picture")
    fresh = tmp_path / "fresh.json"
    assert main(["evaluate", str(data), "--method", "headseg", "--quiet", "--out", str(fresh),
                 "--calibration-png", str(mine)]) == 2
    assert mine.read_bytes() == b"\x89PNG my own picture" and not fresh.exists()
    assert "--calibration-png" in capsys.readouterr().err
    assert main(args + ["--calibration-png", str(mine), "--force"]) == 0 and is_reliability_png(mine.read_bytes()[:4096])
    # standard output and the results file itself are refused
    assert main(args + ["--calibration-png", "-"]) == 2
    assert main(args + ["--calibration-png", str(out)]) == 2
    assert json.loads(out.read_text())["format"]  # still the results file
    # without matplotlib: one line naming the extra, exit 2, before any work
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    capsys.readouterr()
    assert main(["evaluate", str(data), "--method", "headseg", "--quiet", "--out", str(tmp_path / "none.json"),
                 "--calibration-png", str(tmp_path / "none.png")]) == 2
    err = capsys.readouterr().err
    assert "plots" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "none.png").exists()
