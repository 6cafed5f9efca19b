"""JSX and HTML wrappers in Markdown read as their authors mean them: the plan of ``structure="mdx"``.

CommonMark reads a line that is only a tag (``<Tabs>``, ``<TabItem value="py">``, ``<details>``)
as the start of an HTML block that runs to the next blank line, so a fence or a table written
directly inside it is HTML text: a search cuts inside the code and a ``# comment`` in it reads as
a heading.  MDX (and every Docusaurus page) means the opposite: the tag lines are JSX, what they
wrap is Markdown.  :func:`plan` finds, in the HTML blocks of a first parse, the lines that are
tags only (outside fences it tracks itself, and outside ``<pre>``, ``<script>``, ``<style>``,
``<textarea>`` and comments, whose text is raw), matches opening and closing tags into
elements, and says which lines the parser must read as blank (the tag lines), how far to dedent
the lines an element wraps (MDX has no indented code inside JSX: a fence indented under its tag
is a fence), and which elements, tag runs and admonitions (``:::note`` ... ``:::``) there are.
:mod:`headseg.segmenter.structure` parses again with that plan; line numbers never change, so
offsets stay exact.

Cost: O(L) in the lines (each line scanned once, an opening tag over lines read up to
:data:`MAX_TAG_LINES` ahead; every tag O(1) amortised, :class:`_Elements`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: elements whose text is raw (CommonMark's HTML block type 1): never read as Markdown
RAW = frozenset({"pre", "script", "style", "textarea"})
#: HTML's void elements: an opening tag that never closes
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
                  "track", "wbr"})
_NAME = re.compile(r"[A-Za-z][\w.:-]*")
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)$")
_ADMONITION = re.compile(r"[ \t]*(:{3,})[ \t]*([A-Za-z][\w-]*)?.*$")
_ESM = re.compile(r"(import|export)\b")
#: one element with its text on one line (``<summary>More</summary>``): read as a tag line too
_ONE_LINE = re.compile(r"<([A-Za-z][\w.:-]*)(?:\s[^<>]*)?>[^<>]*</\1\s*>")
#: at most this many lines joined to read one opening tag that spans lines (``<TabItem\n value="py">``)
MAX_TAG_LINES = 16


@dataclass
class Plan:
    """What the second parse reads differently (every index a 0-based line number)."""

    #: lines the parser reads as blank: tag-only lines and admonition fences
    blank: set[int] = field(default_factory=set)
    #: columns stripped from the start of a line inside an element
    dedent: dict[int, int] = field(default_factory=dict)
    #: matched elements and admonitions: ``(first line, line after the last, depth)``, depth 1 outermost
    elements: list[tuple[int, int, int]] = field(default_factory=list)
    #: runs of tag lines that open or close no element (``<Foo />``, ``<img src=...>``): ``(l0, l1)``
    loose: list[tuple[int, int]] = field(default_factory=list)
    #: whether some HTML block held a fence or a table line outside raw text (``auto`` reads such text as MDX)
    wraps: bool = False


def _scan_tags(s: str) -> list[tuple[str, str]] | None:
    """``s`` (a line or lines, stripped) as a sequence of tags only: ``(kind, name)`` each, kind
    ``open``, ``close``, ``self`` or ``other`` (a comment, an expression ``{...}``); ``None`` when
    ``s`` holds anything else, ``[("partial", "")]`` when it ends inside a tag."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(s)
    while i < n:
        if s[i].isspace():
            i += 1
            continue
        if s.startswith("<!--", i):
            j = s.find("-->", i + 4)
            if j < 0:
                return None
            out.append(("other", ""))
            i = j + 3
            continue
        if s[i] == "{":  # an MDX expression, a {/* comment */} say
            j = _balanced(s, i)
            if j < 0:
                return None
            out.append(("other", ""))
            i = j
            continue
        if s[i] != "<":
            return None
        i += 1
        closing = i < n and s[i] == "/"
        i += closing
        m = _NAME.match(s, i)
        name = m.group(0) if m else ""  # "" is a fragment, <> or </>
        if m is None and (i >= n or s[i] != ">"):
            return None
        i = m.end() if m else i
        if m and i < n and not (s[i].isspace() or s[i] == ">" or s.startswith("/>", i)):
            return None  # <https://x> is an autolink, <a@b> an address
        selfclosing = False
        while True:  # attributes: quoted strings and {expressions} may hold '>'
            if i >= n:
                return [("partial", "")]
            c = s[i]
            if c in "\"'":
                j = s.find(c, i + 1)
                if j < 0:
                    return [("partial", "")]
                i = j + 1
            elif c == "{":
                j = _balanced(s, i)
                if j < 0:
                    return [("partial", "")]
                i = j
            elif c == "<":
                return None
            elif c == ">":
                selfclosing = s[i - 1] == "/"
                i += 1
                break
            else:
                i += 1
        kind = "close" if closing else "self" if selfclosing or name.lower() in VOID else "open"
        out.append((kind, name))
    return out or None


