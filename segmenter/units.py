"""Sentence-like units from the heads' within-sentence similarity blocks.

In the final layers, context vectors of tokens in the same sentence are similar
to each other and dissimilar to the next sentence's (Halevi et al.): the
similarity matrix is block-diagonal.  A unit boundary is where the block
changes: for each gap between two tokens the *block contrast* is
``1 − cos(mean of the w tokens before, mean of the w tokens after)``, per
selected head (on unit-normalised vectors), weighted by the head profile.

Decoding is left to right and self-synchronising: each model window starts at
the last committed boundary.  With ``UnitParams.commit="first"`` only the first
clear peak in it is committed, so a boundary depends only on the text from the
previous boundary on; the default ``"all"`` commits every clear peak before the
window's last ``margin`` tokens, which needs about half the windows
(docs/performance.md compares the two).  Windows of many decoders go through
the model in shared batches (:func:`detect_lines`).

Line breaks are hard boundaries (one-sentence-per-line and transcript files);
text between line breaks goes through the detector whether or not it has
punctuation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import regex

from headseg.analysis.norms import is_punctuation
from headseg.analysis.progress import progress_bar
from headseg.analysis.text import CLOSER, LINE_BREAK_CHARS, make_window, split_sentences, tile_spans, window_width

from .runs import filler_pieces, grid_starts, may_start


@dataclass
class UnitParams:
    """Knobs of the unit detector for long unpunctuated stretches (the heads' block contrast)."""

    #: tokens per model window when detecting units
    window: int = 64
    #: tokens on each side of a gap in the block contrast
    block: int = 4
    #: a peak must stand this many standard deviations above the window's mean contrast
    threshold: float = 1.5
    #: no unit shorter than this many tokens (except at a line break / text end)
    min_tokens: int = 4
    #: neighbourhood, in gaps, inside which a peak must be the maximum
    radius: int = 3
    #: in "auto" mode, only a rule-based unit longer than this many tokens goes
    #: through the detector: long real sentences stay whole, unpunctuated
    #: transcripts (thousands of tokens per "sentence") get cut
    auto_tokens: int = 120
    #: "all": commit every clear peak of a window up to ``margin`` tokens before its end, and start the
    #: next window at the last one (about 2.5x fewer model windows); "first": commit only the first
    #: peak, so that every boundary depends only on the text from the previous boundary on (the
    #: original decoder; docs/performance.md compares the two)
    commit: str = "all"
    #: with commit="all", peaks this close to a window's end wait for the next window (right context)
    margin: int = 16


#: an enumeration label on its own: "1.", "6.4", "(b)", "IV.", "A )"
_LABEL = regex.compile(r"^[(\[]?(?:\d+(?:[.\-]\d+)*|\p{L}|[IVXLCivxlc]+)\s*[.):\]]?\s*\.?$")
#: a numbered heading: "2. Related work", "3.1 Methods", "B) Results"
_NUMBERED = regex.compile(r"^[(\[]?(?:\d+(?:\.\d+)*|\p{Lu}|[IVXLC]+)[.):\]]?\s+\w")
_MARKDOWN = regex.compile(r"^#{1,6}\s")
#: a MediaWiki heading: "== History ==", "=== Early life ===" (and WikiText's spaced "= = Plot = =")
_MEDIAWIKI = regex.compile(r"^(?:=\s?){1,6}[^=\s](?:.*[^=\s])?(?:\s?=){1,6}$")
_WORD = regex.compile(r"\w[\w'\u2019-]*")
#: a sentence terminal at the end, closing quotes or brackets after it (the closers of the sentence rules)
_TERMINAL = regex.compile(rf"\p{{Sentence_Terminal}}{CLOSER}*$")


def looks_like_heading(text: str, max_words: int = 4) -> bool:
    """Whether a line reads as a heading or a label rather than a sentence.

    True for a Markdown or MediaWiki heading, an enumeration label ("1.", "6.4", "(b)"), a
    numbered heading without a sentence terminal ("3.1 Methods") and a short
    title whose words all start with a capital or a digit ("Introduction",
    "Elburn, Ill.") unless it ends in ``?`` or ``!``.  Scripts without case
    have no titles by this rule, only labels and Markdown headings.  Short
    replies that are capitalised ("OK.") pass too; the caller bounds the length.
    """
    s = text.strip()
    if not s:
        return False
    if _MARKDOWN.match(s) or _MEDIAWIKI.match(s) or _LABEL.match(s):
        return True
    if _NUMBERED.match(s) and not _TERMINAL.search(s):
        return True
    words = _WORD.findall(s)
    return (0 < len(words) <= max_words and not s.endswith(("?", "!"))
            and all(w[0].isupper() or w[0].isdigit() for w in words))


def _merge_blank(text: str, spans):
    """Attach whitespace-only spans to the previous unit (or the next one at the start)."""
    out = []
    for a, b in spans:
        if out and (not text[a:b].strip() or not text[out[-1][0]:out[-1][1]].strip()):
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _lines(text: str):
    """Spans of lines (line break included) tiling the text."""
    spans, start = [], 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in LINE_BREAK_CHARS:
            end = i + 2 if c == "\r" and i + 1 < n and text[i + 1] == "\n" else i + 1
            spans.append((start, end))
            start = i = end
            continue
        i += 1
    if start < n:
        spans.append((start, n))
    return spans


def block_contrast(z: np.ndarray, weights: np.ndarray, block: int) -> np.ndarray:
    """Contrast at every gap of one window.

    ``z [N, T, d]`` context vectors of the content tokens (no special tokens),
    ``weights [N]`` → ``[T]`` where entry ``i`` scores the gap before token ``i``
    (entry 0 is 0: no gap before the first token).
    """
    n, t, _ = z.shape
    zn = z / np.maximum(np.linalg.norm(z, axis=-1, keepdims=True), 1e-12)
    c = np.concatenate([np.zeros((n, 1, zn.shape[2])), np.cumsum(zn, axis=1)], axis=1)  # [N, T+1, d]
    out = np.zeros(t)
    if t < 2:
        return out
    i = np.arange(1, t)
    lo = np.maximum(i - block, 0)
    hi = np.minimum(i + block, t)
    left = c[:, i] - c[:, lo]
    right = c[:, hi] - c[:, i]
    cos = np.einsum("nid,nid->ni", left, right) / np.maximum(
        np.linalg.norm(left, axis=-1) * np.linalg.norm(right, axis=-1), 1e-12)
    out[1:] = weights @ (1.0 - cos)
    return out


def _allowed_gaps(text: str, offsets: np.ndarray) -> np.ndarray:
    """``[T]``: True where a unit may start at token ``i`` (a word start, not inside a word)."""
    t = len(offsets)
    ok = np.zeros(t, bool)
    for i in range(1, t):
        ok[i] = may_start(text, offsets, i)
    return ok


def _decide(text: str, doc, pos: int, tok_hi: int, z: np.ndarray, weights: np.ndarray,
            params: UnitParams) -> list[int] | None:
    """The next unit starts after ``pos`` from the window ``[pos, pos + t)`` (``z [N, t, d]``), or None: done.

    One start with ``params.commit == "first"``; every clear peak before the margin with "all".
    """
    t = z.shape[1]
    end = pos + t
    score = block_contrast(z, weights, params.block)
    offs = doc.offsets[pos:end]
    ok = _allowed_gaps(text, offs)
    valid = ok.copy()
    valid[: params.min_tokens] = False
    if end < tok_hi:
        # leave room at the right edge: the contrast there sees only a partial block
        valid[max(t - params.block, 0):] = False
    else:
        valid[max(t - params.min_tokens + 1, 0):] = False
    gaps = score[1:]
    mu, sd = gaps.mean(), gaps.std() + 1e-12
    z_score = (score - mu) / sd
    toks = [text[a:b] for a, b in offs]
    many = params.commit == "all"
    # later commits of one window need right context; at the stretch's end there is none to wait for
    last_ok = t if end >= tok_hi else t - params.margin
    commits: list[int] = []
    for i in range(1, t):
        lo, hi = max(i - params.radius, 1), min(i + params.radius + 1, t)
        if not (z_score[i] >= params.threshold and score[i] >= score[lo:hi].max()):
            continue
        # The contrast peaks on either side of a separator ("day | . | worker"):
        # the separator closes its unit, so the boundary goes after it.
        j = i
        while j < t and is_punctuation(toks[j]):
            j += 1
        if not (j < t and valid[j]):
            continue
        if not commits:
            commits.append(int(j))
            if not many:
                break
        elif j < last_ok and j - commits[-1] >= params.min_tokens and tok_hi - (pos + j) >= params.min_tokens:
            commits.append(int(j))
    if commits:
        return [pos + j for j in commits]
    if end >= tok_hi:
        return None
    # No clear peak in a full window: cut at the strongest allowed gap of its second half, so
    # that a unit never runs past one window and the next window starts at least half a window
    # on (the contrast near a window's start sees partial context and wins on flat or repetitive
    # text: "word word ..." was cut every min_tokens tokens, one 64-token window per 4 tokens).
    cand = np.flatnonzero(valid)
    late = cand[cand >= t // 2]
    cand = late if late.size else cand
    return [pos + (int(cand[np.argmax(score[cand])]) if cand.size else t - 1)]


#: decoders start this many tokens apart (see detect_lines): enough of them to fill batches,
#: few joins (each costs a window or two)
CHUNK_TOKENS = 256
#: a decoder that runs this many tokens past the next decoder's start without meeting its chain
#: is joined to it (see detect_lines): on repetitive text the chains never meet exactly, and each
#: would otherwise run to the end of the text, which made the detector quadratic
JOIN_TOKENS = 128

_PENDING = object()


def _chain_from(link: dict[int, int | None], start: int, at_least: int):
    """The first boundary ``>= at_least`` on the chain from ``start``, None for the range's end, or
    :data:`_PENDING` when that chain is not decided that far yet."""
    q: int | None = start
    while True:
        if q is None or q >= at_least:
            return q
        if q not in link:
            return _PENDING
        q = link[q]


def detect_lines(text: str, doc, ranges, encoder, params: UnitParams, progress=None) -> list[list[int]]:
    """Unit starts (token indices) inside each token range ``[lo, hi)`` of ``ranges``, batched.

    The left-to-right decoder is a function of the boundary a window starts
    at: that window decides the next boundary (or, with ``commit="all"``, the
    next few).  Instead of one model call per step, decoders start at every
    range and every :data:`CHUNK_TOKENS` tokens inside one, and all of them
    advance together, one batch of windows per step.  Each boundary records
    its successor; a decoder stops at the first boundary that already has one
    (another decoder's chain, which it joins).  The result is the chain from
    each range's start.  With ``commit="first"`` the successor of a boundary
    depends on that boundary alone, so the result is exactly the
    one-call-per-unit decoder's as long as the chains meet; on natural text
    they meet within a few units, so the extra windows are few.  A decoder that
    has run :data:`JOIN_TOKENS` past the next decoder's start without meeting
    its chain (repetitive text, where the boundaries of two chains never
    coincide) is joined to that chain at its first boundary at least
    ``min_tokens`` on, so every token is covered by at most about
    ``1 + JOIN_TOKENS / CHUNK_TOKENS`` decoders: the work is linear in the text.
    ``encoder``: the :class:`~headseg.segmenter.encode.UnitEncoder` whose detection heads
    are read; ``progress``: an open bar to update (windows), or None.
    """
    tokenizer = encoder.tokenizer
    width = window_width(tokenizer, params.window)
    batch = encoder.batch_size
    link: list[dict[int, int | None]] = [{} for _ in ranges]  # boundary -> next boundary (None: the end)
    # A fixed grid (not one derived from the batch size): the result must not depend on batching.
    chunk = CHUNK_TOKENS
    active = []  # (range index, window start, the next decoder's start in the range or None)
    for r, (lo, hi) in enumerate(ranges):
        grid = list(range(lo, max(hi - params.min_tokens, lo + 1), chunk))
        active.extend((r, p, nxt) for p, nxt in zip(grid, grid[1:] + [None]))
    while active:
        step, seen, waiting = [], set(), []
        for r, p, nxt in active:
            if p in link[r] or (r, p) in seen:
                continue  # joined a known chain (or a twin in this step)
            if ranges[r][1] - p <= params.min_tokens:
                link[r][p] = None
                continue
            if nxt is not None and p >= nxt + JOIN_TOKENS:
                q = _chain_from(link[r], nxt, p + params.min_tokens)
                if q is _PENDING:
                    waiting.append((r, p, nxt))  # the next decoder is behind: wait for it
                else:
                    link[r][p] = q
                continue
            seen.add((r, p))
            step.append((r, p, nxt))
        if not step and waiting and len(waiting) == len(active):
            raise RuntimeError("unit detector: decoders wait on each other")  # a bug, never user input
        windows = [make_window(doc, p, min(p + width, ranges[r][1]), tokenizer, sentence_id=0, with_tokens=False)
                   for r, p, _ in step]
        moved = []
        for b0 in range(0, len(step), batch):
            wins = windows[b0:b0 + batch]
            acts = encoder.capture(wins)
            for (r, p, nxt), w, z in zip(step[b0:b0 + batch], wins, acts.z):
                zc = z[:, : len(w)][:, ~w.special].astype(np.float64)  # [N, t, d]
                q = _decide(text, doc, p, ranges[r][1], zc, encoder.detect_weights, params)
                if q is None:
                    link[r][p] = None
                    continue
                chain, joined = [p] + q, False
                for a, b in zip(chain[:-1], chain[1:]):
                    if a != p and a in link[r]:
                        joined = True
                        break
                    link[r][a] = b
                if not joined:
                    moved.append((r, chain[-1], nxt))
            if progress is not None:
                progress.update(len(wins))
        active = moved + waiting
    out = []
    for r, (lo, hi) in enumerate(ranges):
        starts, p = [], lo
        while True:
            if p not in link[r]:
                raise RuntimeError(f"unit detector: no decision at token {p}")  # a bug, never user input
            p = link[r][p]
            if p is None:
                break
            starts.append(p)
        out.append(starts)
    return out


def find_units(text: str, encoder=None, doc=None, params: UnitParams | None = None, mode: str = "auto",
               sentence_splitter=None, progress: bool = False):
    """Unit spans tiling ``text``.

    ``encoder``: the :class:`~headseg.segmenter.encode.UnitEncoder` whose heads cut long
    unpunctuated stretches (None: sentence rules only).
    ``sentence_splitter``: a callable ``text -> [(start, end), ...]`` (pysbd,
    spaCy...) that replaces the sentence rules in the "rules" and "auto" modes;
    its spans are validated and made to tile the text
    (:func:`analysis.text.tile_spans`).
    ``mode="rules"``: sentence rules only (punctuation, line breaks).
    ``mode="heads"``: line breaks, then the head detector inside every line.
    ``mode="auto"``: sentence rules, and the head detector inside any unit longer
    than ``params.auto_tokens`` (text without punctuation, e.g. transcripts).
    ``progress=True``: a bar on stderr (on a terminal) while long unpunctuated text
    goes through the detector.
    """
    params = params or UnitParams()

    def sentences():
        if sentence_splitter is None:
            return split_sentences(text)
        return tile_spans(text, sentence_splitter(text))

    if mode == "rules" or encoder is None:
        return _merge_blank(text, sentences())
    if doc is None:
        from headseg.analysis.text import tokenize

        doc = tokenize(text, encoder.tokenizer)
    base = _lines(text) if mode == "heads" else sentences()
    base = _merge_blank(text, base)
    if len(doc) == 0:
        return base
    tok_start = doc.offsets[:, 0]
    spans = []
    for a, b in base:
        lo, hi = int(np.searchsorted(tok_start, a)), int(np.searchsorted(tok_start, b))
        spans.append((a, b, lo, hi, not (mode == "auto" and hi - lo <= params.auto_tokens)))
    if mode == "auto":  # a long stretch of punctuation alone, or of a few tokens repeated, has nothing for the heads
        spans = [piece for span in spans for piece in filler_pieces(text, doc, span)]
    todo = [(lo, hi) for a, b, lo, hi, detect in spans if detect is True]
    found = iter(())
    if todo:
        tokens = sum(hi - lo for lo, hi in todo)
        # A bar only where the detector has real work (long unpunctuated text): short texts stay quiet.
        quiet = not progress or tokens < 8192
        with progress_bar(total=None, desc="unit detection", disable=quiet, unit="window") as bar:
            found = iter(detect_lines(text, doc, todo, encoder, params, progress=bar))
    out = []
    for a, b, lo, hi, detect in spans:
        if not detect:
            out.append((a, b))
            continue
        starts = grid_starts(text, doc.offsets, lo, hi) if detect == "grid" else next(found)
        cuts = [int(doc.offsets[s, 0]) for s in starts]
        # the whitespace before a cut belongs to the unit before it
        edges = [a] + [c for c in cuts if a < c < b] + [b]
        out.extend(zip(edges[:-1], edges[1:]))
    return out
