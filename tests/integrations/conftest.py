"""The adapter tests' segmenter: the tiny random BERT, torch backend."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_segmenter(tiny_bert):
    from headseg import Segmenter

    return Segmenter(model=tiny_bert, backend="torch", window_tokens=64)
