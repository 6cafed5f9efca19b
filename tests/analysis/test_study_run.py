"""End-to-end study runs on a tiny random model: outputs, resume, errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from headseg.analysis.capture import TorchBackend
from headseg.analysis.errors import InputError, ProfileError
from headseg.analysis.profile import HeadProfile
from headseg.analysis.similarity import context_similarity
from headseg.analysis.study import Study, StudyConfig, run_study

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "study"
CORPUS = [str(FIX / "docs"), str(FIX / "corpus.jsonl")]


def cfg(out, **kw) -> StudyConfig:
    base = dict(corpus=CORPUS, out=str(out), samples=12, seq_len=32, batch_size=4, top_fraction=0.1,
                min_heads=3, max_heads=5, figures=False, quiet=True, checkpoint_every=1)
    base.update(kw)
    return StudyConfig(**base)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, tiny_bert):
    out = tmp_path_factory.mktemp("study") / "full"
    report = run_study(cfg(out, figures=True), tiny_bert)
    return out, report


def test_the_figures_leave_the_hosts_matplotlib_alone(full_run, tmp_path):
    # drawn by a library call: the caller's backend and open figures stay as they were
    matplotlib = pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from headseg.analysis.study.report import make_figures

    _, report = full_run
    before = matplotlib.get_backend()
    try:
        matplotlib.use("svg")
        kept = plt.figure()
        names = make_figures(report, tmp_path)
        assert matplotlib.get_backend() == "svg" and plt.get_fignums() == [kept.number]
        assert names and all((tmp_path / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in names)
        plt.close(kept)
    finally:
        matplotlib.use(before)


def test_outputs_and_profile(full_run, tiny_bert, tiny_roberta):
    out, report = full_run
    for name in ("report.json", "report.md", "heads.json", "run.json", "checkpoint.npz", "fig_distance.png"):
        assert (out / name).is_file(), name
    assert (out / "fig_distance.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rep = json.loads((out / "report.json").read_text())
    assert rep["windows"] == 12 and rep["sampling"]["drawn"] == 12
    assert rep["model"]["fingerprint"] == tiny_bert.info.fingerprint
    assert len(rep["variants"]["quantile"]["within_sentence"]) == 12  # 3 layers x 4 heads
    assert {c["verdict"] for c in rep["claims"]} <= {"reproduced", "partly", "not reproduced"}
    assert len(rep["claims"]) == 6
    prof = HeadProfile.load(out / "heads.json")
    prof.check_model(tiny_bert.info)
    with pytest.raises(ProfileError):
        prof.check_model(tiny_roberta.info)
    assert 3 <= len(prof.heads) <= 5
    assert math.isclose(sum(prof.weights), 1.0, rel_tol=1e-9)
    assert prof.parameters["samples"] == 12 and prof.corpus
    sel = rep["selection"]["selected"]
    assert [(s["layer"], s["head"]) for s in sel] == prof.heads
    md = (out / "report.md").read_text()
    assert "| claim | this run | verdict |" in md and "fig_distance.png" in md


def test_counts_match_independent_recomputation(tmp_path, tiny_bert):
    """The accumulator agrees with capture + context_similarity + sorting, window by window."""
    study = Study(cfg(tmp_path / "x", samples=5, batch_size=2), tiny_bert)
    study.run()
    backend = TorchBackend(tiny_bert)
    pairs_total = 0
    high_by_head = np.zeros(12, np.int64)
    same_by_head = np.zeros(12, np.int64)
    from headseg.analysis.study.corpus import build_window

    for d, s in study.plan:
        w = build_window(study.docs[d], s, study.width, tiny_bert.tokenizer, 32)
        acts = backend.capture([w], attention=True)
        c = w.content
        sim = context_similarity(acts.z[0][:, c])  # [N, C, C]
        iu, ju = np.triu_indices(len(c), 1)
        k = math.ceil(0.1 * len(iu))
        pairs_total += len(iu)
        for n in range(12):
            top = np.argsort(-sim[n][iu, ju], kind="stable")[:k]
            high_by_head[n] += k
            sid = w.sentence_ids[c]
            same_by_head[n] += int((sid[iu[top]] == sid[ju[top]]).sum())
    acc = study.acc
    assert int(acc["pairs_all"].sum()) == pairs_total
    np.testing.assert_array_equal(acc["high_all"][0].sum(-1), high_by_head)
    np.testing.assert_array_equal(acc["high_same"][0].sum(-1), same_by_head)


def test_resume_gives_identical_report(full_run, tmp_path, tiny_bert):
    out_full, _ = full_run
    out = tmp_path / "resumed"
    assert run_study(cfg(out), tiny_bert, stop_after_batches=2) is None
    meta = json.loads(str(np.load(out / "checkpoint.npz")["meta"]))
    assert meta["batches_done"] == 2 and meta["batches_total"] == 3
    assert not (out / "report.json").exists()
    run_study(cfg(out, resume=True), tiny_bert)
    assert (out / "report.json").read_bytes() == (out_full / "report.json").read_bytes()
    assert (out / "heads.json").read_bytes() == (out_full / "heads.json").read_bytes()
    run_info = json.loads((out / "run.json").read_text())
    assert run_info["resumed_from_batch"] == 2 and run_info["batches_this_session"] == 1


def test_existing_out_dir_is_refused_and_untouched(tmp_path, tiny_bert):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="not empty.*--resume.*--force"):
        run_study(cfg(out), tiny_bert)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "keep me"
    run_study(cfg(out, force=True), tiny_bert)
    assert (out / "notes.txt").read_text() == "keep me"  # --force only rewrites the study's own files
    assert (out / "report.json").is_file()


def test_resume_refuses_other_model_and_other_settings(tmp_path, tiny_bert, tiny_roberta):
    out = tmp_path / "other"
    run_study(cfg(out), tiny_roberta, stop_after_batches=1)
    before = (out / "checkpoint.npz").read_bytes()
    with pytest.raises(ProfileError, match="made for model tiny-roberta"):
        run_study(cfg(out, resume=True), tiny_bert)
    with pytest.raises(InputError, match=r"made with other parameters \(samples 12 then, 8 now\); use the same"):
        run_study(cfg(out, resume=True, samples=8), tiny_roberta)
    assert (out / "checkpoint.npz").read_bytes() == before
    # a finished profile of another model in DIR is refused too
    out2 = tmp_path / "other2"
    run_study(cfg(out2), tiny_roberta)
    with pytest.raises(ProfileError, match="profile for another model"):
        run_study(cfg(out2, resume=True), tiny_bert)


def test_bad_corpus_errors(tmp_path, tiny_bert):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(InputError, match="corpus is empty"):
        Study(cfg(tmp_path / "o1", corpus=[str(empty)]), tiny_bert)
    with pytest.raises(InputError, match="no such file"):
        Study(cfg(tmp_path / "o2", corpus=[str(tmp_path / "nope.txt")]), tiny_bert)
    with pytest.raises(InputError, match="seq-len"):
        Study(cfg(tmp_path / "o3", seq_len=1000), tiny_bert)
    assert not (tmp_path / "o1").exists()


def test_cli_errors_are_one_line(tmp_path, embedded, capsys):
    from headseg.cli import main

    empty = tmp_path / "empty.txt"
    empty.write_text("")
    rc = main(["study", str(empty), "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == InputError.exit_code
    assert err.startswith("headseg: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_report_only_from_partial_checkpoint(tmp_path, tiny_bert):
    out = tmp_path / "partial"
    run_study(cfg(out), tiny_bert, stop_after_batches=2)
    report = Study(cfg(out, resume=True), tiny_bert).report_from_checkpoint()
    assert report["batches_done"] == 2 and report["windows"] == 8
    assert json.loads((out / "report.json").read_text())["windows"] == 8
    with pytest.raises(InputError, match="no checkpoint.npz"):
        Study(cfg(tmp_path / "none", resume=True), tiny_bert).report_from_checkpoint()


def test_shards_merged_equal_the_single_run(full_run, tmp_path, tiny_bert):
    """Two shards of batches, accumulated apart and merged, give the single run's accumulator."""
    from headseg.analysis.study.stats import StudyAccumulator

    study = Study(cfg(tmp_path / "shards"), tiny_bert)
    n = len(study.batches)
    assert n == 3
    merged = StudyAccumulator(**study.acc.settings())
    for lo, hi in ((0, 1), (1, n)):
        merged.merge(study.accumulate_shard(lo, hi))
    with np.load(full_run[0] / "checkpoint.npz") as f:
        for k, v in merged.arrays.items():
            if v.dtype.kind == "f":
                np.testing.assert_allclose(v, f[k], rtol=1e-9, err_msg=k)
            else:
                np.testing.assert_array_equal(v, f[k], err_msg=k)


