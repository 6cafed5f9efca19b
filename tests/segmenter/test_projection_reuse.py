"""Issue 49 item 6: a tree under a size limit tests the same units' boundaries on every level, and each test
projected the unit vectors again (16 projections of one document: 31 of 40 s on 100 KB of Markdown).  The
projection is computed once per vectors and knobs; counted in computations, never time."""

from __future__ import annotations

import numpy as np
import pytest

from headseg.api import Segmenter
from headseg.segmenter import evidence
from sample_texts import TOPICS_TEXT


def test_the_same_vectors_are_projected_once(monkeypatch):
    computed = []
    real = evidence._project
    monkeypatch.setattr(evidence, "_project", lambda x, p, *own: computed.append(1) or real(x, p, *own))
    x = np.random.default_rng(6).standard_normal((300, 200))
    p = evidence.EvidenceParams()
    first = evidence.project(x, p)
    again = evidence.project(x.copy(), p)
    assert again is first and len(computed) == 1 and np.array_equal(first, real(x, p))
    with pytest.raises(ValueError):
        first[0, 0] = 1.0  # shared: read-only
    x2 = x.copy()
    x2[5, 7] += 1e-12
    assert not np.array_equal(evidence.project(x2, p), first) and len(computed) == 2


def test_a_tree_under_a_limit_projects_each_document_once(tiny_bert, monkeypatch):
    seg = Segmenter(model=tiny_bert, backend="torch")
    text = "# Notes\n\n" + TOPICS_TEXT.replace("\n\n", "\n\n## Part\n\n", 3)
    calls, computed = [], []
    real_project, real_compute = evidence.project, evidence._project
    monkeypatch.setattr(evidence, "project", lambda x, p, *own: calls.append(1) or real_project(x, p, *own))
    monkeypatch.setattr(evidence, "_project", lambda x, p, *own: computed.append(1) or real_compute(x, p, *own))
    with monkeypatch.context() as m:
        m.setattr(evidence, "_PROJECTED", {})
        seg.segment(text, level="tree", max_tokens=48)
    assert len(computed) * 5 < len(calls), (len(calls), len(computed))  # 3 of 39 here; before: one per call
