"""Issue 49, items 11 and 13: a code block larger than the budget is cut between whole lines (a chunk
ends at a line end, the next begins with the line's indentation), and a paragraph ending in a colon stays
with the block it introduces when the two fit together."""

from __future__ import annotations

import pytest

from headseg.analysis.segments import Segmentation
from headseg.analysis.text import tokenize
from headseg.segmenter.blocks import line_start_boundaries, structure_prior
from headseg.segmenter.document import Document, TokenCount
from headseg.segmenter.structure import read_markdown

CODE = (
    "# Geometry\n\n"                                         # 0
    "Angles come from the dot product.\n\n"                  # 12
    "```python\n"                                            # 47
    "def angle(u, v):\n"                                     # 57
    "    # the angle between two vectors, in radians\n"      # 74   11 tokens
    "    dot = sum(a * b for a, b in zip(u, v))\n"           # 122  19
    "    nu = sum(a * a for a in u) ** 0.5\n"                # 165  17
    "    nv = sum(b * b for b in v) ** 0.5\n"                # 203  18
    "    # clamp against rounding before the arc cosine\n"   # 241  11
    "    c = max(-1.0, min(1.0, dot / nu / nv))\n"           # 292  23
    "    if c > 0.999:\n"                                    # 335
    "        # nearly parallel vectors: the angle is tiny\n"  # 353
    "        return 0.0\n"                                   # 406
    "    return math.acos(c)\n"                              # 425
    "```\n\n"                                                # 449
    "The function returns radians, never degrees.\n"         # 454
)
#: where the code block may be cut: each line start after the first line of code, up to the closing fence
LINE_STARTS = (74, 122, 165, 203, 241, 292, 335, 353, 406, 425)
CODE_SPAN = (47, 454)


@pytest.fixture(scope="module")
def seg(tiny_bert):
    from headseg import Segmenter

    return Segmenter(model=tiny_bert, backend="torch", window_tokens=64)


def test_the_line_starts_by_hand():
    lines = CODE.splitlines(keepends=True)
    starts = [sum(map(len, lines[:k])) for k in range(len(lines))]
    assert tuple(s for s in starts if 74 <= s <= 425) == LINE_STARTS
    assert [CODE[s:s + 5] for s in (47, 449, 454)] == ["```py", "```\n\n", "The f"]


def _inside_code(offsets):
    return [o for o in offsets if CODE_SPAN[0] < o < CODE_SPAN[1]]


def test_at_24_tokens_every_cut_in_the_code_is_a_line_start(seg):
    r = seg.segment(CODE, max_tokens=24, structure="markdown")
    assert "".join(s.text for s in r) == CODE
    assert all(s.token_count <= 24 for s in r)
    inside = _inside_code(r.boundaries)
    assert set(inside) <= set(LINE_STARTS)
    # two neighbouring lines of 11+19, 19+17, 17+18, 18+11, 11+23, 23+7 tokens exceed 24: cut between each
    assert {122, 165, 203, 241, 292, 335} <= set(inside)
    for s in r:
        if CODE_SPAN[0] < s.end < CODE_SPAN[1]:
            assert s.text.endswith("\n") and not s.text.endswith(" \n")
    assert r[r.boundaries.index(122) + 1].text.startswith("    dot = sum(")


@pytest.mark.parametrize("budget", [24, 64])
def test_chunks_of_code_end_at_line_ends(seg, budget):
    r = seg.segment(CODE, max_tokens=budget, structure="markdown")
    inside = _inside_code(r.boundaries)
    assert inside and set(inside) <= set(LINE_STARTS)
    assert all(s.token_count <= budget for s in r)
    # independently: the model's token count of each chunk's text is within the budget
    count = TokenCount(CODE, tokenize(CODE, seg.encoder.tokenizer), None)
    assert all(count.span(s.start, s.end) <= budget for s in r)


def test_the_tree_at_128_cuts_code_between_lines(seg):
    r = seg.segment(CODE, level="tree", max_tokens=128, structure="markdown")
    assert "".join(s.text for s in r) == CODE
    assert all(s.token_count <= 128 for s in r)
    assert _inside_code(r.boundaries) and set(_inside_code(r.boundaries)) <= set(LINE_STARTS)
    for n in r.nodes:
        assert set(_inside_code([n.start, n.end])) <= set(LINE_STARTS)


