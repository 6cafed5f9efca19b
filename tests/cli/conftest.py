"""Fixtures of the command-line tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir):
    """The tiny BERT of the root conftest, as the path string ``--model`` takes."""
    return str(tiny_bert_dir)
