"""Texts and checks shared by the framework adapter tests."""

from __future__ import annotations

#: A paragraph that occurs five times: a chunk's text alone cannot tell where it is.
PARAGRAPH = ("The river rose quickly after the storm. Farmers moved their cattle to higher ground! "
             "Nobody in the village slept that night.\n\n")
OTHER = "Stock markets fell sharply on Tuesday. Investors worried about interest rates.\n\n"
REPEATED = PARAGRAPH * 3 + OTHER + PARAGRAPH * 2
#: Units (sentence rules, no model involved): the second one also occurs inside the first,
#: so a search for its text from just after the previous start finds the wrong place.
ECHO = "We said it rained. it rained. Then the sun came out. "
ECHO_UNITS = [(0, 19), (19, 30), (30, 53)]


def assert_tiles(text: str, spans: list[tuple[int, int]], chunks: list[str]) -> None:
    """Every chunk is exactly ``text[start:end]`` and the chunks cover ``text`` in order, without gaps."""
    assert len(spans) == len(chunks) and chunks
    pos = 0
    for (a, b), chunk in zip(spans, chunks):
        assert a == pos and b > a
        assert text[a:b] == chunk
        pos = b
    assert pos == len(text)
    assert "".join(chunks) == text


def naive_find_offsets(text: str, chunks: list[str]) -> list[int]:
    """Where a str.find from just after the previous start puts each chunk (LlamaIndex's method)."""
    out, pos = [], 0
    for c in chunks:
        i = text.find(c, pos)
        out.append(i)
        pos = i + 1
    return out
