"""Text → sentences → tokenized windows with character offsets.

Every token keeps the character span it came from in the *original* text, so
anything computed on tokens (boundaries, highlights) maps back exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import regex

from .errors import InputError, shown
from .tokenizer import as_tokenizer

# A sentence ends at a Unicode sentence terminal (``\p{Sentence_Terminal}``:
# . ! ? and the Arabic, Devanagari, CJK, Ethiopic... full stops, plus …),
# optionally followed by closing quotes or brackets, or at a line break.
# Latin-style terminals need whitespace after them; the terminals of scripts
# written without spaces between sentences (。！？ in Chinese and Japanese, । in
# Hindi, ؟ and ۔ in Arabic and Urdu...) end a sentence wherever they stand,
# except before a digit (a decimal point such as "１．５").  Deliberately simple
# and predictable; pass ``sentence_splitter=`` to the Segmenter for pysbd or spaCy.
_TERMINAL = r"[\p{Sentence_Terminal}…]"
#: the characters that end a line of plain text, as ``str.splitlines`` reads them (LF, CR, VT, FF, the
#: information separators FS / GS / RS, NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR); CR LF is one break.
#: Text pasted from word processors and PDF tools uses the Unicode ones; old Mac files a lone CR
LINE_BREAK_CHARS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: one line break (a pattern): CR LF, or any of :data:`LINE_BREAK_CHARS`
LINE_BREAK = "\r\n|[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]"
#: finds the next line-break character (``.search(text, start, end)``)
ANY_LINE_BREAK = re.compile(f"[{re.escape(LINE_BREAK_CHARS)}]")
#: what may follow a sentence terminal and still end the sentence: closing brackets and quotes
CLOSER = r"[\p{Pe}\p{Pf}\"']"
#: terminals that need no whitespace after them: every non-ASCII sentence terminal
#: except the dot-like ones also written inside numbers and abbreviations
_UNSPACED = r"[\p{Sentence_Terminal}--[\x00-\x7f\u2024\uFE52\u0589]]"
_SENT_END = regex.compile(
    # never starting inside a run of terminals: each start would rescan the run ('.' * N was quadratic)
    rf"(?<!{_TERMINAL})(?:{_TERMINAL}*{_UNSPACED}{_TERMINAL}*{CLOSER}*(?!\p{{Nd}})|{_TERMINAL}+{CLOSER}*(?=\s))"
    rf"|{LINE_BREAK}",
    regex.V1,
)
# Abbreviations and initials that a full stop does not end a sentence after.
_ABBREV = re.compile(r"(?:\b(?:[A-Z]|Mr|Mrs|Ms|Dr|Prof|St|vs|etc|e\.g|i\.e|cf|Fig|No|Jr|Sr|Inc|Ltd|U\.S)\.)$")
#: the word before a full stop: a dotted abbreviation ("p.m", "z.B") or a number of one or two digits
#: (a German or Nordic ordinal, "am 3. Mai", or a list number "2. ")
_DOTTED = re.compile(r"(?:^|\s)(?:\w{1,3}\.)+\w{1,3}\.$")
_ORDINAL = re.compile(r"(?:^|[\s(])\d{1,2}\.$")
_FULL_STOP = regex.compile(rf"\.{CLOSER}*")


def _full_stop_continues(text: str, stop_end: int, next_start: int) -> bool:
    """Whether the ``.`` ending at ``stop_end`` is inside a sentence; ``next_start``: the next word.

    Not after a known abbreviation, an initial or a one- or two-digit number (a
    German or Nordic ordinal, "am 3. Mai", a list number "2. "; the price: a
    sentence ending in such a number joins the next one); after another dotted
    abbreviation only before a capital ("5 p.m. yesterday" stays whole, "at 9
    a.m. Then" is cut).  A lowercase next word alone is no guard: real
    sentences start lowercase too (transcripts, the Choi corpus).
    """
    nxt = text[next_start:next_start + 1]
    before = text[max(0, stop_end - 12):stop_end]
    if _ABBREV.search(before[-7:]):
        return True
    if _ORDINAL.search(before):
        return True
    if _DOTTED.search(before):
        # "at 9 a.m. Then": a dotted abbreviation before a capital ends the sentence
        return not (nxt and nxt.isupper())
    return False


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Split ``text`` into sentence spans ``[(start, end), ...]`` covering it exactly.

    Trailing whitespace belongs to the sentence before it, so the spans tile the
    text: ``spans[0][0] == 0``, ``spans[-1][1] == len(text)``, no gaps.
    Line breaks always end a sentence (one-sentence-per-line corpora).
    """
    n = len(text)
    if n == 0:
        return []
    cuts = []
    for m in _SENT_END.finditer(text):
        end = m.end()
        # Absorb the whitespace that follows, so spans tile the text.
        while end < n and text[end].isspace():
            end += 1
        if _is_full_stop(m.group(0)) and end > m.end() and _full_stop_continues(text, m.start() + 1, end):
            continue
        if not cuts or end > cuts[-1]:
            cuts.append(end)
    if not cuts or cuts[-1] != n:
        cuts.append(n)
    spans = []
    start = 0
    for c in cuts:
        if c > start:
            spans.append((start, c))
            start = c
    return spans


def _is_full_stop(match: str) -> bool:
    """A single ASCII full stop (closers allowed): the only terminal that abbreviations and numbers share."""
    return _FULL_STOP.fullmatch(match) is not None


def tile_spans(text: str, spans) -> list[tuple[int, int]]:
    """Validate sentence spans from an outside splitter and make them tile ``text``.

    ``spans`` must be ``(start, end)`` integer pairs in order, without overlap,
    inside the text, and everything outside them whitespace (pysbd and spaCy
    leave the spaces between sentences out).  Whitespace between two spans joins
    the span before it (at the start, the first span).  Raises
    :class:`InputError` otherwise.
    """
    out: list[list[int]] = []
    pos = 0
    try:
        pairs = [(a, b) for a, b in spans]
    except (TypeError, ValueError):
        raise InputError("sentence_splitter must return (start, end) pairs of integers") from None
    for a, b in pairs:
        # a float offset (1.0, or 2.7) is a splitter bug: rounding it would cut the text somewhere else
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (a, b)):
            raise InputError(f"sentence_splitter must return (start, end) pairs of integers, got ({shown(a)}, {shown(b)})")
    pairs = [(int(a), int(b)) for a, b in pairs]
    for a, b in pairs:
        if not 0 <= a < b <= len(text):
            raise InputError(f"sentence_splitter returned span ({a}, {b}) outside the text or empty")
        if a < pos:
            raise InputError(f"sentence_splitter returned span ({a}, {b}) overlapping or out of order")
        if text[pos:a].strip():
            raise InputError(f"sentence_splitter left text uncovered at {pos}..{a}: {text[pos:a][:30]!r}")
        if out:
            out[-1][1] = a
            out.append([a, b])
        else:
            out.append([0, b])
        pos = b
    if text[pos:].strip():
        raise InputError(f"sentence_splitter left text uncovered at {pos}..{len(text)}: {text[pos:][:30]!r}")
    if not out:
        if text:
            return [(0, len(text))]
        return []
    out[-1][1] = len(text)
    return [(a, b) for a, b in out]


