"""Baselines: depth scores by hand, embeddings against sentence-transformers, library output mapping."""

from __future__ import annotations

import numpy as np
import pytest

from headseg.segmenter.evaluation.baselines import (
    ChonkieMethod,
    EmbeddingCosineMethod,
    LangChainMethod,
    TextTilingMethod,
    _cached_embeddings,
)
from headseg.segmenter.evaluation.tiling import block_similarity, depth_scores, pick_boundaries
from headseg.segmenter.evaluation.loaders import Document

TOPICS = {
    "alpha": "The alpha orchestra played a slow symphony for the evening audience in the hall.",
    "beta": "The beta volcano erupted and hot lava flowed down toward the sleeping village.",
    "gamma": "The gamma tax reform changed how small companies report their yearly income.",
}


def _topic_doc(per=4, names=("alpha", "beta", "gamma")):
    units = []
    for name in names:
        for i in range(per):
            units.append(f"{TOPICS[name]} Sentence {i} of {name}.")
    return Document(id="t", units=units, boundaries=[per * j for j in range(1, len(names))])


def test_depth_scores_by_hand():
    sim = np.array([0.9, 0.5, 0.8, 0.3, 0.7])
    # gap 1: (0.9 - 0.5) + (0.8 - 0.5); gap 3: (0.8 - 0.3) + (0.7 - 0.3); peaks have depth 0
    assert depth_scores(sim) == pytest.approx([0.0, 0.7, 0.0, 0.9, 0.0])
    assert pick_boundaries(sim, 2) == [4]
    assert pick_boundaries(sim, 3) == [2, 4]
    assert pick_boundaries(sim, 1) == []
    # valleys 0.7 and 0.9: cutoff mean - std/2 = 0.8 - 0.05 keeps only gap 3
    assert pick_boundaries(sim, None) == [4]
    assert pick_boundaries(np.array([]), 3) == []


def test_block_similarity_matches_naive():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(9, 5))
    for w in (1, 3):
        got = block_similarity(emb, w)
        for g in range(8):
            left = emb[max(0, g + 1 - w) : g + 1].sum(0)
            right = emb[g + 1 : g + 1 + w].sum(0)
            assert got[g] == pytest.approx(left @ right / np.linalg.norm(left) / np.linalg.norm(right))


@pytest.fixture(scope="module")
def st_model(embedded):
    st = pytest.importorskip("sentence_transformers")
    from headseg.analysis.model import embedded_model_path

    return st.SentenceTransformer(str(embedded_model_path()), device="cpu")


@pytest.mark.slow
def test_embeddings_equal_sentence_transformers(st_model):
    units = ["A short one.", "The committee approved the budget after a long debate.", "Rain."]
    m = EmbeddingCosineMethod()
    m.ensure_setup()
    ours = m.embed(units)
    ref = st_model.encode(units, normalize_embeddings=True, convert_to_numpy=True)
    assert np.allclose(ours, ref, atol=1e-5)


@pytest.mark.slow
def test_embedding_cosine_finds_clear_topics_and_caches(st_model):
    doc = _topic_doc()
    m = EmbeddingCosineMethod()
    m.ensure_setup()
    p = m.predict(doc, 3)
    assert p.units == [4, 8] and p.info["cached"] is False
    assert m.predict(doc, None).info["cached"] is True


class WordCount:
    """Deterministic LangChain-style embeddings: counts of the topic words."""

    def embed_documents(self, texts):
        return [[float(t.count(w)) for w in TOPICS] for t in texts]

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def test_langchain_chunks_map_back_to_units():
    pytest.importorskip("langchain_experimental")
    from langchain_experimental.text_splitter import SemanticChunker

    doc = _topic_doc()
    m = LangChainMethod()
    m._cls = SemanticChunker
    m.embeddings = _cached_embeddings(WordCount())
    m._ready = True
    # With buffer 1 the distance peaks on the true gaps; number_of_chunks=3 sets the
    # threshold at the 80th percentile, which only the two peaks exceed.
    with_k = m.predict(doc, 3)
    assert with_k.units == [4, 8]
    for k in (None, 2, 5):
        pred = m.predict(doc, k)
        chunks = SemanticChunker(m.embeddings, sentence_split_regex=r"\n", number_of_chunks=k).split_text(doc.text)
        cuts = [0, *pred.units, doc.n]
        assert [" ".join(doc.units[a:b]) for a, b in zip(cuts, cuts[1:])] == chunks
    assert m.embeddings.misses > 0 and m.predict(doc, 3).info["cached"] is True


@pytest.mark.slow
def test_chonkie_chunks_map_back_to_units(st_model):
    pytest.importorskip("chonkie")
    doc = _topic_doc(per=5)
    m = ChonkieMethod(sentence_model=st_model)
    m.ensure_setup()
    chunks = m.chunker.chunk(doc.text)
    assert "".join(c.text for c in chunks) == doc.text
    pred = m.predict(doc)
    starts = [c.start_index for c in chunks[1:]]
    # chonkie's chunks start exactly at unit starts, so snapping changes nothing
    assert [doc.spans[b][0] for b in pred.unit_boundaries(doc)] == starts


def test_texttiling_maps_paragraph_breaks_to_units():
    pytest.importorskip("nltk")
    doc = _topic_doc(per=8)
    m = TextTilingMethod()
    m.ensure_setup()

    class Stub:
        # Cut right after the blank line that precedes units 8 and 16.
        def tokenize(self, text):
            cut1 = text.index(doc.units[8])
            cut2 = text.index(doc.units[16])
            return [text[:cut1], text[cut1:cut2], text[cut2:]]

    real = m.tt
    m.tt = Stub()
    assert m.predict(doc).units == [8, 16]
    m.tt = real
    units = m.predict(doc).unit_boundaries(doc)
    assert all(0 < u < doc.n for u in units)
