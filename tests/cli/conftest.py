"""Fixtures of the command-line tests."""

from __future__ import annotations

import json

import pytest

from cli_helpers import SENTENCES, TEXT


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir):
    """The tiny BERT of the root conftest, as the path string ``--model`` takes."""
    return str(tiny_bert_dir)


@pytest.fixture
def corpus(tmp_path):
    """A JSONL corpus of six short documents ``doc-0`` … ``doc-5``, each the sentences in another order."""
    p = tmp_path / "corpus.jsonl"
    recs = [{"id": f"doc-{i}", "text": " ".join(SENTENCES[i % 6:] + SENTENCES[:i % 6])} for i in range(6)]
    p.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return p


@pytest.fixture
def doc(tmp_path):
    """A text file of one short document (:data:`cli_helpers.TEXT`)."""
    p = tmp_path / "doc.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


@pytest.fixture
def config_only(tmp_path):
    """The embedded model's config.json alone: its shape is known, but loading it would fail (exit 3)."""
    import shutil

    from headseg.analysis.model import embedded_model_path

    d = tmp_path / "config-only"
    d.mkdir()
    shutil.copy(embedded_model_path() / "config.json", d / "config.json")
    return str(d)
