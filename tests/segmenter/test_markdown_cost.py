"""Reading hostile Markdown costs work linear in the text (issue 49, items 7-9): for each kind of
benchmarks/hostile_cost.py, the Python calls (``sys.setprofile``'s call and C-call events, never wall time)
of reading its structure under every ``structure`` value, and of a heading path at every line start (as
many as a segmentation can ask: one per segment), grow at most about 4× for a 4× larger input."""

from __future__ import annotations

import sys

import pytest

from benchmarks.hostile_cost import MARKDOWN_KINDS
from headseg.segmenter.structure import line_starts, read_markdown, resolve_structure


def _calls(fn) -> int:
    """How many Python and C calls ``fn()`` makes."""
    count = 0

    def hook(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count


def _read(text: str) -> None:
    for structure in ("auto", "markdown", "mdx"):
        st = resolve_structure(text, structure)
        if st is not None:
            for offset in line_starts(text)[:-1]:
                st.heading_path(offset)
    read_markdown(text, mdx=None)


#: hostile JSX for the MDX reading (segmenter/jsx.py): deep nesting, closing tags that match nothing open,
#: unclosed tags over lines, and fences under tags
JSX_KINDS = {
    "nested": lambda n: "<a>\n" * (n // 9) + "</a>\n" * (n // 9),
    "unmatched": lambda n: "<a>\n" * (n // 8) + "</b>\n" * (n // 8),
    "unclosed": lambda n: "<Tab\n" * (n // 5),
    "wrapped": lambda n: "<Tabs>\n```\n# x\n```\n" * (n // 20) + "</Tabs>\n" * (n // 20),
}


@pytest.mark.parametrize("kind", sorted(MARKDOWN_KINDS) + sorted(JSX_KINDS))
def test_reading_cost_grows_linearly(kind):
    make = MARKDOWN_KINDS.get(kind) or JSX_KINDS[kind]
    small, large = _calls(lambda: _read(make(6_000))), _calls(lambda: _read(make(24_000)))
    # one-line kinds cost a constant number of calls (the parser's loops over a line are C's: inline
    # parsing is off); the many-line kinds about 4×; the heading paths were 16× (O(H) each) before
    assert large / small <= 4.5, (kind, small, large)


def test_many_headings_paths_are_their_own_parents():
    """The heading path from the parents' links equals the one recomputed from every heading before."""
    text = "".join(f"{'#' * (1 + (i * 7) % 4)} H{i}\n\nText {i}.\n\n" for i in range(300))
    st = read_markdown(text)
    for offset in line_starts(text)[:-1]:
        path = []
        for h in st.headings:
            if h.start > offset:
                break
            while path and path[-1].level >= h.level:
                path.pop()
            path.append(h)
        skipped = len(text[offset:]) - len(text[offset:].lstrip())
        if skipped and any(offset < h.start <= offset + skipped for h in st.headings):
            continue  # the path of the heading after the blank lines: checked at its own offset
        assert st.heading_path(offset) == [h.title for h in path]