def _balanced(s: str, i: int) -> int:
    """The offset after the ``}`` that closes the ``{`` at ``s[i]``, -1 if none."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "{":
            depth += 1
        elif s[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


class _Open:
    """An element or admonition opened and not yet closed."""

    __slots__ = ("name", "line", "depth", "least", "cut", "merged")

    def __init__(self, name: str, line: int, depth: int):
        self.name, self.line, self.depth = name, line, depth
        self.least = 1 << 30  # the least indentation of its non-blank inner lines so far
        self.cut = 0  # what its own lines lose once it is closed
        self.merged: _Open | None = None  # never closed: its lines are its parent's


class _Elements:
    """The open elements, a line's innermost one and the least indentation inside each, kept so that
    every line and every tag costs O(1) amortised (closing tags are matched by name through counts:
    a closing tag that matches nothing open costs no walk down the stack)."""

    def __init__(self, n: int):
        self.stack: list[_Open] = []
        self.counts: dict[str, int] = {}
        self.owner: list[_Open | None] = [None] * n

    def line(self, li: int, indent: int, owner: _Open | None = None) -> None:
        """A non-blank line ``li`` inside ``owner`` (default: the innermost open element, if any)."""
        top = owner if owner is not None else self.stack[-1] if self.stack else None
        if top is not None:
            self.owner[li] = top
            top.least = min(top.least, indent)

    def open(self, name: str, li: int) -> None:
        self.stack.append(_Open(name, li, len(self.stack) + 1))
        self.counts[name] = self.counts.get(name, 0) + 1

    def close(self, name: str) -> _Open | None:
        """The element ``name`` closes (inner ones left open are merged into their parents), or None."""
        if not self.counts.get(name):
            return None
        while True:
            e = self.stack.pop()
            self.counts[e.name] -= 1
            parent = self.stack[-1] if self.stack else None
            if parent is not None:
                parent.least = min(parent.least, e.least)
            if e.name == name:
                e.cut = e.least if e.least < 1 << 30 else 0
                return e
            e.merged = parent

    def dedents(self) -> dict[int, int]:
        """Each line's columns to strip: its innermost closed element's ``cut``."""
        out: dict[int, int] = {}
        for li, e in enumerate(self.owner):
            root = e
            while root is not None and root.merged is not None:
                root = root.merged
            while e is not None and e.merged is not None:  # path compression: each chain walked once
                e.merged, e = root, e.merged
            if root is not None and root.cut:
                out[li] = root.cut
        return out


def plan(lines: list[str]) -> Plan:
    """The :class:`Plan` of a document of ``lines`` (line breaks stripped), one pass: fences are
    tracked here (CommonMark's first reading cannot be trusted past a fence an HTML block swallowed:
    a blank line in the code ends the block, and the closing fence then opens one).  Each line
    strictly inside an element loses up to the least indentation of the element's non-blank inner
    lines (the innermost element's)."""
    out = Plan()
    els = _Elements(len(lines))
    fence: tuple[str, int] | None = None  # an open fence: its character, its length
    raw: str | None = None  # the end of raw text: "</pre>" and the like, or "-->"
    run: list[int] = []  # the tag lines of the current run
    matched = False  # whether a tag of the run opened or closed an element
    after_tag = False  # whether the line before was a tag line (no blank line between)

    def end_run() -> None:
        nonlocal matched
        if run and not matched:
            out.loose.append((run[0], run[-1] + 1))
        run.clear()
        matched = False

    def closed(e: _Open | None, last: int) -> bool:
        if e is not None:
            out.elements.append((e.line, last + 1, e.depth))
        return e is not None

    li, n = 0, len(lines)
    while li < n:
        line = lines[li]
        stripped = line.strip()
        if stripped and (fence is not None or raw is not None):
            els.line(li, _indent(line))  # code and raw text: inner lines of the element they are in
        if fence is not None:
            m = _FENCE.match(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1] and not m.group(2).strip():
                fence = None
            li += 1
            continue
        if raw is not None:
            if raw in stripped.lower():
                raw = None
            li += 1
            continue
        was_after, after_tag = after_tag, False
        if not stripped or (not els.stack and _indent(line) >= 4):  # blank, or indented code outside JSX
            end_run()
            li += 1
            continue
        m = _FENCE.match(line)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            els.line(li, _indent(line))
            out.wraps = out.wraps or was_after
            end_run()
            fence = (m.group(1)[0], len(m.group(1)))
            li += 1
            continue
        m = _ADMONITION.fullmatch(line)
        if m:
            end_run()
            if m.group(2):  # :::note opens
                els.line(li, _indent(line))
                els.open(m.group(1), li)
                out.blank.add(li)
            elif closed(els.close(m.group(1)), li):  # ::: closes the innermost one of as many colons
                out.blank.add(li)
            els.line(li, _indent(line))
            li += 1
            continue
        one = _ONE_LINE.fullmatch(stripped)
        tags, last = ([("self", one.group(1))] if one and one.group(1).lower() not in RAW
                      else _scan_tags(stripped)), li
        if tags == [("partial", "")]:  # an opening tag over lines: up to the first line holding a '>'
            ends = [k for k in range(li + 1, min(n, li + MAX_TAG_LINES)) if ">" in lines[k]][:1]
            last = ends[0] if ends else li
            tags = _scan_tags(" ".join(x.strip() for x in lines[li:last + 1])) if ends else None
        if not tags or tags == [("partial", "")]:
            els.line(li, _indent(line))
            end_run()
            out.wraps = out.wraps or (was_after and stripped.startswith("|"))
            if stripped.startswith("<!--") and "-->" not in stripped:
                raw = "-->"
            opened = re.match(r"<([A-Za-z]+)", stripped)
            if opened and opened.group(1).lower() in RAW and f"</{opened.group(1).lower()}" not in stripped.lower():
                raw = f"</{opened.group(1).lower()}"
            li += 1
            continue
        depth = len(els.stack)  # a tag line belongs to the shallowest element open during it
        for kind, name in tags:
            if kind == "open" and name.lower() in RAW:
                raw = f"</{name.lower()}"
                break
            if kind == "open":
                els.open(name, li)
                matched = True
            elif kind == "close":
                matched = closed(els.close(name), last) or matched
                depth = min(depth, len(els.stack))
        if depth:
            for x in range(li, last + 1):
                if lines[x].strip():
                    els.line(x, _indent(lines[x]), els.stack[depth - 1])
        if raw is not None:  # <pre> and its kind: raw text, left to CommonMark's HTML block
            end_run()
            li = last + 1
            continue
        for x in range(li, last + 1):
            out.blank.add(x)
            run.append(x)
        after_tag = True
        li = last + 1
    end_run()
    while els.stack:  # never closed: no element
        e = els.stack.pop()
        e.merged = els.stack[-1] if els.stack else None
    out.dedent = els.dedents()
    return out


def is_esm(first_line: str) -> bool:
    """Whether a top-level paragraph opening with ``first_line`` is MDX's ESM (``import``/``export``)."""
    return _ESM.match(first_line) is not None
