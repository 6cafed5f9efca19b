"""``headseg evaluate`` and ``headseg retrieval`` build their segmenter from one ``SegmenterConfig``,
the one their flags make, as ``segment``, ``serve`` and the adapters do (the TUI's: tests/tui/test_marks.py)."""

from __future__ import annotations

import numpy as np
import pytest

import headseg.api
from headseg.analysis.errors import HeadsegError
from headseg.cli import build_parser
from headseg.config import SegmenterConfig
from headseg.evaluation import HeadsegMethod

FLAGS = ["--model", "some/model", "--profile", "heads.json", "--backend", "torch", "--precision", "fp32"]
CONFIG = SegmenterConfig(model="some/model", profile="heads.json", backend="torch", precision="fp32")


class Built(Exception):
    """Raised by the recording segmenter: the command got as far as building it."""


@pytest.fixture
def built(monkeypatch):
    """The keywords each ``headseg.api.Segmenter(...)`` is called with (the call then stops the command)."""
    seen = []

    class Recording:
        def __init__(self, **kwargs):
            seen.append(kwargs)
            raise Built

    monkeypatch.setattr(headseg.api, "Segmenter", Recording)
    return seen


def test_evaluate_gives_the_headseg_method_the_config_of_its_flags(built):
    from headseg.cli.evaluate import build_methods

    args = build_parser().parse_args(["evaluate", "data.jsonl", "--method", "headseg,random", *FLAGS])
    method, random = build_methods(["headseg", "random"], args)
    assert method.config == CONFIG and random.seed == 0
    # the stored results' keys are what they were (a re-run finds them)
    assert method.params() == {"model": "some/model", "profile": "heads.json", "backend": "torch",
                               "precision": "fp32"}
    with pytest.raises(Built):
        method.setup()
    assert built == [{"config": CONFIG, "quiet": True}]


def test_the_headseg_method_takes_a_config_or_its_fields():
    assert HeadsegMethod().config == SegmenterConfig()
    assert HeadsegMethod().params() == {"model": "embedded", "profile": "default", "backend": "auto",
                                        "precision": "default"}
    assert HeadsegMethod(model="some/model", profile="heads.json", backend="torch", precision="fp32").config == CONFIG
    assert HeadsegMethod(CONFIG, backend="onnx").config == SegmenterConfig.of(CONFIG, backend="onnx")
    with pytest.raises(HeadsegError, match="unknown backend"):
        HeadsegMethod(backend="nope")  # refused when the method is made, before any document


def test_retrieval_builds_the_headseg_chunker_from_the_config_of_its_flags(tmp_path, built, monkeypatch):
    import headseg.segmenter.evaluation.embeddings as embeddings
    from headseg.cli import retrieval

    class Embedder:  # the questions' vectors come before the chunkers: no model needed for them here
        def __init__(self, name):
            pass

        def embed(self, texts):
            return np.ones((len(texts), 4), dtype=np.float32)

    monkeypatch.setattr(embeddings, "MeanPooledEmbedder", Embedder)
    (tmp_path / "corpora").mkdir()
    (tmp_path / "corpora" / "a.md").write_text("Apples are red. Trains run on rails.", encoding="utf-8")
    (tmp_path / "questions.jsonl").write_text(
        '{"question": "Apples?", "corpus": "a", "references": [{"start": 0, "end": 15}]}\n', encoding="utf-8")
    flags = ["--backend", "torch", "--precision", "fp32", "--quiet"]
    with pytest.raises(Built):
        retrieval.run(build_parser().parse_args(["retrieval", str(tmp_path), *flags]))
    assert built == [{"config": SegmenterConfig(backend="torch", precision="fp32", quiet=True)}]
