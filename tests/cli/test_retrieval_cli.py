"""`headseg retrieval` and the new segmentation flags: round trips, one-line errors (exit 2), a tiny run."""

from __future__ import annotations

import json

import pytest

from headseg.cli import build_parser, main
from headseg.segmenter.options import SegmentOptions

NO_MODEL = ["--model", "/nonexistent/model"]


def _data(root, questions=None):
    (root / "corpora").mkdir(parents=True)
    (root / "corpora" / "a.md").write_text("Apples are red fruit. " * 20 + "\n\nTrains run on rails. " * 20,
                                           encoding="utf-8")
    (root / "corpora" / "b.txt").write_text("The sea is deep and blue. " * 15, encoding="utf-8")
    qs = questions if questions is not None else [
        {"question": "What colour are apples?", "corpus": "a",
         "references": [{"start": 0, "end": 21, "text": "Apples are red fruit."}]},
        {"question": "What is the sea like?", "corpus": "b", "references": [{"start": 0, "end": 25}]},
    ]
    (root / "questions.jsonl").write_text("\n".join(q if isinstance(q, str) else json.dumps(q) for q in qs) + "\n",
                                          encoding="utf-8")
    return root


def _run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("command", ["segment", "retrieval"])
def test_new_flags_round_trip(command):
    args = build_parser().parse_args([command, "x", "--max-tokens", "200", "--target-tokens", "150"])
    opts = SegmentOptions.from_args(args)
    assert (opts.max_tokens, opts.target_tokens) == (200, 150)
    assert opts.settings()["target_tokens"] == 150
    assert SegmentOptions.from_args(build_parser().parse_args([command, "x"])).size_target is None


def test_overlap_flag_where_chunks_are_written():
    # retrieval scores overlapped chunks; segment writes them as its records (issue 49: --overlap there too)
    opts = SegmentOptions.from_args(build_parser().parse_args(["retrieval", "x", "--overlap", "2"]))
    assert opts.overlap == 2 and opts.settings()["overlap"] == 2
    opts = SegmentOptions.from_args(build_parser().parse_args(["segment", "x", "--overlap", "2"]))
    assert opts.overlap == 2


@pytest.mark.parametrize("argv, msg", [
    (["--max-tokens", "100", "--target-tokens", "200"], "--target-tokens (200) is larger than --max-tokens (100)"),
    (["--overlap", "-1"], "--overlap must be a non-negative integer"),
    (["--chunker", "nope"], "--chunker: unknown chunker 'nope'"),
    (["--chunker", "fixed"], "need --max-tokens"),
    (["--k", "0"], "--k must be at least 1"),
])
def test_retrieval_argument_errors(tmp_path, capsys, argv, msg):
    rc, _, err = _run(["retrieval", str(_data(tmp_path)), *argv, *NO_MODEL], capsys)
    assert rc == 2 and err.count("\n") == 1 and msg in err, err


@pytest.mark.parametrize("questions, msg", [
    (["{not json"], "not a question record"),
    ([{"question": "q", "corpus": "zzz", "references": [{"start": 0, "end": 3}]}], "no question about the corpora"),
    ([{"question": "q", "corpus": "a", "references": [{"start": 0, "end": 6, "text": "Bananas"}]}],
     "is not the text of corpus 'a'"),
    ([{"question": "q", "corpus": "a", "references": [{"start": 5, "end": 99999}]}], "references must be"),
    ([{"question": "q", "corpus": "a", "references": "0-5"}], "not a question record"),
])
def test_retrieval_bad_data_is_one_line_exit_2(tmp_path, capsys, questions, msg):
    rc, _, err = _run(["retrieval", str(_data(tmp_path, questions)), "--chunker", "fixed", "--max-tokens", "32",
                       *NO_MODEL], capsys)
    assert rc == 2 and err.count("\n") == 1 and msg in err, err


