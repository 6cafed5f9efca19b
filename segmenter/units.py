"""Sentence-like units from the heads' within-sentence similarity blocks.

In the final layers, context vectors of tokens in the same sentence are similar
to each other and dissimilar to the next sentence's (Halevi et al.): the
similarity matrix is block-diagonal.  A unit boundary is where the block
changes: for each gap between two tokens the *block contrast* is
``1 − cos(mean of the w tokens before, mean of the w tokens after)``, per
selected head (on unit-normalised vectors), weighted by the head profile.

Decoding is left to right and self-synchronising: each model window starts at
the last committed boundary, and only the first clear peak in it is committed.
A boundary therefore depends only on the text from the previous boundary on,
never on where a fixed window grid happens to start.

Line breaks are hard boundaries (one-sentence-per-line and transcript files);
text between line breaks goes through the detector whether or not it has
punctuation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from headseg.analysis.norms import is_punctuation
from headseg.analysis.text import make_window, split_sentences, tile_spans, window_width


@dataclass
class UnitParams:
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
        if c in "\r\n":
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
        prev_end, start = offsets[i - 1, 1], offsets[i, 0]
        gap = text[prev_end:start]
        prev_tok = text[offsets[i - 1, 0]:prev_end]
        ok[i] = (gap != "" and gap.isspace()) or (prev_tok != "" and not prev_tok[-1].isalnum())
    return ok


def detect_line(text: str, doc, tok_lo: int, tok_hi: int, segmenter, params: UnitParams) -> list[int]:
    """Token indices (in the document stream) where units start inside tokens ``[tok_lo, tok_hi)``."""
    tokenizer = segmenter.loaded.tokenizer
    width = window_width(tokenizer, params.window)
    starts = []
    pos = tok_lo
    while tok_hi - pos > params.min_tokens:
        end = min(pos + width, tok_hi)
        win = make_window(doc, pos, end, tokenizer, sentence_id=0, with_tokens=False)
        z = segmenter.capture([win]).z[0][:, ~win.special].astype(np.float64)  # [N, t, d]
        score = block_contrast(z, segmenter.weights, params.block)
        offs = doc.offsets[pos:end]
        ok = _allowed_gaps(text, offs)
        t = end - pos
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
        chosen = None
        toks = [text[a:b] for a, b in offs]
        for i in range(1, t):
            lo, hi = max(i - params.radius, 1), min(i + params.radius + 1, t)
            if not (z_score[i] >= params.threshold and score[i] >= score[lo:hi].max()):
                continue
            # The contrast peaks on either side of a separator ("day | . | worker"):
            # the separator closes its unit, so the boundary goes after it.
            j = i
            while j < t and is_punctuation(toks[j]):
                j += 1
            if j < t and valid[j]:
                chosen = int(j)
                break
        if chosen is None:
            if end >= tok_hi:
                break
            # no clear peak in a full window: cut at the strongest allowed gap so
            # that a unit never runs past one window
            cand = np.flatnonzero(valid)
            chosen = int(cand[np.argmax(score[cand])]) if cand.size else t - 1
        pos += chosen
        starts.append(pos)
    return starts


def find_units(text: str, segmenter=None, doc=None, params: UnitParams | None = None, mode: str = "auto",
               sentence_splitter=None):
    """Unit spans tiling ``text``.

    ``sentence_splitter``: a callable ``text -> [(start, end), ...]`` (pysbd,
    spaCy...) that replaces the sentence rules in the "rules" and "auto" modes;
    its spans are validated and made to tile the text
    (:func:`analysis.text.tile_spans`).
    ``mode="rules"``: sentence rules only (punctuation, line breaks).
    ``mode="heads"``: line breaks, then the head detector inside every line.
    ``mode="auto"``: sentence rules, and the head detector inside any unit longer
    than ``params.auto_tokens`` (text without punctuation, e.g. transcripts).
    """
    params = params or UnitParams()

    def sentences():
        if sentence_splitter is None:
            return split_sentences(text)
        return tile_spans(text, sentence_splitter(text))

    if mode == "rules" or segmenter is None:
        return _merge_blank(text, sentences())
    if doc is None:
        from headseg.analysis.text import tokenize

        doc = tokenize(text, segmenter.loaded.tokenizer)
    base = _lines(text) if mode == "heads" else sentences()
    base = _merge_blank(text, base)
    if len(doc) == 0:
        return base
    tok_start = doc.offsets[:, 0]
    out = []
    for a, b in base:
        lo, hi = int(np.searchsorted(tok_start, a)), int(np.searchsorted(tok_start, b))
        if mode == "auto" and hi - lo <= params.auto_tokens:
            out.append((a, b))
            continue
        cuts = [int(doc.offsets[s, 0]) for s in detect_line(text, doc, lo, hi, segmenter, params)]
        # the whitespace before a cut belongs to the unit before it
        edges = [a] + [c for c in cuts if a < c < b] + [b]
        out.extend(zip(edges[:-1], edges[1:]))
    return out