@dataclass
class TokenizedText:
    """A whole document tokenized once (no special tokens).

    ``ids [N]``, ``offsets [N, 2]`` (character spans in ``text``), ``sentence_ids [N]``,
    ``sentences`` the sentence spans.
    """

    text: str
    ids: np.ndarray
    offsets: np.ndarray
    sentence_ids: np.ndarray
    sentences: list[tuple[int, int]]

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@dataclass
class Window:
    """One model input: special tokens + a contiguous run of the document's tokens.

    Shapes: ``input_ids [T]``, ``offsets [T, 2]`` (special tokens get the empty span
    at the window's edge), ``special [T]`` bool, ``sentence_ids [T]`` (-1 for special
    tokens), ``tokens`` the T token strings.  ``doc_start`` is the index in the
    document's token stream of the first non-special token.
    """

    index: int
    input_ids: np.ndarray
    offsets: np.ndarray
    special: np.ndarray
    sentence_ids: np.ndarray
    tokens: list[str]
    doc_start: int
    start_char: int
    end_char: int

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def content(self) -> np.ndarray:
        """Indices of the non-special tokens."""
        return np.flatnonzero(~self.special)


def tokenize(text: str, tokenizer, sentences: list[tuple[int, int]] | None = None) -> TokenizedText:
    """Tokenize ``text`` once with character offsets and sentence ids."""
    if not isinstance(text, str):
        raise InputError(f"expected text as str, got {type(text).__name__}")
    if sentences is None:
        sentences = split_sentences(text)
    if not text:
        empty = np.zeros(0, dtype=np.int64)
        return TokenizedText(text, empty, np.zeros((0, 2), dtype=np.int64), empty.copy(), [])
    ids, offsets = as_tokenizer(tokenizer).encode(text)
    starts = np.asarray([s for s, _ in sentences], dtype=np.int64)
    sent_ids = np.searchsorted(starts, offsets[:, 0], side="right") - 1 if len(ids) else np.zeros(0, np.int64)
    return TokenizedText(text, ids, offsets, sent_ids.astype(np.int64), list(sentences))


