"""MDX and Markdown with JSX/HTML wrappers (issue 49, item 12): a fence or a table written directly inside
``<Tabs>``, ``<TabItem>``, ``<details>`` or ``<div>`` is one block under ``structure="mdx"`` (and ``auto`` for
a ``.mdx`` file or Markdown whose HTML wraps a fence), never cut while it fits, its ``# comment`` lines no
headings, with exact offsets.  The pages are in tests/fixtures/mdx (written for these tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from headseg.analysis.text import tokenize
from headseg.segmenter.document import TokenCount
from headseg.segmenter.structure import (SourceText, as_read, check_structure, looks_like_markdown,
                                         read_markdown, resolve_structure)

PAGES = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "mdx").iterdir())


def _fences(text: str) -> list[tuple[int, int]]:
    """The pages' fences, found without a parser: a line opening with ``` up to the next bare ``` line
    (the pages nest none), as ``(start, end)`` offsets of whole lines."""
    out, start, pos = [], None, 0
    for line in text.splitlines(keepends=True):
        s = line.strip()
        if start is None and s.startswith("```"):
            start = pos
        elif start is not None and s == "```":
            out.append((start, pos + len(line)))
            start = None
        pos += len(line)
    return out


def _tables(text: str) -> list[tuple[int, int]]:
    """Runs of lines that start with ``|`` (the pages' tables)."""
    out, start, pos = [], None, 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("|"):
            start = pos if start is None else start
        elif start is not None:
            out.append((start, pos))
            start = None
        pos += len(line)
    return out


def _headings(text: str) -> list[str]:
    """The titles of the ATX headings outside fences and outside <pre> (again without a parser)."""
    inside, raw, out = False, False, []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("```"):
            inside = not inside if s == "```" or not inside else inside
        elif s == "<pre>" or s == "</pre>":
            raw = s == "<pre>"
        elif not inside and not raw and s.startswith("#"):
            out.append(s.lstrip("#").strip())
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_fence_and_table_is_one_block_and_no_code_comment_is_a_heading(page):
    text = page.read_text(encoding="utf-8")
    st = read_markdown(text, mdx=True)
    code = [(b.start, b.end) for b in st.blocks if b.kind == "code"]
    tables = [(b.start, b.end) for b in st.blocks if b.kind == "table"]
    assert code == _fences(text)
    assert tables == _tables(text)
    assert [h.title for h in st.headings] == _headings(text)
    # every block is whole lines of the text as given
    for b in st.blocks:
        assert 0 <= b.start < b.end <= len(text) and (b.start == 0 or text[b.start - 1] == "\n")
        assert all(b.start < p < b.end and text[p - 1] == "\n" for p in b.pieces)
    # CommonMark alone reads them otherwise: the failure this mode is for (a code comment as a heading)
    plain = read_markdown(text)
    assert [(b.start, b.end) for b in plain.blocks if b.kind == "code"] != code
    if page.suffix == ".mdx":
        assert [h.title for h in plain.headings] != _headings(text)


def test_elements_nest_and_wrap_what_they_hold():
    text = (PAGES[1]).read_text(encoding="utf-8")  # install.mdx
    st = read_markdown(text, mdx=True)
    jsx = [b for b in st.blocks if b.kind == "jsx"]
    tabs = [b for b in jsx if text.startswith("<Tabs", b.start)]
    items = [b for b in jsx if text[b.start:].lstrip().startswith("<TabItem")]
    assert len(tabs) == 2 and len(items) == 5
    assert all(text[b.start:b.end].rstrip().endswith("</Tabs>") for b in tabs)
    assert all(text[b.start:b.end].rstrip().endswith("</TabItem>") for b in items)
    assert all(any(t.start <= i.start and i.end <= t.end for t in tabs) for i in items)
    assert {b.level for b in tabs} == {1} and {b.level for b in items} == {2}
    # a multi-line opening tag is one edge; the ESM at the top and the admonition are blocks
    assert any(text[b.start:].startswith("<TabItem\n  value=\"windows\"") for b in items)
    assert text[jsx[0].start:].startswith("import Tabs") and text[jsx[0].start:jsx[0].end].count("\n") == 3
    note = next(b for b in jsx if text.startswith(":::note", b.start))
    assert text[note.start:note.end].rstrip().endswith(":::")
    # an indented fence inside a TabItem is a fence (MDX has no indented code under JSX)
    yaml = next(b for b in st.blocks if b.kind == "code" and "threads: 4" in text[b.start:b.end])
    assert text[yaml.start:yaml.end].lstrip().startswith("```yaml")


def test_raw_html_and_html_inside_code_stay_as_they_are():
    text = PAGES[0].read_text(encoding="utf-8")  # embed.mdx
    st = read_markdown(text, mdx=True)
    html_code = next(b for b in st.blocks if b.kind == "code" and text.startswith("```html", b.start))
    assert "<div id=\"widget\">" in text[html_code.start:html_code.end]  # not read as an element's edge
    pre = next(b for b in st.blocks if b.kind == "html" and text.startswith("<pre>", b.start))
    assert text[pre.start:pre.end].rstrip().endswith("</pre>")
    assert not [b for b in st.blocks if b.start > pre.start and b.end < pre.end]


def test_auto_reads_mdx_files_and_wrapped_fences_and_leaves_other_markdown_alone():
    mdx_page, md_page = PAGES[1].read_text(encoding="utf-8"), PAGES[2].read_text(encoding="utf-8")
    assert check_structure("mdx") == "mdx"
    assert as_read("docs/install.MDX", mdx_page) == SourceText(mdx_page, "mdx")
    assert as_read("README.md", md_page) == SourceText(md_page, "markdown")
    want = read_markdown(mdx_page, mdx=True).blocks
    assert resolve_structure(mdx_page, "auto", "mdx").blocks == want
    assert resolve_structure(mdx_page, "mdx").blocks == want
    assert resolve_structure(mdx_page, "markdown").blocks == read_markdown(mdx_page).blocks != want
    # a .md whose <details> wraps a fence: auto reads it as MDX, from a file or by its looks
    assert resolve_structure(md_page, "auto", "markdown").blocks == read_markdown(md_page, mdx=True).blocks
    wrapped = "Intro text. More of it.\n\n<details>\n```sh\nmake\n\n# a comment\n```\n</details>\n"
    assert looks_like_markdown(wrapped)
    assert [b.kind for b in resolve_structure(wrapped).blocks] == ["paragraph", "jsx", "code"]
    # Markdown whose HTML wraps no fence: exactly CommonMark's reading (an admonition alone changes nothing)
    other = "# A\n\n<div>\n*text*\n</div>\n\n:::note\nhi\n:::\n\n## B\n\n```\nx\n```\n"
    assert resolve_structure(other).blocks == read_markdown(other).blocks
    assert resolve_structure(other, "mdx").blocks != read_markdown(other).blocks


@pytest.fixture(scope="module")
def seg(tiny_bert):
    from headseg import Segmenter

    return Segmenter(model=tiny_bert, backend="torch", window_tokens=64)


@pytest.mark.parametrize("budget", [None, 64, 128])
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_segments_keep_fitting_code_and_tables_whole(seg, page, budget):
    text = page.read_text(encoding="utf-8")
    r = seg.segment(as_read(page.name, text), max_tokens=budget)
    assert "".join(s.text for s in r) == text
    assert r.segments[0].start == 0 and r.segments[-1].end == len(text)
    assert all(s.start == p.end for p, s in zip(r.segments, r.segments[1:]))
    if budget is not None:
        assert all(s.token_count <= budget for s in r)
    measure = TokenCount(text, tokenize(text, seg.encoder.tokenizer), None)
    for a, b in _fences(text) + _tables(text):
        if budget is None or measure.span(a, b) <= budget:
            assert not [c for c in r.boundaries if a < c < b], (text[a:b][:40], budget)
    titles = set(_headings(text))
    assert all(set(s.headings) <= titles for s in r)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_source_text_is_read_as_its_hint_says_and_comes_back_plain(seg, page):
    """A file's hint (SourceText) is an explicit structure under auto: the same segments as naming it,
    through segment, segment_many and a stream's (id, text) pairs; the result holds the plain str."""
    text = page.read_text(encoding="utf-8")
    hinted = as_read(page.name, text)
    # every page here is read as MDX: readme.md is Markdown whose <details> wraps a fence (see above)
    named = "mdx"
    want = seg.segment(text, structure=named, max_tokens=64).to_dict()
    assert seg.segment(hinted, max_tokens=64).to_dict() == want
    [streamed] = seg.iter_segment([("p", hinted)], max_tokens=64)
    assert streamed.meta.pop("document") == "p" and streamed.to_dict() == want
    assert type(seg.segment_many([hinted], max_tokens=64)[0].text) is str
    assert seg.segment(hinted, structure="plain", max_tokens=64).to_dict() == \
        seg.segment(text, structure="plain", max_tokens=64).to_dict()  # an explicit structure wins
