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

Cost: O(L) in the lines of the HTML blocks (each line scanned once, the element stack at most
as deep as the nesting).
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
MAX_TAG_LINES = 32


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


def plan(lines: list[str]) -> Plan:
    """The :class:`Plan` of a document of ``lines`` (line breaks stripped), one pass: fences are
    tracked here (CommonMark's first reading cannot be trusted past a fence an HTML block swallowed:
    a blank line in the code ends the block, and the closing fence then opens one)."""
    out = Plan()
    stack: list[tuple[str, int]] = []  # open elements and admonitions: name (":::" for one), first line
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

    li, n = 0, len(lines)
    while li < n:
        line = lines[li]
        stripped = line.strip()
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
        if not stripped or (not stack and _indent(line) >= 4):  # blank, or indented code outside JSX
            end_run()
            li += 1
            continue
        m = _FENCE.match(line)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            out.wraps = out.wraps or was_after
            end_run()
            fence = (m.group(1)[0], len(m.group(1)))
            li += 1
            continue
        m = _ADMONITION.fullmatch(line)
        if m:
            end_run()
            if m.group(2):  # :::note opens
                stack.append((m.group(1), li))
                out.blank.add(li)
            else:  # ::: closes the innermost admonition opened with as many colons
                for k in range(len(stack) - 1, -1, -1):
                    if stack[k][0] == m.group(1):
                        out.elements.append((stack[k][1], li + 1, k + 1))
                        del stack[k:]
                        out.blank.add(li)
                        break
            li += 1
            continue
        one = _ONE_LINE.fullmatch(stripped)
        tags, last = ([("self", one.group(1))] if one and one.group(1).lower() not in RAW
                      else _scan_tags(stripped)), li
        while tags == [("partial", "")] and last + 1 < min(n, li + MAX_TAG_LINES):
            last += 1
            tags = _scan_tags(" ".join(x.strip() for x in lines[li:last + 1]))
        if not tags or tags == [("partial", "")]:
            end_run()
            out.wraps = out.wraps or (was_after and stripped.startswith("|"))
            if stripped.startswith("<!--") and "-->" not in stripped:
                raw = "-->"
            opened = re.match(r"<([A-Za-z]+)", stripped)
            if opened and opened.group(1).lower() in RAW and f"</{opened.group(1).lower()}" not in stripped.lower():
                raw = f"</{opened.group(1).lower()}"
            li += 1
            continue
        for kind, name in tags:
            if kind == "open" and name.lower() in RAW:
                raw = f"</{name.lower()}"
                break
            if kind == "open":
                stack.append((name, li))
                matched = True
            elif kind == "close":
                for k in range(len(stack) - 1, -1, -1):
                    if stack[k][0] == name:
                        out.elements.append((stack[k][1], last + 1, k + 1))
                        del stack[k:]
                        matched = True
                        break
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
    _dedent(lines, out)
    return out


def _dedent(lines: list[str], out: Plan) -> None:
    """Each line strictly inside an element loses up to the least indentation of the element's
    non-blank inner lines (the innermost element's, as elements are listed inner first)."""
    for l0, l1, _ in out.elements:
        inner = [li for li in range(l0 + 1, l1 - 1) if lines[li].strip() and li not in out.dedent]
        if not inner:
            continue
        cut = min(_indent(lines[li]) for li in inner)
        if cut:
            for li in inner:
                out.dedent[li] = cut


def is_esm(first_line: str) -> bool:
    """Whether a top-level paragraph opening with ``first_line`` is MDX's ESM (``import``/``export``)."""
    return _ESM.match(first_line) is not None
