"""Issue 49 (hostile pages within 5× prose; item 11, cut between lines): short lines of code, HTML, JSX tag lines
and front matter are read in groups of at most a model window, not a unit (a model call) a line, so a
Docusaurus page of tabs around short fences costs like its bytes; a group opens only where a cut may fall
and holds at most a quarter of a hard limit, so a block over the budget is still cut between whole lines,
every chunk within the limits.  Paragraphs, lists, headings, plain text and code of sentence-long lines
keep their units."""

from __future__ import annotations

import pytest

from headseg.analysis.text import tokenize, window_width
from headseg.segmenter.document import TokenCount, unit_token_ranges
from headseg.segmenter.encode import unit_windows
from headseg.segmenter.structure import read_markdown
from headseg.segmenter.verbatim import LIMIT_SHARE, group_verbatim_lines, share_fits

#: one section of a Docusaurus page (benchmarks/hostile_cost.py's ``mdx`` kind, written out here)
SECTION = ("## Step {i}\n\nInstall the tool for step {i}. Then run it once.\n\n<Tabs>\n<TabItem value=\"py\">\n"
           "```py\n# set up step {i}\nimport tool\n\n# run it\ntool.run({i})\n```\n</TabItem>\n"
           "<TabItem value=\"sh\">\n```sh\n# the shell way\ntool run {i}\n```\n</TabItem>\n</Tabs>\n\n"
           ":::note\nStep {i} needs no network.\n:::\n\n")
HEAD = "import Tabs from '@theme/Tabs';\nimport TabItem from '@theme/TabItem';\n\n"
#: the content of a 128-token window, the default's
WIDTH = 126


def mdx_page(sections: int) -> str:
    return HEAD + "".join(SECTION.format(i=i) for i in range(sections))


@pytest.fixture(scope="module")
def seg(tiny_bert):
    from headseg import Segmenter

    return Segmenter(model=tiny_bert, backend="torch", window_tokens=64)


def _windows(seg, text: str, **options) -> tuple[list[tuple[int, int]], int]:
    """The document's units and the model windows that read them."""
    doc = seg.document(text, options or None)
    windows, _ = unit_windows(doc.tokens, doc.units, seg.loaded.tokenizer, 64)
    return list(doc.units), len(windows)


def test_an_mdx_page_is_read_in_groups_that_grow_with_its_length(seg):
    small, large = mdx_page(10), mdx_page(40)
    units_small, windows_small = _windows(seg, small, structure="mdx")
    units_large, windows_large = _windows(seg, large, structure="mdx")
    lines_small, lines_large = small.count("\n"), large.count("\n")
    # before: about a unit and a window a line (212 units over 263 lines, 21 a section); now 6 a section
    assert windows_small <= lines_small / 3 and windows_large <= lines_large / 3
    per_section = (windows_large - windows_small) / 30
    assert per_section <= 7
    assert abs(windows_large - 4 * windows_small) <= 3 * 7  # linear: the head's units once, not four times
    assert len(units_large) == windows_large


def test_the_groups_open_at_lines_and_keep_the_prose_alone(seg):
    text = mdx_page(6)
    units, _ = _windows(seg, text, structure="mdx")
    assert "".join(text[a:b] for a, b in units) == text
    texts = [text[a:b] for a, b in units]
    for i in range(6):  # the heading, the paragraph and the admonition's text: units of their own
        assert f"## Step {i}\n\n" in texts
        assert f"Install the tool for step {i}. Then run it once.\n\n" in texts
        assert f"Step {i} needs no network.\n" in texts
    tokens = seg.tokenize(text)
    for a, b in units:
        assert a == 0 or text[a - 1] == "\n"  # every unit opens a line
        joined = text[a:b].rstrip("\n").count("\n") > 0
        if joined:  # a group: within a window, never on an opening tag's last line or before a closing one
            assert TokenCount(text, tokens, None).span(a, b) <= window_width(seg.loaded.tokenizer, 64)
            assert not text[a:b].rstrip("\n").endswith('">')
            assert not text[a:b].startswith("</")