def test_retrieval_missing_or_undecodable_data(tmp_path, capsys):
    rc, _, err = _run(["retrieval", str(tmp_path / "missing"), *NO_MODEL], capsys)
    assert rc == 2 and "expected corpora/ and questions.jsonl" in err
    root = _data(tmp_path / "d")
    (root / "corpora" / "c.md").write_bytes(b"\xff\xfe\xfa bad")
    rc, _, err = _run(["retrieval", str(root), *NO_MODEL], capsys)
    # headseg's text reader: the UTF-16 byte order mark is honoured, and the file that fails is named
    assert rc == 2 and err.count("\n") == 1 and f"{root / 'corpora' / 'c.md'}: not valid utf-16-le" in err


def test_retrieval_fixed_windows_end_to_end(tmp_path, capsys):
    from headseg.analysis.model import embedded_model_path
    from headseg.analysis.tokenizer import Tokenizer
    from headseg.segmenter.evaluation.retrieval import load_retrieval, question_scores

    root = _data(tmp_path)
    rc, out, err = _run(["retrieval", str(root), "--chunker", "fixed", "--max-tokens", "16", "--k", "50",
                         "--json"], capsys)
    assert rc == 0, err
    got = json.loads(out)
    fixed = got["chunkers"]["fixed"]
    assert got["questions"] == 2 and set(fixed["per_corpus"]) == {"a", "b"}
    # k = 50 retrieves every chunk of both corpora: recall 1, and precision is the reference's share
    # of all the text (independently: the chunks tile each corpus, so their lengths sum to the corpora's)
    rs = load_retrieval(root)
    total = sum(len(t) for t in rs.corpora.values())
    tok = Tokenizer.from_dir(embedded_model_path())
    n_chunks = sum(-(-len(tok.encode(t)[0]) // 16) for t in rs.corpora.values())
    assert fixed["chunks"] == n_chunks
    for q, name in zip(rs.questions, ("a", "b")):
        want = question_scores([(0, len(rs.corpora[name]))], q.references, foreign=total - len(rs.corpora[name]))
        assert fixed["per_corpus"][name]["recall"] == pytest.approx(1.0)
        assert fixed["per_corpus"][name]["precision"] == pytest.approx(want["precision"])
        assert fixed["per_corpus"][name]["iou"] == pytest.approx(want["iou"])


def test_audit2_an_unreadable_profile_is_found_before_the_embedder_runs(tmp_path, capsys, monkeypatch):
    # --profile was read only when the headseg chunker was built, after every question had been embedded.
    import headseg.segmenter.evaluation.embeddings as embeddings

    def no_embedder(*a, **k):
        raise AssertionError("the embedder was loaded before --profile was checked")

    monkeypatch.setattr(embeddings, "MeanPooledEmbedder", no_embedder)
    bad = tmp_path / "heads.json"
    bad.write_text("[1, 2]")
    rc, out, err = _run(["retrieval", str(_data(tmp_path / "d")), "--profile", str(bad)], capsys)
    assert rc == 4 and out == "" and err.count("\n") == 1 and "not a valid head profile" in err


def test_retrieval_tree_chunker_end_to_end(tmp_path, capsys, tiny_bert_dir):
    """--chunker tree indexes the leaves (flat headseg's chunks, exactly) and returns their parents."""
    root = _data(tmp_path)
    rc, out, err = _run(["retrieval", str(root), "--chunker", "tree,headseg", "--max-tokens", "24", "--k", "50",
                         "--json", "--model", str(tiny_bert_dir), "--backend", "torch", "--quiet"], capsys)
    assert rc == 0, err
    got = json.loads(out)["chunkers"]
    tree, flat = got["tree"], got["headseg"]
    assert tree["chunks"] == flat["chunks"]  # the same leaves are indexed
    # every leaf is retrieved at k = 50, so every parent comes back: all of each corpus is covered
    assert tree["overall"]["recall"] == pytest.approx(1.0) and flat["overall"]["recall"] == pytest.approx(1.0)
    assert tree["mean_chunk_tokens"] > flat["mean_chunk_tokens"]  # parents are larger than the leaves
