"""Retrieval evaluation of chunkers: do a chunker's chunks bring back the passages that answer questions?

Data in the form of Smith & Troynikov's chunking benchmark ("Evaluating
Chunking Strategies for Retrieval", 2024): a folder with ``corpora/*.md`` (or
``*.txt``) and ``questions.jsonl``, one ``{"question", "corpus", "references":
[{"start", "end", "text"}]}`` per line, where ``corpus[start:end] == text``
(character offsets; checked on load).

The metric is the benchmark's: the chunks of *all* corpora go into one index;
each question retrieves its top ``k`` chunks by cosine between embeddings
(:class:`~.embeddings.MeanPooledEmbedder`, the embedded model, by default);
with ``covered`` the characters of the question's references that the
retrieved chunks cover,

* recall = covered / |references|,
* precision = covered / |retrieved| (the retrieved chunks' total length),
* IoU = covered / (|retrieved| + |references| − covered),

averaged over questions (overall and per corpus).  Chunks are character spans
``(start, end)`` of their corpus, so any chunker (headseg, LangChain's
recursive splitter, fixed token windows...) is scored on exact offsets.

Overlapping chunks (a chunker's ``overlap``) are scored as the benchmark scores
them: ``covered`` counts a reference character once however many retrieved
chunks hold it (the union), while ``|retrieved|`` is the *sum* of the retrieved
chunks' lengths, so text that two retrieved chunks share is paid for twice in
precision and IoU.

Parent-child retrieval (LangChain's ``ParentDocumentRetriever``, LlamaIndex's
``AutoMergingRetriever``): the small chunks are indexed and retrieved, and each
retrieved chunk is replaced by its parent span, every parent once, in the order
its first chunk was retrieved (:func:`evaluate_chunks` with ``parents``;
:func:`headseg_tree_chunker` gives headseg's segment tree so, the leaves and each
leaf's parent node).  Scores are then those of the parents' spans.

Cost: one embedding per chunk and per question, one ``[Q, C]`` matrix product.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from headseg.analysis.errors import InputError
from headseg.analysis.reading import read_text

Span = tuple[int, int]
#: a chunker: corpus text -> chunk spans (character offsets, in order; they may overlap)
Chunker = Callable[[str], Sequence[Span]]
#: a parent-child chunker: corpus text -> (chunk spans, the parent span of each chunk)
ParentChunker = Callable[[str], tuple[Sequence[Span], Sequence[Span]]]


@dataclass(frozen=True)
class Question:
    """One question of a retrieval set and the reference spans that answer it, in corpus ``corpus``."""

    text: str
    corpus: str
    references: tuple[Span, ...]


@dataclass(frozen=True)
class RetrievalSet:
    """Corpora (name -> text) and the questions about them."""

    corpora: Mapping[str, str]
    questions: tuple[Question, ...]

    def __post_init__(self) -> None:
        for i, q in enumerate(self.questions):
            if q.corpus not in self.corpora:
                raise InputError(f"question {i + 1}: no corpus named '{q.corpus}'")
            n = len(self.corpora[q.corpus])
            if not q.references or any(not 0 <= s < e <= n for s, e in q.references):
                raise InputError(f"question {i + 1}: references must be non-empty spans inside '{q.corpus}'")


def load_retrieval(path: str | Path, corpora: Iterable[str] | None = None) -> RetrievalSet:
    """The retrieval set in folder ``path`` (``corpora/`` + ``questions.jsonl``), optionally only ``corpora``.

    Raises :class:`InputError` for a missing file, a malformed line, or a
    reference whose ``text`` is not the corpus text at its offsets.
    """
    root = Path(path)
    qfile = root / "questions.jsonl"
    if not qfile.is_file() or not (root / "corpora").is_dir():
        raise InputError(f"{root}: expected corpora/ and questions.jsonl")
    try:
        files = [f for f in sorted((root / "corpora").iterdir()) if f.suffix in (".md", ".txt")]
    except OSError as exc:
        raise InputError(f"{root}: cannot read the retrieval set ({type(exc).__name__}: {exc})") from None
    # headseg's reader: one-line errors for binary, undecodable, oversized or unreadable files
    texts = {f.stem: read_text(f, allow_empty=True) for f in files}
    lines = read_text(qfile, allow_empty=True).splitlines()
    if not texts:
        raise InputError(f"{root}: no corpus (*.md or *.txt) in corpora/")
    wanted = set(texts) if corpora is None else set(corpora)
    if wanted - set(texts):
        raise InputError(f"{root}: no corpus {', '.join(sorted(wanted - set(texts)))}")
    questions = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            if not isinstance(d, dict) or not isinstance(d["references"], list):
                raise TypeError("expected an object with a list of references")
            refs = tuple((int(r["start"]), int(r["end"])) for r in d["references"])
            name, text = str(d["corpus"]), str(d["question"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{qfile}:{n}: not a question record ({type(exc).__name__}: {exc})") from None
        if name not in wanted:
            continue
        corpus = texts.get(name, "")
        for r, (s, e) in zip(d["references"], refs):
            if "text" in r and corpus[s:e] != r["text"]:
                raise InputError(f"{qfile}:{n}: reference {s}:{e} is not the text of corpus '{name}' there")
        questions.append(Question(text, name, refs))
    if not questions:
        raise InputError(f"{qfile}: no question about the corpora {', '.join(sorted(wanted))}")
    return RetrievalSet({k: v for k, v in texts.items() if k in wanted}, tuple(questions))


def _merged(spans: Iterable[Span]) -> list[Span]:
    """The union of ``spans`` as sorted disjoint spans."""
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _overlap(a: Sequence[Span], b: Sequence[Span]) -> int:
    """Characters in both unions of sorted disjoint spans ``a`` and ``b``."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return total


