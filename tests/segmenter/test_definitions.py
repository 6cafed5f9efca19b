"""Link reference definitions (``[id]: url``) are a block of their own, read like code: grouped into units of
a model window, never cut inside without a size limit, cut between lines under one (issue 49, item 8:
20,000 of them were 20,000 model calls)."""

from __future__ import annotations

import pytest

from benchmarks.hostile_cost import make
from headseg.api import Segmenter
from headseg.segmenter import encode as encode_mod
from headseg.segmenter.structure import looks_like_markdown, read_markdown

PAGE = (
    "# Links\n\n"                                   # 0
    "See [the site][site] and [docs].\n\n"          # 9
    "[site]: https://example.com/\n"                # 43
    "[docs]: https://example.com/docs \"Docs\"\n\n"  # 72
    "> [q]: http://q.example\n> quoted\n\n"          # 113: inside a quote: the quote's own
    "[last]: /relative/path\n"                      # 147
)


def _kinds(text):
    return [(b.kind, text[b.start:b.end], [text[p:p + 6] for p in b.pieces]) for b in read_markdown(text).blocks]


def test_a_run_of_definitions_is_one_block_with_its_lines_as_pieces():
    got = _kinds(PAGE)
    assert got == [
        ("heading", "# Links\n", []),
        ("paragraph", "See [the site][site] and [docs].\n", []),
        ("definitions", "[site]: https://example.com/\n[docs]: https://example.com/docs \"Docs\"\n", ["[docs]"]),
        ("blockquote", "> [q]: http://q.example\n> quoted\n", ["> quot"]),
        ("paragraph", "> quoted\n", []),
        ("definitions", "[last]: /relative/path\n", []),
    ]
    # a definition opening a paragraph is one; the paragraph's text after it is not
    text = "[a]: http://a.example\nSome text that follows.\n"
    assert _kinds(text) == [("definitions", "[a]: http://a.example\n", []),
                            ("paragraph", "Some text that follows.\n", [])]
    # what only looks like one (no URL) is a paragraph
    assert [k for k, _, _ in _kinds("[a]:\n\nText.\n")] == ["paragraph", "paragraph"]


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch")


def test_two_definitions_make_a_text_markdown():
    assert looks_like_markdown("Intro.\n\n[a]: http://a.example\n[b]: http://b.example\n")
    assert not looks_like_markdown("Intro.\n\n[a]: http://a.example\n")
    assert not looks_like_markdown("Ratio [a]: b and [c]: d in one line.\n")


def test_definitions_are_grouped_and_never_cut_without_a_limit(seg):
    defs = make("linkrefs", 3_000)
    text = "# Intro\n\nBees make honey from nectar. They store it in wax cells.\n\n" + defs + "\n## More\n\nText.\n"
    doc = seg.document(text, {"structure": "markdown"})
    block = next(b for b in doc.structure.blocks if b.kind == "definitions")
    assert text[block.start:block.end] == defs
    inside = [(a, b) for a, b in doc.units if block.start <= a < block.end]
    lines = defs.count("\n")
    # each group a model window at most, several lines each, opening at a line start
    assert len(inside) * 4 <= lines
    assert all(a == block.start or text[a - 1] == "\n" for a, _ in inside)
    assert all(len(seg.tokenize(text[a:b])) <= seg.window_tokens for a, b in inside)
    # no boundary inside the block
    for s in seg.segment(text, structure="markdown")[1:]:
        assert not block.start < s.start < block.end


def test_definitions_larger_than_the_budget_are_cut_between_lines(seg):
    defs = make("linkrefs", 3_000)
    text = "Bees make honey.\n\n" + defs
    got = seg.segment(text, structure="markdown", max_tokens=64)
    assert "".join(s.text for s in got) == text
    assert len(got) > 3
    for s in got[1:]:
        assert text[s.start - 1] == "\n", repr(text[s.start - 10: s.start + 10])
        assert len(seg.tokenize(s.text)) <= 64


def test_the_model_windows_of_definitions_grow_linearly_and_carry_many_tokens(seg, monkeypatch):
    got = []
    real = encode_mod.unit_windows
    for n in (4_000, 16_000):
        windows = []

        def counted(*a, **k):
            out = real(*a, **k)
            windows.append(len(out[0]))
            return out

        monkeypatch.setattr(encode_mod, "unit_windows", counted)
        text = make("linkrefs", n)
        assert "".join(s.text for s in seg.segment(text)) == text
        got.append((sum(windows), len(seg.tokenize(text))))
    (w1, t1), (w4, t4) = got
    # before: one window a line, about 15 tokens each
    assert w4 / w1 <= 4.5 and t1 / w1 >= 60 and t4 / w4 >= 60, got
