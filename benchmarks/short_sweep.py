"""Sweep the topic search's paragraph knobs on the short-document and the paragraph dev families.

The search's preparation reads the text (paragraph starts, line groups), so unlike
``benchmarks/tune_topics.py`` (one sentence a line) this runs the real preparation,
``topics.document_boundaries``, on cached unit vectors.  The vectors of
``benchmarks/data/short_dev.jsonl``, ``paragraphs_dev.jsonl`` and ``short_sections_dev.jsonl``
(``benchmarks/short_docs.py`` builds them) are computed once into ``--cache`` (default
``runs/short_cache``, git-ignored), then every design is a search per document.

    python -m benchmarks.short_sweep                                    # today's defaults
    python -m benchmarks.short_sweep paragraph_bonus=0,0.3,0.6 paragraph_count=4,8

Prints, per design, the short family's Pk and share of documents with exactly the reference
boundaries (overall and by what joins the paragraphs) and the paragraph family's Pk and
segment counts (Wiki-50 dev and Clinical written in paragraphs: most paragraph breaks are no
boundary there, so a prior that trusts them too much shows as too many segments), and the short
guard's (one or two segments written as 2-3 paragraphs each: Pk and exact, overall and by the
number of segments).
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.common import BENCH_DATA, REPO, offline_settings

SETS = ("short_dev", "paragraphs_dev", "short_sections_dev")


def cache(path: Path, name: str) -> list[dict]:
    """The documents of ``name`` with their units, unit tokens and unit vectors (computed once)."""
    out = path / f"{name}.pkl"
    if out.is_file():
        with open(out, "rb") as fh:
            return pickle.load(fh)
    from headseg.api import Segmenter
    from headseg.segmenter.evaluation.loaders import iter_documents
    from headseg.segmenter.options import SegmentOptions

    seg = Segmenter(quiet=True)
    docs = []
    for d in iter_documents(BENCH_DATA / f"{name}.jsonl"):
        p = seg.document(d.text, SegmentOptions())
        docs.append({"id": d.id, "text": d.text, "units": list(p.units), "x": seg.unit_vectors(p.tokens, p.units),
                     "tokens": p.unit_tokens.astype(np.int64), "starts": d.starts, "bounds": d.boundaries})
    path.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        pickle.dump(docs, fh)
    tmp.replace(out)
    return docs


def predict(docs: list[dict], params, given: bool = False) -> dict[str, list[int]]:
    """Per document: the boundaries found (reference unit indices, as ``bounds``).

    ``given``: the search is told the reference number of segments (``segments=k``).
    """
    from headseg.analysis.model import load_model
    from headseg.analysis.text import tokenize
    from headseg.segmenter.document import Document
    from headseg.segmenter.evaluation.loaders import snap_offsets
    from headseg.segmenter.options import SegmentOptions
    from headseg.segmenter.topics import document_boundaries

    tok = load_model(None, weights=False).tokenizer
    out = {}
    for d in docs:
        opts = SegmentOptions(segments=len(d["bounds"]) + 1) if given else SegmentOptions()
        # the cached units over the text's tokens, as plain text (no Markdown structure), as before
        doc = Document.build(d["text"], tokenize(d["text"], tok), d["units"])
        cuts = document_boundaries(doc, d["x"], opts.request(), params).cuts
        out[d["id"]] = snap_offsets([d["units"][c][0] for c in cuts], d["starts"], len(d["text"]))
    return out


def score(docs: list[dict], params, given: bool = False) -> dict[str, tuple[float, bool, int, int]]:
    """Per document: Pk, exact reference boundaries, predicted and reference segment counts (:func:`predict`)."""
    from headseg.segmenter.evaluation.metrics import score_document

    found = predict(docs, params, given)
    out = {}
    for d in docs:
        hyp = found[d["id"]]
        s = score_document(d["bounds"], hyp, len(d["starts"]))
        out[d["id"]] = (s.pk, hyp == d["bounds"], len(hyp) + 1, len(d["bounds"]) + 1)
    return out


def summary(short: dict, para: dict, sections: dict) -> str:
    def part(res, pick, label):
        v = [r for i, r in res.items() if pick(i)]
        return f"{label} {np.mean([r[0] for r in v]):.3f}/{100 * np.mean([r[1] for r in v]):.0f}%"

    cells = [part(short, lambda i: True, "short all"),
             *(part(short, lambda i, j=j: i.endswith(j), j) for j in ("blank", "line", "space"))]
    for src in ("wiki50", "clinical"):
        v = [r for i, r in para.items() if i.startswith(src)]
        cells.append(f"para {src} Pk {np.mean([r[0] for r in v]):.3f} segs {np.mean([r[2] for r in v]):.1f}"
                     f"/{np.mean([r[3] for r in v]):.1f}")
    cells.append(part(sections, lambda i: True, "sections"))
    cells += [part(sections, lambda i, k=k: i.split("-")[-2] == k, f"{k} seg") for k in ("1", "2")]
    return "  ".join(cells)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("designs", nargs="*", help="KNOB=V1,V2,... (TopicParams fields); the grid of all")
    ap.add_argument("--cache", type=Path, default=REPO / "runs" / "short_cache")
    args = ap.parse_args(argv)
    offline_settings()
    from headseg.segmenter.topics import TopicParams

    data = {name: cache(args.cache, name) for name in SETS}
    base = TopicParams()
    grid = [[(k, type(getattr(base, k))(float(v))) for v in vs.split(",")]
            for k, vs in (d.split("=", 1) for d in args.designs)]
    for design in itertools.product(*grid) if grid else [()]:
        params = replace(base, **dict(design))
        label = ",".join(f"{k}={v:g}" for k, v in design) or "defaults"
        print(f"{label:45s} {summary(*(score(data[name], params) for name in SETS))}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
