"""Markdown structure: the reader's blocks and offsets, the heading path, the auto rule, and the search
keeping fitting blocks whole, cutting larger ones only between lines/rows/items, opening at headings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from headseg.analysis.errors import InputError
from headseg.analysis.segments import Segmentation
from headseg.analysis.text import tokenize
from headseg.segmenter.blocks import split_at_blocks, structure_prior
from headseg.segmenter.document import Document, TokenCount
from headseg.segmenter.options import SegmentOptions
from headseg.segmenter.structure import (SourceText, as_read, looks_like_markdown, read_markdown,
                                         resolve_structure)

DOC = (
    "---\ntitle: x\n---\n"          # 0: front matter
    "# Install\n\n"                 # 16
    "Para one. Still para.\n\n"     # 27
    "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\n"  # 50
    "- item\n  - nested\n- two\n\n"  # 91
    "```py\nx = 1\ny = 2\n```\n\n"   # 116
    "    indented\n\n"              # 138
    "> quote\n> more\n\n"           # 152
    "<div>\nhtml\n</div>\n\n"       # 168
    "GPU\n---\n\n"                  # 187
    "### Deep\ntext\n"              # 196
)


def _blocks(text):
    return [(b.kind, text[b.start:b.end], b.level, b.title) for b in read_markdown(text).blocks]


def test_every_block_kind_with_exact_offsets():
    got = _blocks(DOC)
    assert got == [
        ("front_matter", "---\ntitle: x\n---\n", 0, ""),
        ("heading", "# Install\n", 1, "Install"),
        ("paragraph", "Para one. Still para.\n", 0, ""),
        ("table", "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n", 0, ""),
        ("list", "- item\n  - nested\n- two\n\n", 1, ""),
        ("list_item", "- item\n  - nested\n", 1, ""),
        ("paragraph", "- item\n", 0, ""),
        ("list", "  - nested\n", 2, ""),
        ("list_item", "  - nested\n", 2, ""),
        ("paragraph", "  - nested\n", 0, ""),
        ("list_item", "- two\n\n", 1, ""),
        ("paragraph", "- two\n", 0, ""),
        ("code", "```py\nx = 1\ny = 2\n```\n", 0, ""),
        ("code", "    indented\n", 0, ""),
        ("blockquote", "> quote\n> more\n", 0, ""),
        ("paragraph", "> quote\n> more\n", 0, ""),
        ("html", "<div>\nhtml\n</div>\n", 0, ""),
        ("heading", "GPU\n---\n", 2, "GPU"),
        ("heading", "### Deep\n", 3, "Deep"),
        ("paragraph", "text\n", 0, ""),
    ]


def test_pieces_are_rows_lines_and_items():
    s = read_markdown(DOC)
    by = {}
    for b in s.blocks:
        by.setdefault(b.kind, b)  # the first of each kind
    # table: the body rows (the header stays with the delimiter row)
    assert [DOC[p:p + 9] for p in by["table"].pieces] == ["| 1 | 2 |", "| 3 | 4 |"]
    # fenced code: between its lines, the fences kept with the first and the last line
    assert [DOC[p:p + 5] for p in by["code"].pieces] == ["y = 2"]
    # the outer list: its second item
    assert [DOC[p:p + 5] for p in by["list"].pieces] == ["- two"]
    assert all(0 < o < len(DOC) for o in s.breaks())


def test_offsets_with_crlf_and_lone_cr():
    text = "# A\r\n\r\ntext\r## B\rmore\n"
    got = [(b.kind, text[b.start:b.end]) for b in read_markdown(text).blocks]
    assert got == [("heading", "# A\r\n"), ("paragraph", "text\r"), ("heading", "## B\r"), ("paragraph", "more\n")]


def test_heading_path():
    s = read_markdown(DOC)
    assert s.heading_path(0) == []
    assert s.heading_path(DOC.index("# Install")) == ["Install"]
    assert s.heading_path(DOC.index("Para one")) == ["Install"]
    assert s.heading_path(DOC.index("GPU")) == ["Install", "GPU"]
    # blank lines before a heading belong under it
    assert s.heading_path(DOC.index("GPU") - 1) == ["Install", "GPU"]
    assert s.heading_path(DOC.index("text\n")) == ["Install", "GPU", "Deep"]
    assert read_markdown("## B\n\n# A\n\nx").heading_path(9) == ["A"]


def test_the_auto_rule():
    assert looks_like_markdown("```\ncode\n```\n")
    assert looks_like_markdown("| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert looks_like_markdown("# One\n\ntext\n\n## Two\n\nmore\n")
    assert not looks_like_markdown("# Only one heading\n\nand prose.\n")
    assert not looks_like_markdown("The committee met. It approved the budget.\n\nRain fell.")
    assert not looks_like_markdown(" = Valkyria = \n = = Plot = = \n text | more text\n")
    sample = Path(__file__).resolve().parents[2] / "examples" / "sample.txt"
    assert not looks_like_markdown(sample.read_text(encoding="utf-8"))
    assert resolve_structure("plain words here.", "auto") is None
    assert resolve_structure("# One\nx\n", "plain") is None
    assert resolve_structure("# One\nx\n", "markdown").headings[0].title == "One"
    # a .md file is Markdown whatever it looks like
    md = as_read("notes.MD", "# One\nx\n")
    assert md == SourceText("# One\nx\n", "markdown") and resolve_structure(md.text, "auto", md.hint) is not None
    assert resolve_structure(md.text, "auto") is None  # the hint, not the text's looks, made it Markdown
    assert resolve_structure(md.text, "plain", md.hint) is None  # an explicit structure wins
    assert as_read("notes.txt", "# One\n") == "# One\n"
    with pytest.raises(InputError, match="hint"):
        resolve_structure("x", "auto", "html")
    with pytest.raises(InputError, match="hint"):
        SourceText("x", "rst")
    with pytest.raises(InputError, match="expected text as str"):
        SourceText(b"x", "markdown")
    with pytest.raises(InputError, match="structure"):
        resolve_structure("x", "html")
    with pytest.raises(InputError, match="structure"):
        SegmentOptions(structure="rst")


def test_units_never_straddle_a_block():
    units = [(0, len(DOC))]
    got = split_at_blocks(DOC, units, read_markdown(DOC))
    assert "".join(DOC[a:b] for a, b in got) == DOC
    assert all(b == c for (_, b), (c, _) in zip(got, got[1:]))
    starts = [a for a, _ in got]
    for needle in ("# Install", "| 1 | 2 |", "| 3 | 4 |", "- two", "y = 2", "> quote", "### Deep"):
        assert DOC.index(needle) in starts
    # indentation joins the unit before: the nested item's unit opens at its marker
    assert DOC.index("- nested") in starts


def _prior(text, tokenizer, max_tokens):
    s = read_markdown(text)
    from headseg.analysis.text import split_sentences

    units = split_at_blocks(text, split_sentences(text), s)
    return units, structure_prior(Document.build(text, tokenize(text, tokenizer), units, s), s, None, max_tokens, 400)


def test_prior_forbids_inside_fitting_blocks_and_rewards_headings(tokenizer):
    units, p = _prior(DOC, tokenizer, None)
    starts = [a for a, _ in units]
    allowed = dict(zip(starts, p.allowed))
    for inside in ("| 1 | 2 |", "y = 2", "```\n\n", "  - nested", "- two", "> more", "html\n"):
        i = DOC.index(inside)
        if i in allowed:
            assert not allowed[i], inside
    for opens in ("| a |", "```py", "- item", "> quote", "<div>", "GPU\n"):
        assert allowed[DOC.index(opens)], opens
    # right after a heading: no cut
    assert not allowed[DOC.index("Para one")]
    lv = dict(zip(starts, p.level))
    bonus = dict(zip(starts, p.bonus))
    assert (lv[DOC.index("# Install")], lv[DOC.index("GPU\n")], lv[DOC.index("### Deep")]) == (1, 2, 3)
    assert bonus[DOC.index("# Install")] > bonus[DOC.index("GPU\n")] > bonus[DOC.index("### Deep")] > 0


def test_prior_opens_larger_blocks_between_rows_only(tokenizer):
    rows = "".join(f"| row {i} | value number {i} is here |\n" for i in range(40))
    text = "Intro line.\n\n| a | b |\n|---|---|\n" + rows + "\nAfter.\n"
    units, p = _prior(text, tokenizer, 64)
    ok = [a for (a, _), al in zip(units, p.allowed) if al]
    table = read_markdown(text).blocks[1]
    assert table.kind == "table"
    inside = [a for a in ok if table.start < a < table.end]  # rows start unindented here
    assert inside and all(a in table.pieces for a in inside)


@pytest.fixture(scope="module")
def seg(tiny_bert):
    from headseg import Segmenter

    return Segmenter(model=tiny_bert, backend="torch", window_tokens=64)


def _code_doc():
    lines = "".join(f"    result_{i} = compute(value_{i}, factor={i})\n" for i in range(30))
    small = "```\nprint('small block')\nprint('stays whole')\n```\n"
    table = "| key | value |\n|---|---|\n" + "".join(f"| k{i} | a value of {i} |\n" for i in range(30))
    return ("# Guide\n\nThis guide shows the code. It has two parts.\n\n## Code\n\n```python\n" + lines
            + "```\n\nA small one follows. It fits.\n\n" + small + "\n## Data\n\n" + table
            + "\nThe end of the guide. Nothing more.\n")


@pytest.mark.parametrize("budget", [48, 96, None])
def test_segmentation_keeps_fitting_blocks_and_cuts_large_ones_between_lines(seg, budget):
    text = _code_doc()
    r = seg.segment(text, max_tokens=budget, structure="markdown")
    assert "".join(s.text for s in r) == text
    assert all(s.start == p.end for p, s in zip(r.segments, r.segments[1:]))
    if budget is not None:
        assert all(s.token_count <= budget for s in r)
    st = read_markdown(text)
    doc = tokenize(text, seg.encoder.tokenizer)
    measure = TokenCount(text, doc, None)
    cuts = r.boundaries
    for b in st.blocks:
        if b.kind not in ("code", "table"):
            continue
        inside = [c for c in cuts if b.start < c < b.end]
        if budget is None or measure.span(b.start, b.end) <= budget:
            assert not inside, text[b.start:b.end][:40]
        else:
            # at a piece's line start, its indentation included (issue 49, item 11)
            assert inside and all(c in b.pieces for c in inside)
    # every cut at a line start (after its indentation outside code, tables and HTML)
    assert all(text[:c].rstrip(" ").endswith("\n") for c in cuts)
    for s in r:
        assert s.headings == tuple(st.heading_path(s.start))
    if budget == 96:
        heads = [b.start for b in st.headings]
        assert sum(h in r.boundaries or h == 0 for h in heads) == len(heads)


def test_headings_in_records_and_plain_text(seg):
    text = _code_doc()
    r = seg.segment(text, max_tokens=64, structure="markdown")
    d = r.to_dict()
    assert [s["headings"] for s in d["segments"]] == [list(s.headings) for s in r]
    assert d["segments"][0]["headings"] == ["Guide"]
    assert [s.headings for s in Segmentation.from_dict(d)] == [s.headings for s in r]
    assert r.to_records("x")[0]["headings"] == ["Guide"]
    plain = seg.segment(text, max_tokens=64, structure="plain")
    assert all(s.headings == () for s in plain)
    # plain text under auto: the same boundaries as plain
    prose = "The committee met on Monday. It approved the budget.\n\nRain fell all night. The river rose.\n"
    assert seg.segment(prose, max_tokens=16).boundaries == seg.segment(prose, max_tokens=16,
                                                                        structure="plain").boundaries


def test_a_heading_opens_a_chunk_with_a_list_kept_whole(seg):
    items = "".join(f"- item {i} of the list\n" for i in range(6))
    text = ("# Top\n\nSome words here. More words there.\n\n" + items + "\n## Next\n\nAnother paragraph. "
            "With two sentences.\n\n## Last\n\nFinal words.\n")
    r = seg.segment(text, max_tokens=40, structure="markdown")
    lst = next(b for b in read_markdown(text).blocks if b.kind == "list")
    assert not [c for c in r.boundaries if lst.start < c < lst.end]
    assert text.index("## Next") in r.boundaries and text.index("## Last") in r.boundaries
    assert np.all([s.token_count <= 40 for s in r])


WRAPPED = ("The committee met on Monday and it approved the budget after\na long debate about the roads. "
           "Rain fell all night over the\nharbour and the river rose quickly. Farmers moved their cattle to\n"
           "higher ground before dawn.\n")


def test_a_hard_wrapped_paragraph_is_never_cut_at_a_soft_line_break(seg, tokenizer):
    """Issue 34: a line break inside a paragraph where no sentence ends is no place for a cut while the
    sentence fits; only a sentence longer than the budget gives its soft breaks back."""
    from headseg.segmenter.blocks import after_sentence_end

    text = "# Notes\n\n" + WRAPPED + "\n## Second\n\n" + WRAPPED.replace("committee", "council")
    st = read_markdown(text)
    paragraphs = [b for b in st.blocks if b.kind == "paragraph"]
    soft = {text.index(line, b.start) for b in paragraphs for line in text[b.start:b.end].splitlines(True)[1:]
            if not after_sentence_end(text, text.index(line, b.start))}
    assert len(soft) == 6  # three soft breaks in each paragraph
    units, prior = _prior(text, tokenizer, 24)
    for i, (a, _) in enumerate(units):
        if a in soft:
            assert not prior.allowed[i]
    for budget in (24, 32, 48, None):
        r = seg.segment(text, max_tokens=budget, structure="markdown")
        assert "".join(s.text for s in r) == text and not set(r.boundaries) & soft, (budget, r.boundaries)
    # 12 tokens: the sentences are longer than the budget, so their soft breaks are cut again
    r = seg.segment(text, max_tokens=12, structure="markdown")
    assert set(r.boundaries) & soft and all(s.token_count <= 12 for s in r)


def test_a_code_block_longer_than_the_search_bound_is_kept_whole(seg):
    """A block of more units than TopicParams.max_units (400) widens the bound for its text (up to
    BLOCK_STRETCH times), so without a budget it is not cut; before, its lines were given back."""
    from headseg.segmenter.blocks import BLOCK_STRETCH, units_bound

    code = "".join(f"x{i} = compute({i})\n" for i in range(430))
    text = ("# Report\n\nThe report is a JSON document. It is written on demand.\n\n```js\n" + code
            + "```\n\n## Use\n\nRead it with any JSON parser. It has one key per section.\n")
    st = read_markdown(text)
    block = next(b for b in st.blocks if b.kind == "code")
    units = split_at_blocks(text, seg.units(text), st)
    inside = sum(block.start <= a < block.end for a, _ in units)
    assert inside > 400
    assert units_bound(units, st, 400) == inside + 2 and units_bound(units, None, 400) == 400
    assert units_bound(units, st, 100) == BLOCK_STRETCH * 100  # the widening is bounded
    r = seg.segment(text, structure="markdown")
    assert "".join(s.text for s in r) == text
    assert not [c for c in r.boundaries if block.start < c < block.end]
