"""Harness: failure handling, incremental and resumable results, k modes, the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from headseg.cli import main
from headseg.evaluation import HeadsegMethod
from headseg.segmenter.evaluation.baselines import EvenMethod, RandomMethod
from headseg.segmenter.evaluation.harness import Dataset, ResultStore, evaluate, format_markdown, format_tables
from headseg.segmenter.evaluation.loaders import Document, iter_documents
from headseg.segmenter.evaluation.methods import Method, Prediction
from headseg.segmenter.evaluation.metrics import score_document

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "eval"


def _docs():
    return [
        Document(id="a", units=["x1", "x2", "y1", "y2", "y3", "z1"], boundaries=[2, 5]),
        Document(id="b", units=["p", "q", "r", "s"], boundaries=[1]),
        Document(id="c", units=["only"], boundaries=[]),
    ]


class Scripted(Method):
    """Returns fixed char offsets; fails on document 'b'; counts its calls."""

    name = "scripted"
    takes_k = True

    def __init__(self):
        super().__init__()
        self.calls = []

    def predict(self, doc, k=None):
        self.calls.append((doc.id, k))
        if doc.id == "b":
            raise RuntimeError("library exploded\nsecond line")
        # text "x1\nx2\ny1...": offset 5 is the newline after "x2", nearest to unit 2's start (6)
        return Prediction(chars=[5] if doc.n > 2 else [])


class NoK(Method):
    name = "nok"
    takes_k = False

    def __init__(self):
        super().__init__()
        self.calls = 0

    def predict(self, doc, k=None):
        assert k is None
        self.calls += 1
        return Prediction(units=[1] if doc.n > 1 else [])


def test_failure_is_recorded_and_run_continues(tmp_path):
    out = tmp_path / "r.json"
    m = Scripted()
    store = ResultStore(out)
    [s] = evaluate([Dataset("set", "x", _docs())], [m], store=store, quiet=True)
    assert (s.ok, s.failed, s.documents) == (2, 1, 3)
    assert s.errors == [("RuntimeError: library exploded", 1)]
    data = json.loads(out.read_text())
    recs = data["records"]
    assert recs["set|b|scripted|none"]["status"] == "failed"
    a = recs["set|a|scripted|none"]
    assert a["status"] == "ok" and a["boundaries"] == [2]
    # Scores stored equal an independent recomputation on the same boundaries.
    assert a["scores"] == score_document([2, 5], [2], 6).to_dict()
    # The summary is the macro mean of the two finished documents.
    expect = (score_document([2, 5], [2], 6).pk + score_document([], [], 1).pk) / 2
    assert s.metrics["pk"][0] == pytest.approx(expect)
    assert "scripted failed on 1 document(s): RuntimeError: library exploded" in format_tables([s])
    assert "| scripted | - | 2/1 |" in format_markdown([s])


def test_rerun_skips_done_and_retries_failed(tmp_path):
    out = tmp_path / "r.json"
    evaluate([Dataset("set", "x", _docs())], [Scripted()], store=ResultStore(out), quiet=True)
    m2 = Scripted()
    evaluate([Dataset("set", "x", _docs())], [m2], store=ResultStore(out), quiet=True)
    assert m2.calls == [("b", None)]  # only the failed document ran again
    # A changed document (same id, new reference) is not served from the cache.
    docs = _docs()
    docs[0] = Document(id="a", units=["x1", "x2", "y1", "y2", "y3", "z1"], boundaries=[3])
    m3 = Scripted()
    evaluate([Dataset("set", "x", docs)], [m3], store=ResultStore(out), quiet=True)
    assert ("a", None) in m3.calls


def test_oracle_k_given_only_to_methods_that_take_it_and_shared_records(tmp_path):
    out = tmp_path / "r.json"
    s, n = Scripted(), NoK()
    evaluate([Dataset("set", "x", _docs())], [s, n], store=ResultStore(out), quiet=True)
    assert n.calls == 3
    s2, n2 = Scripted(), NoK()
    sums = evaluate([Dataset("set", "x", _docs())], [s2, n2], oracle_k=True, store=ResultStore(out), quiet=True)
    assert sorted(s2.calls) == [("a", 3), ("b", 2), ("c", 1)]
    assert n2.calls == 0  # its records without k are the same computation
    assert {x.method: x.mode for x in sums} == {"scripted": "oracle", "nok": "none"}


def test_setup_failure_fails_every_document_with_the_reason(monkeypatch):
    # A missing segmenter API (here: blocked import) is a per-document failure, not a crash.
    monkeypatch.setitem(sys.modules, "headseg.api", None)
    m = HeadsegMethod()
    [s] = evaluate([Dataset("set", "x", _docs())], [m], quiet=True)
    assert (s.ok, s.failed) == (0, 3)
    [(reason, count)] = s.errors
    assert count == 3 and reason.startswith("setup: MethodUnavailable: headseg's segmenter API is not available")


def test_random_and_even_baselines():
    doc = Document(id="d", units=[f"u{i}" for i in range(10)], boundaries=[5])
    assert EvenMethod().predict(doc, 3).units == [3, 7]
    assert EvenMethod(length=4).predict(doc).units == [4, 8]
    r = RandomMethod(seed=1)
    a, b = r.predict(doc, 4).units, r.predict(doc, 4).units
    assert a == b and len(a) == 3 and all(1 <= x <= 9 for x in a)
    assert RandomMethod(seed=2).predict(doc, 4).units != a or RandomMethod(seed=3).predict(doc, 4).units != a


def test_results_file_must_be_ours(tmp_path):
    from headseg.analysis.errors import InputError

    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(InputError, match="not a headseg evaluation results file"):
        ResultStore(bad)


def test_cli_evaluate_table_and_out(tmp_path, capsys):
    out = tmp_path / "res.json"
    rc = main(["evaluate", str(FIX / "choi_dir"), str(FIX / "docs.jsonl"), "--method", "even,random",
               "--oracle-k", "--out", str(out), "--quiet"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "choi_dir  (3 documents)" in text and "docs.jsonl  (3 documents)" in text
    data = json.loads(out.read_text())
    # even with k=2 on 3 units puts the boundary at round(1.5) = 2, the reference: perfect.
    rec = data["records"]["choi_dir|1|even|oracle"]
    assert rec["boundaries"] == [2] and rec["scores"]["pk"] == 0.0 and rec["k"] == 2


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path / "missing"), "--method", "even"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("headseg: error: ") and "no such file" in err and err.count("\n") == 1
    assert main(["evaluate", str(FIX / "choi_dir"), "--method", "even,magic"]) == 2  # a bad flag (issue 23)
    assert "unknown method 'magic'" in capsys.readouterr().err
    assert main(["evaluate", str(FIX / "wiki_bad.txt"), "--method", "even"]) == 2
    assert "wiki_bad.txt:3: malformed section header" in capsys.readouterr().err


def test_cli_json_summary(capsys):
    rc = main(["evaluate", str(FIX / "dialogues"), "--method", "even", "--json", "--quiet"])
    assert rc == 0
    [s] = json.loads(capsys.readouterr().out)
    docs = list(iter_documents(FIX / "dialogues"))
    # even without k uses segments of 10 units: no boundary in these short dialogues.
    expect = sum(score_document(d.boundaries, [], d.n).pk for d in docs) / len(docs)
    assert s["metrics"]["pk"]["mean"] == pytest.approx(expect)
    assert (s["ok"], s["failed"]) == (2, 0)


def test_interrupted_run_keeps_finished_records(tmp_path):
    class Interrupting(Scripted):
        def predict(self, doc, k=None):
            if doc.id == "b":
                raise KeyboardInterrupt
            return super().predict(doc, k)

    out = tmp_path / "r.json"
    with pytest.raises(KeyboardInterrupt):
        evaluate([Dataset("set", "x", _docs())], [Interrupting()], store=ResultStore(out), quiet=True)
    recs = json.loads(out.read_text())["records"]
    assert list(recs) == ["set|a|scripted|none"] and recs["set|a|scripted|none"]["status"] == "ok"


def test_redo_reruns_cached_results(tmp_path):
    out = tmp_path / "r.json"
    evaluate([Dataset("set", "x", _docs())], [NoK()], store=ResultStore(out), quiet=True)
    again = NoK()
    evaluate([Dataset("set", "x", _docs())], [again], store=ResultStore(out), quiet=True)
    assert again.calls == 0
    evaluate([Dataset("set", "x", _docs())], [again], store=ResultStore(out), quiet=True, redo=True)
    assert again.calls == 3


@pytest.mark.parametrize("edit", [
    lambda d: d.update(records=[]),
    lambda d: d.update(datasets="x"),
    lambda d: d.update(methods=None),
    lambda d: d["records"].update({"choi_dir|1|even|none": 5}),
    lambda d: d["datasets"]["choi_dir"].update(documents=[]),
    lambda d: d["methods"].update(even=[1]),
])
def test_audit2_a_results_file_of_the_wrong_shape_is_one_line(tmp_path, capsys, edit):
    # A results file with the right "format" but a section of another shape (edited by hand, or by another
    # tool) died with an AttributeError/TypeError traceback on the re-run.
    out = tmp_path / "res.json"
    args = ["evaluate", str(FIX / "choi_dir"), "--method", "even", "--out", str(out), "--quiet"]
    assert main(args) == 0
    capsys.readouterr()
    data = json.loads(out.read_text())
    edit(data)
    out.write_text(json.dumps(data))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"headseg: error: {out}: ") and err.count("\n") == 1 and "--out" in err
    assert json.loads(out.read_text()) == data  # not rewritten


def test_audit2_a_stored_record_missing_its_fields_is_recomputed_not_a_traceback(tmp_path, capsys):
    out = tmp_path / "res.json"
    args = ["evaluate", str(FIX / "choi_dir"), "--method", "even", "--out", str(out), "--json", "--quiet"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    data = json.loads(out.read_text())
    for field in ("boundaries", "seconds", "pred_segments", "scores"):
        del data["records"][f"choi_dir|{1 + len(field) % 3}|even|none"][field]
    out.write_text(json.dumps(data))
    assert main(args) == 0
    again = json.loads(capsys.readouterr().out)
    drop = lambda s: {k: v for k, v in s.items() if k != "docs_per_s"}  # noqa: E731
    assert [drop(s) for s in again] == [drop(s) for s in first]
    assert json.loads(out.read_text())["records"] .keys() == data["records"].keys()


def test_audit2_the_same_data_set_twice_is_refused_before_any_work(tmp_path, capsys):
    # `evaluate DIR DIR` (or the same folder by two spellings) scored it twice under two names; the error the
    # docstring promised came only for a third copy, and as exit 1.
    d = str(FIX / "choi_dir")
    for second in (d, str(FIX / "choi_dir" / ".." / "choi_dir"), d + "/"):
        assert main(["evaluate", d, second, "--method", "even", "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "given twice" in err


def test_audit2_a_missing_model_or_unreadable_profile_is_one_line_not_a_table_of_failures(tmp_path, capsys):
    # `--model` naming no model or `--profile` naming no profile became a "setup" failure on every document and
    # exit 0; they are now the model (3) and profile (4) errors, found before the data is read.
    bad_profile = tmp_path / "heads.json"
    bad_profile.write_text("not json")
    data = str(FIX / "choi_dir")
    for extra, code, words in (
        (["--model", str(tmp_path / "no-model")], 3, "no-model"),
        (["--profile", str(bad_profile)], 4, "cannot read head profile"),
        (["--profile", str(tmp_path / "missing.json")], 4, "no such head profile"),
    ):
        assert main(["evaluate", data, "--method", "even,headseg", "--quiet", *extra]) == code
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and words in err, err
    # a method that takes no model is not held up by one
    assert main(["evaluate", data, "--method", "even", "--quiet", "--model", str(tmp_path / "no-model")]) == 0