def test_audit2_resume_never_writes_into_a_folder_without_a_checkpoint(tmp_path, tiny_bert):
    # --resume let a non-empty folder through even when it held no checkpoint: the run started afresh and
    # replaced the user's report.md (and wrote heads.json, report.json ... beside their files) without --force.
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.md").write_text("my own notes")
    with pytest.raises(InputError, match="no checkpoint.npz.*--force"):
        run_study(cfg(out, resume=True), tiny_bert)
    assert sorted(p.name for p in out.iterdir()) == ["report.md"]
    assert (out / "report.md").read_text() == "my own notes"
    # an empty or new folder is fine to "resume" (a run stopped before its first checkpoint left nothing)
    (tmp_path / "empty").mkdir()
    run_study(cfg(tmp_path / "empty", resume=True), tiny_bert, stop_after_batches=1)
    assert run_study(cfg(tmp_path / "empty", resume=True), tiny_bert)["windows"] == 12


@pytest.mark.parametrize("case", ["missing", "no text files", "report-only without checkpoint", "binary", "empty"])
def test_audit2_corpus_paths_are_checked_before_the_model_loads(tmp_path, capsys, monkeypatch, case):
    # A missing corpus path or a folder without text files was found only after the model had loaded (seconds).
    import headseg.cli.study as study_cli
    from headseg.cli import main

    def no_model(*a, **k):
        raise AssertionError("the model was loaded before the corpus was checked")

    monkeypatch.setattr(study_cli, "load_model", no_model)
    (tmp_path / "empty").mkdir()
    (tmp_path / "blob.txt").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "blank.txt").write_text("  \n\n")
    corpus, extra, expect = {
        "missing": (tmp_path / "nope.txt", [], "no such file"),
        # a binary or empty corpus file was reported only after the model had loaded
        "binary": (tmp_path / "blob.txt", [], "blob.txt"),
        "empty": (tmp_path / "blank.txt", [], "the corpus is empty"),
        "no text files": (tmp_path / "empty", [], "no text files"),
        "report-only without checkpoint": (FIX / "docs", ["--report-only"], "no checkpoint.npz"),
    }[case]
    rc = main(["study", str(corpus), "--out", str(tmp_path / "o"), "--no-figures", "--quiet", *extra])
    err = capsys.readouterr().err
    assert rc == InputError.exit_code and err.count("\n") == 1 and expect in err, err
