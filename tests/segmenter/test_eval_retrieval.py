"""Retrieval evaluation: the benchmark's metric recomputed by hand, the loader's checks, the chunkers' spans."""

from __future__ import annotations

import json

import numpy as np
import pytest

from headseg.analysis.errors import InputError
from headseg.segmenter.evaluation.retrieval import (
    Question,
    RetrievalSet,
    chunk_all,
    evaluate_chunks,
    fixed_token_chunker,
    load_retrieval,
    question_scores,
)


def test_question_scores_by_hand():
    # references 10..20 and 30..40 (20 chars); retrieved 15..35 (20 chars) covers 15..20 and 30..35 = 10
    s = question_scores([(15, 35)], [(10, 20), (30, 40)])
    assert s["recall"] == pytest.approx(10 / 20)
    assert s["precision"] == pytest.approx(10 / 20)
    assert s["iou"] == pytest.approx(10 / (20 + 20 - 10))
    # overlapping references count once; a foreign chunk of 30 chars is retrieved and covers nothing
    s = question_scores([(0, 50)], [(10, 20), (15, 25)], foreign=30)
    assert s["recall"] == 1.0
    assert s["precision"] == pytest.approx(15 / 80)
    assert s["iou"] == pytest.approx(15 / (80 + 15 - 15))
    assert question_scores([(50, 60)], [(0, 10)]) == {"iou": 0.0, "recall": 0.0, "precision": 0.0}


def _toy():
    a = "apples are red. " * 5 + "trains run on rails. " * 5
    b = "the sea is blue. " * 4
    qs = (Question("an apple?", "a", ((0, 16),)), Question("a train?", "a", ((80, 101),)),
          Question("the sea?", "b", ((0, 17),)))
    return RetrievalSet({"a": a, "b": b}, qs)


def test_evaluate_chunks_top_k_over_one_index():
    rs = _toy()
    chunks = {"a": [(0, 80), (80, len(rs.corpora["a"]))], "b": [(0, len(rs.corpora["b"]))]}

    # a transparent embedder: one axis per topic word
    words = ("apple", "train", "sea")

    def embed(texts):
        v = np.array([[t.count(w) + (1e-3 if i == 0 else 0.0) for i, w in enumerate(words)] for t in texts], float)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    got = evaluate_chunks(rs, chunks, embed, k=1)
    assert got.chunks == 3
    # each question retrieves exactly the chunk of its topic: recall 1, precision = ref / chunk length
    want_p = [16 / 80, 21 / 105, 17 / 68]
    assert [q["recall"] for q in got.per_question] == [1.0, 1.0, 1.0]
    assert [q["precision"] for q in got.per_question] == pytest.approx(want_p)
    assert got.overall["iou"] == pytest.approx(np.mean(want_p))
    assert set(got.per_corpus) == {"a", "b"}
    # with k = 3 every chunk is retrieved: the foreign ones add length, not coverage
    k3 = evaluate_chunks(rs, chunks, embed, k=3)
    total = 80 + 105 + 68
    assert [q["precision"] for q in k3.per_question] == pytest.approx([16 / total, 21 / total, 17 / total])
    with pytest.raises(InputError):
        evaluate_chunks(rs, {"a": [(0, 0)], "b": [(0, 5)]}, embed)


def test_loader_checks_offsets(tmp_path):
    (tmp_path / "corpora").mkdir()
    (tmp_path / "corpora" / "c.md").write_text("Hello world. Bye.", encoding="utf-8")
    rec = {"question": "q", "corpus": "c", "references": [{"start": 0, "end": 5, "text": "Hello"}]}
    (tmp_path / "questions.jsonl").write_text(json.dumps(rec) + "\n", encoding="utf-8")
    rs = load_retrieval(tmp_path)
    assert rs.questions[0].references == ((0, 5),)
    rec["references"][0]["text"] = "Howdy"
    (tmp_path / "questions.jsonl").write_text(json.dumps(rec) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="not the text"):
        load_retrieval(tmp_path)
    with pytest.raises(InputError):
        load_retrieval(tmp_path / "missing")



