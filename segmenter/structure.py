"""The structure of a Markdown document: its blocks with exact character offsets, and its headings.

One job: read the structure, never decide a cut.  :func:`read_markdown` parses
CommonMark with GFM tables (``markdown-it-py``, pure Python, block rules only:
the inline rules are off, a heading's title is its source text) and turns the
parser's line maps into character offsets of the text as given (line breaks
``\\n``, ``\\r\\n`` or ``\\r``, as the parser's own normalisation counts them).
A leading ``---`` ... ``---`` (or ``...``) block is front matter, not a
thematic break and a setext heading.  Each :class:`Block` says where it may be
cut when it is larger than a budget (``pieces``: the start of each line of
code, each table row after the header, each item of a list, each line of a
quote or an HTML block); whether it is cut is the search's
(:mod:`headseg.segmenter.blocks`).

:func:`looks_like_markdown` is the ``structure="auto"`` rule: a fence, a GFM
table or two ATX headings (``#`` ...); prose, transcripts and MediaWiki text
have none of them.  :func:`resolve_structure` applies the option; ``mdx`` (``auto`` for a ``.mdx``
file and for Markdown whose HTML blocks wrap a fence or a table) first reads the JSX and HTML tag
lines as element edges (:mod:`headseg.segmenter.jsx`), so what they wrap is Markdown.

Cost: one parse, O(N) in the characters (about 2 MB/s), and O(B log B) to
order the blocks; :meth:`Structure.heading_path` is O(log H + depth).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import lru_cache

from headseg.analysis.errors import InputError, shown

from . import jsx

#: the ``structure`` option's values: read Markdown when the text looks like it, always, or never
#: (``mdx``: Markdown whose JSX and HTML tag lines wrap Markdown, as MDX and Docusaurus read it)
STRUCTURES = ("auto", "markdown", "mdx", "plain")
#: the kinds of :class:`Block`
KINDS = ("heading", "paragraph", "code", "table", "list", "list_item", "blockquote", "html", "front_matter", "hr",
         "jsx", "definitions")
#: the kinds a search must not cut while they fit its budget (cut between their ``pieces`` otherwise)
ATOMIC = frozenset({"code", "table", "list", "list_item", "blockquote", "html", "front_matter", "jsx",
                    "definitions"})


@dataclass(frozen=True)
class Block:
    """One block of a document: ``text[start:end]`` (whole lines, the last line break included).

    ``level``: a heading's level (1-6) or a list's and a list item's depth (1 the outermost),
    else 0; ``title``: a heading's text; ``pieces``: offsets inside the block where it may be cut
    when larger than a budget (sorted, each a line start strictly inside ``(start, end)``).
    """

    kind: str
    start: int
    end: int
    level: int = 0
    title: str = ""
    pieces: tuple[int, ...] = ()


@dataclass(frozen=True)
class Structure:
    """The blocks of one text in document order (an enclosing block before the ones inside it)."""

    text: str
    blocks: tuple[Block, ...]
    #: the headings' starts, blocks and parents (the index of the heading each is under, -1 for none),
    #: for :meth:`heading_path` (built once, O(H))
    _heads: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        heads = tuple(b for b in self.blocks if b.kind == "heading")
        parents: list[int] = []
        open_: list[int] = []  # the path after the heading before: indices, levels strictly rising
        for j, h in enumerate(heads):
            while open_ and heads[open_[-1]].level >= h.level:
                open_.pop()
            parents.append(open_[-1] if open_ else -1)
            open_.append(j)
        object.__setattr__(self, "_heads", ([h.start for h in heads], heads, parents))

    @property
    def headings(self) -> tuple[Block, ...]:
        """The heading blocks, in document order."""
        return self._heads[1]

    def up_to(self, level: int) -> "Structure":
        """The same blocks without the headings deeper than ``level`` (their lines read as prose): the
        structure a coarse level of a segment tree is searched with, anchored by the higher headings."""
        return Structure(self.text, tuple(b for b in self.blocks if b.kind != "heading" or b.level <= level))

    def breaks(self) -> list[int]:
        """Sorted offsets inside the text where a unit must end: every block start and every piece."""
        out = {b.start for b in self.blocks} | {p for b in self.blocks for p in b.pieces}
        return sorted(o for o in out if 0 < o < len(self.text))

    def heading_path(self, offset: int) -> list[str]:
        """The titles of the headings above ``offset`` (a heading starting there included), outermost first.

        Leading whitespace at ``offset`` is skipped, so a segment that opens on the blank lines
        before a heading is under that heading.
        """
        heads = self._heads
        pos = offset
        while pos < len(self.text) and self.text[pos].isspace():
            pos += 1
        i = bisect.bisect_right(heads[0], pos) - 1  # the last heading at or before pos
        path: list[Block] = []
        while i >= 0:  # up the parents: at most six steps, levels falling
            path.append(heads[1][i])
            i = heads[2][i]
        path.reverse()
        return [h.title for h in path]


def line_starts(text: str) -> list[int]:
    """Offsets of every line start, and ``len(text)`` last: the parser's line ``l`` is
    ``text[starts[l]:starts[l + 1]]`` (``\\r\\n``, ``\\r`` and ``\\n`` each end a line, as its
    normalisation reads them)."""
    out, i, n = [0], 0, len(text)
    while i < n:
        c = text[i]
        if c == "\r" and i + 1 < n and text[i + 1] == "\n":
            i += 2
            out.append(i)
        elif c in "\r\n":
            i += 1
            out.append(i)
        else:
            i += 1
    if out[-1] != n:
        out.append(n)
    return out


@lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    # block structure only: a heading's title is its source text, and prose costs no inline pass
    md.core.ruler.disable(["inline", "text_join"], ignoreInvalid=True)
    return md


def _front_matter(lines: list[str]) -> int:
    """Lines of a leading front matter block (``---`` ... ``---`` or ``...``), 0 for none."""
    if not lines or lines[0].rstrip() != "---":
        return 0
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            return i + 1
    return 0


def read_markdown(text: str, mdx: bool | None = False) -> Structure:
    """The :class:`Structure` of ``text`` read as Markdown (CommonMark with GFM tables, front matter).

    ``mdx=True`` reads it as MDX does (:mod:`headseg.segmenter.jsx`): a line of JSX or HTML tags
    only is an element's edge, not an HTML block, so a fence or a table it wraps is one, and the
    element (kind ``jsx``), an admonition (``:::note`` ... ``:::``) and a leading ``import`` or
    ``export`` are blocks; ``None`` does so when an HTML block wraps a fence or a table.
    """
    if not isinstance(text, str):
        raise InputError(f"expected text as str, got {type(text).__name__}")
    starts = line_starts(text)
    lines = [text[a:b] for a, b in zip(starts[:-1], starts[1:])]
    n_lines = len(lines)
    front = _front_matter(lines)
    # the front matter's lines stay, emptied, so the parser's line numbers are the text's
    bare = [""] * front + [line.rstrip("\r\n") for line in lines[front:]]
    plan = jsx.plan(bare) if mdx is not False else None
    if plan is not None and (mdx or plan.wraps):
        bare = ["" if li in plan.blank else line[plan.dedent.get(li, 0):] for li, line in enumerate(bare)]
    else:
        plan = None
    tokens = _parser().parse("\n".join(bare))

    def at(line: int) -> int:
        return starts[min(line, n_lines)]

    def inner(l0: int, l1: int, first: int = 1) -> tuple[int, ...]:
        return tuple(at(li) for li in range(l0 + first, l1))

    blocks: list[Block] = []
    if front:
        blocks.append(Block("front_matter", 0, at(front), pieces=inner(0, front - 1, first=2)))
    open_: list[tuple[str, int, int, list[int]]] = []  # kind, first line, depth, child starts
    depth = 0
    for i, t in enumerate(tokens):
        if t.nesting == -1:
            if t.type in ("bullet_list_close", "ordered_list_close", "list_item_close", "blockquote_close",
                          "table_close"):
                kind, l0, lvl, children = open_.pop()
                if kind == "list":
                    depth -= 1
                blocks[lvl] = _finished(blocks[lvl], children, kind)
            continue
        if t.map is None:
            continue
        l0, l1 = t.map
        a, b = at(l0), at(l1)
        if t.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
            blocks.append(Block("list", a, b, level=depth))
            open_.append(("list", l0, len(blocks) - 1, []))
        elif t.type == "list_item_open":
            if open_ and open_[-1][0] == "list":
                open_[-1][3].append(a)
            blocks.append(Block("list_item", a, b, level=depth))
            open_.append(("list_item", l0, len(blocks) - 1, []))
        elif t.type == "blockquote_open":
            blocks.append(Block("blockquote", a, b, pieces=inner(l0, l1)))
            open_.append(("blockquote", l0, len(blocks) - 1, []))
        elif t.type == "table_open":
            blocks.append(Block("table", a, b))
            open_.append(("table", l0, len(blocks) - 1, []))
        elif t.type == "tr_open":
            if open_ and open_[-1][0] == "table" and l0 > open_[-1][1]:
                open_[-1][3].append(a)  # a body row (the header and the delimiter row stay together)
        elif t.type == "heading_open":
            title = tokens[i + 1].content.strip() if i + 1 < len(tokens) else ""
            blocks.append(Block("heading", a, b, level=int(t.tag[1:]), title=title))
        elif t.type == "paragraph_open":
            esm = plan is not None and t.level == 0 and jsx.is_esm(lines[l0])
            blocks.append(Block("jsx" if esm else "paragraph", a, b))
        elif t.type == "fence":
            # the opening fence stays with the first line of code, the closing one with the last
            closed = l1 - l0 >= 2 and lines[l1 - 1].strip().startswith(t.markup)
            blocks.append(Block("code", a, b, pieces=inner(l0, l1 - closed, first=2)))
        elif t.type == "code_block":
            blocks.append(Block("code", a, b, pieces=inner(l0, l1)))
        elif t.type == "html_block":
            blocks.append(Block("html", a, b, pieces=inner(l0, l1)))
        elif t.type == "hr":
            blocks.append(Block("hr", a, b))
    blocks += [Block("definitions", at(l0), at(l1), pieces=inner(l0, l1)) for l0, l1 in _definitions(tokens, bare)]
    if plan is not None:
        blocks += [Block("jsx", at(l0), at(l1), level=d) for l0, l1, d in plan.elements]
        blocks += [Block("html", at(l0), at(l1), pieces=inner(l0, l1)) for l0, l1 in plan.loose]
    blocks.sort(key=lambda blk: (blk.start, -blk.end))
    return Structure(text, tuple(blocks))


def _definitions(tokens, bare: list[str]) -> list[tuple[int, int]]:
    """The line ranges ``[l0, l1)`` of the top-level link reference definitions (``[id]: url``): the parser
    keeps them and emits no token, so they are the lines with text that no top-level token covers.  A
    run of them is one block (``definitions``), read like code: no topic lives in a URL, so its lines
    are grouped (:mod:`~headseg.segmenter.verbatim`) and cut only between them."""
    covered = [False] * len(bare)
    for t in tokens:
        if t.level == 0 and t.map is not None:
            for li in range(t.map[0], min(t.map[1], len(bare))):
                covered[li] = True
    out: list[tuple[int, int]] = []
    for li, line in enumerate(bare):
        if covered[li] or not line.strip():
            continue
        if out and out[-1][1] == li:
            out[-1] = (out[-1][0], li + 1)
        else:
            out.append((li, li + 1))
    return out


def _finished(block: Block, children: list[int], kind: str) -> Block:
    """A list with its items' starts as pieces, a table with its body rows'."""
    if kind not in ("list", "table"):
        return block
    pieces = tuple(sorted(c for c in set(children) if block.start < c < block.end))
    return Block(block.kind, block.start, block.end, block.level, block.title, pieces)


def looks_like_markdown(text: str) -> bool:
    """Whether ``text`` reads as Markdown: a code fence, a GFM table, at least two ATX headings, an
    HTML block that wraps a fence (``<details>`` or ``<Tabs>`` written directly around one), or at
    least two link reference definitions (``[id]: url`` lines)."""
    if "```" not in text and "~~~" not in text and "|" not in text and "#" not in text and "]:" not in text:
        return False  # prose without a fence, a table, a heading marker or a definition: no parse needed
    atx = 0
    env: dict = {}
    tokens = _parser().parse(text, env)
    if len(env.get("references", ())) >= 2:
        return True
    for t in tokens:
        if t.type == "fence" or t.type == "table_open":
            return True
        if t.type == "html_block" and _WRAPPED_FENCE.search(t.content):
            return True
        if t.type == "heading_open" and t.markup.startswith("#"):
            atx += 1
            if atx >= 2:
                return True
    return False


#: a fence's opening line inside an HTML block's text
_WRAPPED_FENCE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)


def check_structure(value: object) -> str:
    """``value`` if it is one of :data:`STRUCTURES` (raises :class:`InputError` otherwise)."""
    if not isinstance(value, str) or value not in STRUCTURES:
        raise InputError(f"structure must be one of {', '.join(STRUCTURES)} (got {shown(value)})")
    return value


#: what a text's source can say of it under ``structure="auto"``: Markdown, or Markdown read as MDX
HINTS = ("markdown", "mdx")


@dataclass(frozen=True)
class SourceText:
    """A text and what its source says it is (:func:`as_read`): ``hint`` ``"markdown"`` for a ``.md`` or
    ``.markdown`` file's, ``"mdx"`` for a ``.mdx`` file's; ``structure="auto"`` then reads it so whatever
    it looks like (an explicit ``structure`` wins).  The input stream and the pipeline unwrap it
    (:func:`text_of`, :func:`resolve_structure`'s ``hint``): results hold the plain text."""

    text: str
    hint: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InputError(f"expected text as str, got {type(self.text).__name__}")
        if self.hint not in HINTS:
            raise InputError(f"a source's hint must be one of {', '.join(HINTS)} (got {shown(self.hint)})")


#: the file suffixes whose text is Markdown
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")


def as_read(path: str, text: str) -> str | SourceText:
    """``text`` read from ``path``: a :class:`SourceText` hinted ``markdown`` for a Markdown file's
    (``mdx`` for a ``.mdx`` file's), else as it is."""
    suffix = str(path).lower()
    if isinstance(text, str) and suffix.endswith(MARKDOWN_SUFFIXES):
        return SourceText(text, "mdx" if suffix.endswith(".mdx") else "markdown")
    return text


def text_of(item: object) -> str | None:
    """The text of an input item: a str as it is, a :class:`SourceText`'s text; None for anything else."""
    if isinstance(item, SourceText):
        return item.text
    return item if isinstance(item, str) else None


def resolve_structure(text: str, structure: str = "auto", hint: str | None = None) -> Structure | None:
    """The structure the ``structure`` option gives ``text``: read as Markdown (``markdown``, or
    ``auto`` with a ``hint`` from the text's source (:class:`SourceText`) or when
    :func:`looks_like_markdown`), as MDX (``mdx``, or ``auto`` with the hint ``mdx`` or for Markdown whose
    HTML blocks wrap a fence or a table), else None (plain text)."""
    check_structure(structure)
    if hint is not None and hint not in HINTS:
        raise InputError(f"hint must be one of {', '.join(HINTS)} or None (got {shown(hint)})")
    if structure == "plain" or not text.strip():
        return None
    if structure == "auto" and hint is None and not looks_like_markdown(text):
        return None
    mdx = {"markdown": False, "mdx": True}.get(structure, True if hint == "mdx" else None)
    return read_markdown(text, mdx=mdx)