def question_scores(retrieved: Sequence[Span], references: Sequence[Span], foreign: int = 0) -> dict[str, float]:
    """IoU, recall and precision of the retrieved chunk spans against the reference spans of one question.

    ``foreign``: characters of retrieved chunks from other corpora (retrieved, covering nothing).
    """
    refs = _merged(references)
    ref_len = sum(e - s for s, e in refs)
    got_len = sum(e - s for s, e in retrieved) + foreign
    covered = _overlap(_merged(retrieved), refs)
    return {"iou": covered / max(got_len + ref_len - covered, 1), "recall": covered / max(ref_len, 1),
            "precision": covered / max(got_len, 1)}


@dataclass
class RetrievalScores:
    """Mean IoU / recall / precision over questions, overall and per corpus, and the chunks' sizes."""

    overall: dict[str, float]
    per_corpus: dict[str, dict[str, float]]
    chunks: int
    mean_chunk_tokens: float
    per_question: list[dict[str, float]] = field(repr=False, default_factory=list)

    def to_dict(self) -> dict:
        """The scores as a JSON-ready dict (fractions, not ×100), without the per-question list."""
        return {"overall": self.overall, "per_corpus": self.per_corpus, "chunks": self.chunks,
                "mean_chunk_tokens": self.mean_chunk_tokens}


def format_table(rows: Sequence[tuple[str, RetrievalScores]], corpora: Sequence[str]) -> str:
    """A Markdown table of scored chunkers ``(name, scores)``: chunks, mean size, overall IoU / recall /
    precision (×100), then IoU / recall per corpus."""
    head = " | ".join(f"{c} IoU / R" for c in corpora)
    lines = [f"| chunker | chunks | mean tokens | IoU | recall | precision | {head} |",
             "|---|---:|---:|---:|---:|---:|" + "---:|" * len(corpora)]
    lines += [format_row(name, sc, corpora) for name, sc in rows]
    return "\n".join(lines)


def format_row(name: str, sc: RetrievalScores, corpora: Sequence[str]) -> str:
    """One row of :func:`format_table`."""
    per = " | ".join(f"{100 * sc.per_corpus[c]['iou']:.2f} / {100 * sc.per_corpus[c]['recall']:.1f}"
                     if c in sc.per_corpus else "–" for c in corpora)
    o = sc.overall
    return (f"| {name} | {sc.chunks} | {sc.mean_chunk_tokens:.0f} | {100 * o['iou']:.2f} | "
            f"{100 * o['recall']:.1f} | {100 * o['precision']:.2f} | {per} |")


def evaluate_chunks(rs: RetrievalSet, chunks: Mapping[str, Sequence[Span]], embed: Callable[[Sequence[str]], np.ndarray],
                    k: int = 5, count_tokens: Callable[[str], int] | None = None,
                    question_vectors: np.ndarray | None = None,
                    parents: Mapping[str, Sequence[Span]] | None = None) -> RetrievalScores:
    """Score one chunking (corpus name -> chunk spans) of ``rs`` with embedder ``embed`` (texts -> ``[N, D]``,
    unit length) at top ``k``.  ``question_vectors [Q, D]`` may be passed to embed the questions once.

    ``parents`` (corpus name -> one span per chunk, aligned with ``chunks``): parent-child
    retrieval.  The top ``k`` chunks are retrieved, and what is scored is their parents'
    spans, each parent once; ``mean_chunk_tokens`` is then the mean size of the distinct
    parents (what a question gets back), ``chunks`` still the number indexed.
    """
    if k < 1:
        raise InputError("k must be at least 1")
    index: list[tuple[str, Span]] = []
    returned: list[tuple[str, Span]] = []  # what retrieving index[i] hands back: the chunk, or its parent
    for name in rs.corpora:
        text = rs.corpora[name]
        spans = [(int(s), int(e)) for s, e in chunks[name]]
        if any(not 0 <= s < e <= len(text) for s, e in spans):
            raise InputError(f"a chunk of '{name}' is empty or outside the corpus")
        index.extend((name, sp) for sp in spans)
        if parents is None:
            returned.extend((name, sp) for sp in spans)
            continue
        ups = [(int(s), int(e)) for s, e in parents[name]]
        if len(ups) != len(spans) or any(not (ps <= s and e <= pe) for (s, e), (ps, pe) in zip(spans, ups)):
            raise InputError(f"'{name}': every chunk needs one parent span that contains it")
        returned.extend((name, sp) for sp in ups)
    texts = [rs.corpora[name][s:e] for name, (s, e) in index]
    c = embed(texts)
    q = embed([x.text for x in rs.questions]) if question_vectors is None else question_vectors
    sims = q @ c.T  # [Q, C]
    per_q = []
    for qi, question in enumerate(rs.questions):
        top = np.argsort(-sims[qi], kind="stable")[:k]
        got = list(dict.fromkeys(returned[t] for t in top))  # a parent two of its chunks bring back, once
        mine = [sp for name, sp in got if name == question.corpus]
        foreign = sum(e - s for name, (s, e) in got if name != question.corpus)
        per_q.append(dict(question_scores(mine, question.references, foreign), corpus=question.corpus))
    names = ("iou", "recall", "precision")
    overall = {m: float(np.mean([p[m] for p in per_q])) for m in names}
    per_corpus = {name: {m: float(np.mean([p[m] for p in per_q if p["corpus"] == name])) for m in names}
                  for name in rs.corpora if any(p["corpus"] == name for p in per_q)}
    sized = texts if parents is None else [rs.corpora[name][s:e] for name, (s, e) in dict.fromkeys(returned)]
    sizes = [count_tokens(t) for t in sized] if count_tokens else [len(t) for t in sized]
    return RetrievalScores(overall, per_corpus, len(index), float(np.mean(sizes)) if sizes else 0.0, per_q)