@pytest.mark.parametrize("where", ["corpus", "questions"])
def test_audit2_a_binary_file_in_the_retrieval_set_is_refused(tmp_path, where):
    # The loader read the set with Path.read_text: a binary corpus that happened to decode (NUL and control
    # bytes) was chunked and scored as text, unlike every other input of headseg.
    (tmp_path / "corpora").mkdir()
    (tmp_path / "corpora" / "c.md").write_text("Hello world. Bye.", encoding="utf-8")
    rec = {"question": "q", "corpus": "c", "references": [{"start": 0, "end": 5}]}
    (tmp_path / "questions.jsonl").write_text(json.dumps(rec) + "\n", encoding="utf-8")
    assert load_retrieval(tmp_path).questions[0].references == ((0, 5),)
    target = tmp_path / ("corpora/c.md" if where == "corpus" else "questions.jsonl")
    target.write_bytes(b"Hello\x00\x01\x02world" if where == "corpus" else json.dumps(rec).encode() + b"\n\x00\x00")
    with pytest.raises(InputError, match="looks like a binary file") as e:
        load_retrieval(tmp_path)
    assert str(target) in str(e.value) and "\n" not in str(e.value)


def test_fixed_token_chunks_tile_the_text():
    from headseg.analysis.model import embedded_model_path
    from headseg.analysis.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_dir(embedded_model_path())
    text = "One two three four five six seven eight nine ten. " * 7
    chunk = fixed_token_chunker(16, lambda t: tokenizer.encode(t)[1])
    spans = chunk_all(RetrievalSet({"x": text}, ()), chunk)["x"]
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert all(len(tokenizer.encode(text[s:e])[0]) <= 16 for s, e in spans)


def _word_embedder(words):
    """A transparent embedder: one axis per word (its count), unit length."""
    def embed(texts):
        v = np.array([[t.count(w) + (1e-3 if i == 0 else 0.0) for i, w in enumerate(words)] for t in texts], float)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    return embed


def test_parent_child_scores_each_retrieved_parent_once_by_hand():
    """Two leaves of one parent retrieved: the parent is scored once; its size is the returned size."""
    a = "apples are red. apples fall. " + "trains run on rails. " * 4
    rs = RetrievalSet({"a": a}, (Question("apples?", "a", ((0, 15),)),))
    n = len(a)
    leaves = [(0, 16), (16, 29), (29, 50), (50, n)]
    parents = [(0, 29), (0, 29), (29, n), (29, n)]
    embed = _word_embedder(("apple", "train"))
    got = evaluate_chunks(rs, {"a": leaves}, embed, k=2, parents={"a": parents})
    # both apple leaves are the top 2; what comes back is (0, 29) alone: covered 15, retrieved 29
    (q,) = got.per_question
    assert q["recall"] == 1.0 and q["precision"] == pytest.approx(15 / 29) and q["iou"] == pytest.approx(15 / 29)
    assert got.chunks == 4 and got.mean_chunk_tokens == pytest.approx((29 + (n - 29)) / 2)  # distinct parents
    flat = evaluate_chunks(rs, {"a": leaves}, embed, k=2)
    assert flat.per_question[0]["precision"] == pytest.approx(15 / 29)  # the two leaves: 16 + 13 characters
    assert flat.mean_chunk_tokens == pytest.approx(n / 4)
    # a parent that does not contain its chunk, or one parent too few, is refused
    with pytest.raises(InputError, match="parent span that contains it"):
        evaluate_chunks(rs, {"a": leaves}, embed, parents={"a": [(16, 29)] + parents[1:]})
    with pytest.raises(InputError, match="parent span that contains it"):
        evaluate_chunks(rs, {"a": leaves}, embed, parents={"a": parents[:3]})


def test_tree_chunker_gives_each_leaf_its_parent_node(tiny_bert):
    from headseg.api import Segmenter
    from headseg.segmenter.evaluation.retrieval import headseg_tree_chunker

    from sample_texts import TOPICS_TEXT

    seg = Segmenter(model=tiny_bert, backend="torch", window_tokens=64)
    leaves, parents = headseg_tree_chunker(seg, max_tokens=40)(TOPICS_TEXT)
    r = seg.segment(TOPICS_TEXT, level="tree", max_tokens=40)
    assert leaves == [(s.start, s.end) for s in r.segments]
    by_span = {(n.start, n.end): n for n in r.nodes}
    for leaf, up in zip(leaves, parents):
        node = by_span[leaf]
        want = node if node.parent is None else r.nodes[node.parent]
        assert up == (want.start, want.end) and up[0] <= leaf[0] and leaf[1] <= up[1]
    assert any(up != leaf for leaf, up in zip(leaves, parents))  # the tree has a level above the leaves
