"""Issue 49 item 7: a long run of short headings (nothing between them) is read in groups, as tiny units
are; a title over its subtitle, a few headings in a row, long headings and headings with text between
them stay one unit each."""

from __future__ import annotations

import pytest

from headseg.analysis.errors import HeadsegError
from headseg.segmenter.structure import read_markdown
from headseg.segmenter.runs import HEADING_TOKENS, TINY_GROUP, TINY_RUN, group_heading_runs


def _group(text, tokens_per_line):
    """Each line of ``text`` a unit of ``tokens_per_line`` tokens, grouped by the headings of ``text``."""
    units, pos = [], 0
    for line in text.splitlines(keepends=True):
        if units and not line.strip():  # a blank line joins the unit before, as in the pipeline
            units[-1] = (units[-1][0], pos + len(line))
        else:
            units.append((pos, pos + len(line)))
        pos += len(line)
    heads = [(h.start, h.end) for h in read_markdown(text).headings]
    return units, group_heading_runs(text, units, [tokens_per_line] * len(units), heads)


def test_a_run_of_short_headings_is_grouped_at_heading_starts():
    text = "".join(f"# H{i}\n" for i in range(40))
    units, got = _group(text, 4)
    assert "".join(text[a:b] for a, b in got) == text
    per = TINY_GROUP // 4  # headings of four tokens a group
    assert [len(text[a:b].splitlines()) for a, b in got] == [per] * (40 // per) + ([40 % per] if 40 % per else [])
    assert all(text[a] == "#" for a, _ in got)  # every group opens at a heading


@pytest.mark.parametrize("text, tokens", [
    ("".join(f"# H{i}\n" for i in range(TINY_RUN - 1)) + "Body.\n", 4),  # one heading too few
    ("# Title\n## Subtitle\n\nText.\n", 3),
    ("".join(f"### `--option-{i}`\n\n" for i in range(13)), HEADING_TOKENS + 1),  # Node's cli.md: long ones
    ("".join(f"# H{i}\n\n" for i in range(7)) + "Body.\n\n" + "".join(f"# H{i}\n\n" for i in range(7)), 4),
    ("".join(f"# H{i}\n\nText {i}.\n\n" for i in range(40)), 4),  # a body under each
], ids=["seven", "title", "long", "seven-twice", "bodies"])
def test_other_headings_stay_units(text, tokens):
    units, got = _group(text, tokens)
    assert got == units


def test_blank_lines_between_headings_keep_the_run():
    n = 2 * TINY_GROUP // 4  # two groups' worth of four-token headings
    text = "".join(f"## H{i}\n\n" for i in range(n))
    units, got = _group(text, 4)
    assert len(units) == n and len(got) == 2 and "".join(text[a:b] for a, b in got) == text


def test_token_counts_must_match():
    with pytest.raises(HeadsegError):
        group_heading_runs("# a\n", [(0, 4)], [], [(0, 4)])


def test_the_segmenter_reads_the_headings_in_groups(tiny_bert):
    from headseg.api import Segmenter

    seg = Segmenter(model=tiny_bert, backend="torch", window_tokens=64)
    text = "".join(f"# H{i}\n" for i in range(300))
    doc = seg.document(text)
    assert len(doc.units) < 300 / 4
    result = seg.segment(text, max_tokens=64)
    assert "".join(s.text for s in result) == text and all(s.token_count <= 64 for s in result)
    assert all(s.text.startswith("# H") for s in result)