def _document(tokenizer, text):
    from headseg.segmenter.blocks import split_at_blocks

    st = read_markdown(text)
    tokens = tokenize(text, tokenizer)
    units = split_at_blocks(text, [(0, len(text))], st)
    return Document.build(text, tokens, units, st)


def test_a_boundary_moves_back_only_where_the_limits_allow(tokenizer):
    text = "```\nx = 1\n    y = 2\n    z = 3\n```\n"
    d = _document(tokenizer, text)
    after_indent = text.index("y = 2")  # 14; its line starts at 10
    result = Segmentation.from_boundaries(text, [after_indent], [0.5])
    moved = line_start_boundaries(d, result, None, None)
    assert moved.boundaries == [10] and moved[1].text == "    y = 2\n    z = 3\n```\n"
    assert moved[0].text == "```\nx = 1\n" and moved[1].score == 0.5
    # the second chunk is 24 characters from its line's start, 20 after the indentation: at 20 it stays
    assert line_start_boundaries(d, result, 20, None).boundaries == [after_indent]
    assert line_start_boundaries(d, result, 24, None).boundaries == [10]
    # plain text (no structure) is never moved
    plain = Document.build(text, d.tokens, d.units, None)
    assert line_start_boundaries(plain, result, None, None) is result


def test_a_boundary_never_moves_onto_the_segment_before(tokenizer):
    text = "    x = 1\n    y = 2\n"  # an indented code block from the text's first character
    st = read_markdown(text)
    assert st.blocks[0].kind == "code"
    # units that no splitter of headseg makes (one holding the first line's indentation alone), so that
    # moving the boundary at 4 back to its line's start would empty the segment before
    d = Document.build(text, tokenize(text, tokenizer), [(0, 4), (4, 14), (14, 20)], st)
    result = Segmentation.from_boundaries(text, [4, 14], [0.5, 0.5])
    assert line_start_boundaries(d, result, None, None).boundaries == [4, 10]


def test_a_boundary_after_indentation_outside_code_stays(tokenizer):
    text = "Intro.\n\n- item one\n  continued here\n- two\n"
    d = _document(tokenizer, text)
    p = text.index("continued")
    result = Segmentation.from_boundaries(text, [p], [0.5])
    assert line_start_boundaries(d, result, None, None).boundaries == [p]


INTRO = (
    "# Building\n\n"
    "The project builds with a standard toolchain on every supported platform. You need a C compiler, "
    "make and Python 3.10 or newer installed first.\n\n"
    "Build it from the repository root:\n\n"
    "```bash\n./configure --prefix=/usr/local --enable-shared\nmake -j8\nmake check\nsudo make install\n```\n\n"
    "## Testing\n\nRun the tests after each change. They take about a minute.\n"
)
COLON = INTRO.index("Build it from")  # 157
FENCE = INTRO.index("```bash")        # 193


def test_the_prior_keeps_an_introduction_with_its_block(tokenizer):
    d = _document(tokenizer, INTRO)
    starts = list(d.starts)
    fence = starts.index(FENCE)
    assert starts.index(COLON) == fence - 1
    prior = structure_prior(d, d.structure, None, 64, 400)
    assert not prior.allowed[fence] and prior.allowed[fence - 1]
    # the colon's unit and the block are 44 tokens: under 40 they do not fit together, and the cut is allowed
    assert d.span_tokens(COLON, INTRO.index("## Testing")) == 44
    assert structure_prior(d, d.structure, None, 40, 400).allowed[fence]
    # a paragraph that does not end in a colon: the cut before the block stays allowed
    other = INTRO.replace("repository root:", "repository root.")
    d2 = _document(tokenizer, other)
    assert structure_prior(d2, d2.structure, None, 64, 400).allowed[list(d2.starts).index(FENCE)]


@pytest.mark.parametrize("budget", [48, 64, None])
def test_an_introduction_stays_with_its_code_block(seg, budget):
    r = seg.segment(INTRO, max_tokens=budget, structure="markdown")
    assert "".join(s.text for s in r) == INTRO
    assert FENCE not in r.boundaries
    holder = next(s for s in r if s.start <= COLON < s.end)
    assert holder.end >= INTRO.index("```\n\n## Testing") + 5
    if budget is not None:
        assert all(s.token_count <= budget for s in r)