def test_two_code_blocks_in_a_row_stay_apart():
    text = "```sh\nmake\nmake test\n```\n\n```py\nimport tool\ntool.run()\n```\n"
    units = _line_units(text)
    got = group_verbatim_lines(text, units, [3] * len(units), read_markdown(text), WIDTH)
    assert got == [(0, 26), (26, len(text))]


def test_plain_text_lists_and_paragraphs_keep_their_lines():
    text = ("- one\n- two\n- three\n- four\n\nShort line.\nAnother line.\nA third.\n\n"
            "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n")
    units = _line_units(text)
    assert group_verbatim_lines(text, units, [3] * len(units), read_markdown(text), WIDTH) == units


def test_plain_text_is_never_grouped(seg):
    text = "".join(f"A: ok {i}\nB: sure\n" for i in range(40))  # a transcript's short turns end topics
    units, _ = _windows(seg, text, structure="plain")
    assert len(units) == text.count("\n")


def test_a_block_of_sentence_long_lines_keeps_them():
    text = "```py\n" + "".join(f"result_{i} = compute_something(alpha={i}, beta={i + 1})\n" for i in range(6)) + "```\n"
    units = _line_units(text)
    assert group_verbatim_lines(text, units, [12] * len(units), read_markdown(text), WIDTH) == units


def test_a_group_holds_at_most_a_share_of_the_limit(tokenizer):
    text = "```\n" + "".join(f"x{i} = {i}\n" for i in range(40)) + "```\n"
    tokens = tokenize(text, tokenizer)
    units = _line_units(text)
    counts = unit_token_ranges(tokens, units)
    counts = counts[:, 1] - counts[:, 0]
    count = TokenCount(text, tokens, None)
    for max_tokens in (16, 32, 64, 128):
        got = group_verbatim_lines(text, units, counts, read_markdown(text), WIDTH, share_fits(count, None, max_tokens))
        assert "".join(text[a:b] for a, b in got) == text
        assert all(count.span(a, b) <= max(LIMIT_SHARE * max_tokens, max(counts)) for a, b in got)
        assert all(a == 0 or text[a - 1] == "\n" for a, _ in got)
    chars = group_verbatim_lines(text, units, counts, read_markdown(text), WIDTH, share_fits(count, 80, None))
    assert all(b - a <= 20 or (a, b) in units for a, b in chars)


@pytest.mark.parametrize("limits", [dict(max_tokens=64), dict(max_tokens=128), dict(max_chars=240),
                                    dict(max_tokens=96, token_counter=lambda s: len(s.split()) * 2)],
                         ids=["64-tokens", "128-tokens", "240-chars", "word-counter"])
def test_a_code_block_over_the_limit_is_cut_only_at_line_ends(seg, limits):
    body = "".join(f"    v{i} = f({i})\n" for i in range(60))  # short lines: read in groups
    text = ("## Setup\n\nRun this:\n\n<Tabs>\n<TabItem value=\"py\">\n```py\ndef setup():\n"
            f"{body}```\n</TabItem>\n</Tabs>\n")
    options = dict(structure="mdx", **limits)
    units, _ = _windows(seg, text, **options)
    assert len(units) < 48  # grouped under the limits too: about two lines a group or more (before: 69 units)
    result = seg.segment(text, **options)
    assert "".join(s.text for s in result) == text
    counter = limits.get("token_counter")
    for s in result:
        if "max_chars" in limits:
            assert len(s.text) <= limits["max_chars"]
        if "max_tokens" in limits:
            assert (counter(s.text) if counter else s.token_count) <= limits["max_tokens"]
    assert len(result) > 2
    code = text.index("```py")
    for b in result.boundaries:
        if b > code:  # a chunk ends at a line end (or, where max_chars leaves no room, before the indentation)
            assert not text[text.rfind("\n", 0, b) + 1:b].strip(" "), (b, text[b - 20:b + 20])
            assert text[b - 1] == "\n" or "max_chars" in limits


def _line_units(text: str) -> list[tuple[int, int]]:
    """A unit a line, a blank line joined to the unit before (as the sentence rules make them)."""
    units, pos = [], 0
    for line in text.splitlines(keepends=True):
        if units and not line.strip():
            units[-1] = (units[-1][0], pos + len(line))
        else:
            units.append((pos, pos + len(line)))
        pos += len(line)
    return units