def _specials(tokenizer) -> tuple[list[int], list[int]]:
    """Token ids the tokenizer puts before and after a single sequence."""
    tok = as_tokenizer(tokenizer)
    return tok.before, tok.after


def make_window(
    doc: TokenizedText,
    start: int,
    end: int,
    tokenizer,
    index: int = 0,
    sentence_id: int | None = None,
    with_tokens: bool = True,
) -> Window:
    """The one model input for content tokens ``[start, end)`` of ``doc``: special tokens around them.

    Every window in headseg is built here.  Special tokens get the empty span at
    the window's edge and sentence id -1; ``sentence_id`` overrides the content
    tokens' sentence ids (a segmenter unit, say).  ``with_tokens=False`` skips
    the token strings, which only displays need.
    """
    if not 0 <= start < end <= len(doc):
        raise InputError(f"window [{start}, {end}) is outside the document's {len(doc)} tokens")
    before, after = _specials(tokenizer)
    ids = np.concatenate([np.asarray(before, np.int64), doc.ids[start:end], np.asarray(after, np.int64)])
    c0, c1 = int(doc.offsets[start, 0]), int(doc.offsets[end - 1, 1])
    offsets = np.concatenate(
        [np.full((len(before), 2), c0, np.int64), doc.offsets[start:end], np.full((len(after), 2), c1, np.int64)]
    )
    special = np.zeros(len(ids), dtype=bool)
    special[: len(before)] = True
    special[len(ids) - len(after) :] = True
    content = doc.sentence_ids[start:end] if sentence_id is None else np.full(end - start, sentence_id, np.int64)
    sent = np.concatenate([np.full(len(before), -1, np.int64), content, np.full(len(after), -1, np.int64)])
    return Window(
        index=index,
        input_ids=ids,
        offsets=offsets,
        special=special,
        sentence_ids=sent,
        tokens=as_tokenizer(tokenizer).convert_ids_to_tokens(ids.tolist()) if with_tokens else [],
        doc_start=start,
        start_char=c0,
        end_char=c1,
    )


#: the model window in tokens (special tokens included) that every path cuts text into by default:
#: the unit encoder, the study, ``headseg inspect`` and the TUI
WINDOW_TOKENS = 128


def window_width(tokenizer, max_tokens: int) -> int:
    """Content tokens that fit in a window of ``max_tokens`` with the tokenizer's special tokens."""
    before, after = _specials(tokenizer)
    width = max_tokens - len(before) - len(after)
    if width < 1:
        raise InputError(f"max_tokens={max_tokens} leaves no room for text after {len(before) + len(after)} special tokens")
    return width


def make_windows(
    doc: TokenizedText,
    tokenizer,
    max_tokens: int = WINDOW_TOKENS,
    stride: int | None = None,
) -> list[Window]:
    """Cut a tokenized document into windows of at most ``max_tokens`` tokens.

    ``stride`` is the step, in content tokens, between consecutive window starts;
    ``None`` means no overlap.  The last window is aligned to the end of the
    document so that every window except a single short one is full.
    """
    width = window_width(tokenizer, max_tokens)
    if stride is None:
        stride = width
    if stride < 1 or stride > width:
        raise InputError(f"stride must be between 1 and {width} (got {stride})")
    n = len(doc)
    if n == 0:
        return []
    starts = list(range(0, max(n - width, 0) + 1, stride))
    if starts[-1] + width < n:
        starts.append(n - width)
    return [make_window(doc, s, min(s + width, n), tokenizer, index=wi) for wi, s in enumerate(starts)]


def windows_from_text(text: str, tokenizer, max_tokens: int = WINDOW_TOKENS, stride: int | None = None) -> list[Window]:
    """Convenience: :func:`tokenize` then :func:`make_windows`."""
    return make_windows(tokenize(text, tokenizer), tokenizer, max_tokens=max_tokens, stride=stride)