def chunk_all(rs: RetrievalSet, chunker: Chunker) -> dict[str, list[Span]]:
    """Each corpus of ``rs`` chunked by ``chunker``."""
    return {name: [(int(s), int(e)) for s, e in chunker(text)] for name, text in rs.corpora.items()}


def chunk_all_with_parents(rs: RetrievalSet, chunker: ParentChunker) -> tuple[dict[str, list[Span]],
                                                                               dict[str, list[Span]]]:
    """Each corpus of ``rs`` chunked by a parent-child ``chunker``: ``(chunks, parents)``, aligned per corpus,
    as :func:`evaluate_chunks` takes them."""
    chunks, parents = {}, {}
    for name, text in rs.corpora.items():
        leaves, ups = chunker(text)
        chunks[name] = [(int(s), int(e)) for s, e in leaves]
        parents[name] = [(int(s), int(e)) for s, e in ups]
    return chunks, parents


def fixed_token_chunker(max_tokens: int, tokenize: Callable[[str], np.ndarray]) -> Chunker:
    """Consecutive windows of ``max_tokens`` tokens (``tokenize(text) -> [T, 2]`` character offsets of the tokens),
    each chunk from its first token's start to the next chunk's first token's start."""

    def chunk(text: str) -> list[Span]:
        offs = np.asarray(tokenize(text))
        if not len(offs):
            return [(0, len(text))] if text else []
        starts = [0] + [int(offs[i, 0]) for i in range(max_tokens, len(offs), max_tokens)]
        return [(a, b) for a, b in zip(starts, starts[1:] + [len(text)]) if b > a]

    return chunk


def recursive_chunker(max_tokens: int, count_tokens: Callable[[str], int]) -> Chunker:
    """LangChain's ``RecursiveCharacterTextSplitter`` at ``max_tokens`` (no overlap), offsets found in order."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=max_tokens, chunk_overlap=0, length_function=count_tokens)

    def chunk(text: str) -> list[Span]:
        out, pos = [], 0
        for piece in splitter.split_text(text):
            s = text.find(piece, pos)
            if s < 0:
                raise InputError("the recursive splitter returned text that is not in the corpus")
            out.append((s, s + len(piece)))
            pos = s + len(piece)
        return out

    return chunk


def headseg_chunker(segmenter, options=None, **overrides) -> Chunker:
    """headseg's chunks (``segmenter.segment(text, options, **overrides)``) as spans: its segments, or
    with ``overlap`` the overlapped chunks of ``result.meta["chunks"]``."""

    def chunk(text: str) -> list[Span]:
        result = segmenter.segment(text, options, **overrides)
        spans = result.meta.get("chunks")
        return [tuple(c) for c in spans] if spans is not None else [(s.start, s.end) for s in result]

    return chunk


def headseg_tree_chunker(segmenter, options=None, **overrides) -> ParentChunker:
    """headseg's segment tree (``level="tree"``) as parent-child chunks: the leaves (the segments, under
    ``max_tokens`` when given), each with its parent node's span; a leaf directly under the
    document (a tree of one level there) is its own parent, since the document is no chunk."""

    def chunk(text: str) -> tuple[list[Span], list[Span]]:
        result = segmenter.segment(text, options, **{**overrides, "level": "tree"})
        nodes = {n.id: n for n in result.tree_nodes()}
        inner = result.inner_ids()
        leaves = [n for n in nodes.values() if n.id not in inner]
        ups = [nodes[n.parent] if n.parent is not None else n for n in leaves]
        return [(n.start, n.end) for n in leaves], [(p.start, p.end) for p in ups]

    return chunk
