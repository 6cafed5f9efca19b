"""Exactly right on issue 48's short families: headseg, the embedding baseline and never cutting.

For each text of the families ``benchmarks/short_families.py`` builds (``short_one_dev``,
``short_unrelated_dev``, ``short_adjacent_dev``; ``--families`` names others of the same JSONL form),
by kind, source and join (the id's ``KIND/SOURCE/JOIN``; ``short_dev`` and ``short_sections_dev`` also
read, by family, source and join): the share of texts segmented exactly right
(the same boundaries as the reference, both snapped to the text's units as the loaders split it; a
one-subject text is right iff it comes back whole), the mean number of segments beside the
reference's, and Pk.  Three columns: headseg (the real level strategy on the default ``Segmenter``),
``embedding-cosine`` (``headseg evaluate``'s baseline on the same model's own sentence embeddings)
and never cutting.  The last rows: every one-subject text ("kept whole"), every several-subject
text ("several exact"), and their mean, the number issue 48 asks to raise.

Each text's unit vectors (and the baseline's embeddings) are computed once into ``--cache``
(default ``runs/short_exact_cache.pkl``, git-ignored), keyed by the text and its units; then each
option setting is a search per text with the real calls of ``Segmenter.segment``:
``seg.document(text, options)``, ``get_level(options.level).strategy(doc, x, options.request(),
LevelContext(...))``.  ``--set NAME=V1,V2,...`` (any ``SegmentOptions`` field, or ``params.NAME`` for a
``TopicParams`` knob, ``params.evidence.NAME`` for an ``EvidenceParams`` one; repeat it for a grid)
prints one table per setting: the trade-off curve of one knob (issue 48's: ``--set
params.min_evidence=-inf,0,0.5,1,1.5,2``).

    python -m benchmarks.short_exact                                   # today's defaults
    python -m benchmarks.short_exact --set penalty=0.5,1,2 --json runs/short_exact.json
    python -m benchmarks.short_exact --limit 5 --no-baseline           # a quick look
    python -m benchmarks.short_exact --set params.evidence.likeness_weight=0,4 --set params.min_evidence=0.75,1.5
    python -m benchmarks.short_exact --run-together --no-baseline --set params.short_surcharge=0,0.5

``--run-together`` adds each one-subject text of the families again with its paragraphs run
together (joined by a space: ``one/SOURCE/space``).  The multi-subject families come both ways, the
one-subject texts only with breaks, so a rule that cuts run-together text too readily would go
unpunished without them; they count in "kept whole".
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sys
from dataclasses import fields, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

from benchmarks.common import BENCH_DATA, REPO, load_average, markdown_table, offline_settings

FAMILIES = ("short_one_dev", "short_unrelated_dev", "short_adjacent_dev")
METHODS = ("headseg", "embedding", "never cut")
#: the two halves of issue 48's summary: every text of one subject, every text of several
WHOLE = "one subject kept whole (every one-subject text)"
SEVERAL = "several subjects exact (every other text)"


def group_of(doc_id: str) -> tuple[str, str, str]:
    """``(kind, source, join)`` of a family text's id (``KIND/SOURCE/JOIN/NN@ORIGIN``)."""
    kind, source, join = doc_id.split("@")[0].split("/")[:3]
    return kind, source, join


def load(families: list[str], limit: int | None = None) -> list:
    """The family texts (loaders' documents), at most ``limit`` per kind/source/join.  A text of another
    family (``short_dev``: ``SOURCE-NN-JOIN``, ``short_sections_dev``: ``SOURCE-K-NN``) gets the id
    ``FAMILY/SOURCE/JOIN/ID``."""
    from headseg.segmenter.evaluation.loaders import iter_documents

    docs, seen = [], {}
    for name in families:
        path = Path(name) if name.endswith(".jsonl") else BENCH_DATA / f"{name}.jsonl"
        for d in iter_documents(path):
            if "@" not in d.id:  # another family (short_dev, short_sections_dev): its name as the kind
                parts = d.id.split("-")
                join = parts[-1] if parts[-1] in ("blank", "line", "space") else "blank"
                d.id = f"{path.stem.removesuffix('_dev')}/{parts[0]}/{join}/{d.id}"
            g = group_of(d.id)
            seen[g] = seen.get(g, 0) + 1
            if limit is None or seen[g] <= limit:
                docs.append(d)
    return docs


def run_together(docs: list) -> list:
    """Each one-subject text with paragraph breaks (``one/SOURCE/blank``) again as one paragraph: every
    blank line replaced by a space, the units' spans moved with it (id ``one/SOURCE/space/...``)."""
    from headseg.segmenter.evaluation.loaders import Document

    out = []
    for d in docs:
        kind, source, join = group_of(d.id)
        if kind != "one" or join != "blank" or "\n\n" not in d.text:
            continue
        breaks = [i for i in range(len(d.text) - 1) if d.text[i:i + 2] == "\n\n"]
        if any(a < b < a + 2 for a, b in zip(breaks, breaks[1:])):
            continue  # three newlines in a row: not the families' layout
        def moved(offset: int) -> int:  # each break before ``offset`` is one character shorter now
            return offset - sum(b + 2 <= offset for b in breaks)
        text = d.text.replace("\n\n", " ")
        spans = [(moved(a), moved(b)) for a, b in d.spans]
        if [text[a:b] for a, b in spans] != [d.text[a:b] for a, b in d.spans]:
            raise ValueError(f"{d.id}: a unit holds a paragraph break")
        out.append(Document(d.id.replace("/blank/", "/space/", 1), list(d.units), [], text, spans, d.source))
    return out


def parse_value(v: str):
    """A ``--set`` value: none, true/false, an int, a float, else the string."""
    low = v.strip().lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def settings(specs: list[str]) -> list[dict]:
    """The grid of ``NAME=V1,V2`` specs (``SegmentOptions`` fields, ``params.NAME`` for a
    :class:`~headseg.segmenter.topics.TopicParams` knob such as ``params.min_evidence``, or
    ``params.evidence.NAME`` for one of its :class:`~headseg.segmenter.evidence.EvidenceParams`), ``[{}]``
    for the defaults alone."""
    from headseg.segmenter.evidence import EvidenceParams
    from headseg.segmenter.options import SegmentOptions
    from headseg.segmenter.topics import TopicParams

    names = ({f.name for f in fields(SegmentOptions)} | {"params." + f.name for f in fields(TopicParams)}
             | {"params.evidence." + f.name for f in fields(EvidenceParams)})
    axes = []
    for spec in specs:
        name, _, values = spec.partition("=")
        if name not in names or not values:
            raise SystemExit(f"--set {spec}: expected NAME=V1,V2,... with NAME a SegmentOptions field "
                             f"({', '.join(sorted(names))})")
        axes.append([(name, parse_value(v)) for v in values.split(",")])
    return [dict(combo) for combo in itertools.product(*axes)]


class Store:
    """Unit vectors by (text, units) and baseline embeddings by units, pickled under ``path``."""

    def __init__(self, path: Path):
        self.path = path
        self.data = {"x": {}, "emb": {}}
        if path.is_file():
            with open(path, "rb") as fh:
                self.data = pickle.load(fh)
        self.changed = False

    def get(self, part: str, key, make):
        table = self.data[part]
        if key not in table:
            table[key] = make()
            self.changed = True
        return table[key]

    def save(self) -> None:
        if self.changed:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "wb") as fh:
                pickle.dump(self.data, fh)
            tmp.replace(self.path)
            self.changed = False


def headseg_boundaries(seg, docs: list, opts: dict, store: Store) -> dict[str, list[int]]:
    """Per text: the unit indices (of the loader's units) that open a segment, as ``seg.segment(text, opts)``
    finds them, on cached unit vectors."""
    from headseg.segmenter.evaluation.loaders import snap_offsets
    from headseg.segmenter.levels import LevelContext, get_level
    from headseg.segmenter.options import SegmentOptions

    knobs = {k.split(".", 1)[1]: v for k, v in opts.items() if k.startswith("params.")}
    evidence = {k.split(".", 1)[1]: knobs.pop(k) for k in list(knobs) if k.startswith("evidence.")}
    options = SegmentOptions(**{k: v for k, v in opts.items() if not k.startswith("params.")})
    level = get_level(options.level)
    request = options.request()
    params = replace(seg.params, **knobs)
    params = replace(params, evidence=replace(params.evidence, **evidence)) if evidence else params
    context = LevelContext(params, "",
                           MappingProxyType({n: getattr(options, n) for n in sorted(level.options)}))
    out = {}
    for d in docs:
        doc = seg.document(d.text, options)
        x = (store.get("x", (d.text, tuple(doc.units)), lambda: seg.unit_vectors(doc.tokens, doc.units))
             if level.search else None)
        result = level.strategy(doc, x, request, context)
        out[d.id] = snap_offsets([s.start for s in result.segments[1:]], d.starts, len(d.text))
    return out


def baseline_boundaries(docs: list, store: Store) -> dict[str, list[int]]:
    """Per text: ``headseg evaluate``'s ``embedding-cosine`` boundaries (its own rule, without k)."""
    from headseg.segmenter.evaluation.baselines import EmbeddingCosineMethod

    class Cached(EmbeddingCosineMethod):
        def embed(self, units):
            return store.get("emb", tuple(units), lambda: EmbeddingCosineMethod.embed(self, units))

    method = Cached()
    return {d.id: list(method.predict(d).units) for d in docs}


def scores(docs: list, found: dict[str, list[int]]) -> dict[str, tuple[float, bool, int, int]]:
    """Per text: Pk, exactly right, segments found, reference segments."""
    from headseg.segmenter.evaluation.metrics import score_document

    return {d.id: (score_document(d.boundaries, found[d.id], d.n).pk, list(found[d.id]) == list(d.boundaries),
                   len(found[d.id]) + 1, d.num_segments) for d in docs}


def groups(docs: list) -> list[tuple[str, list[str]]]:
    """(row label, text ids): each kind/source/join, then the totals by kind and join, then the two halves."""
    rows: dict[str, list[str]] = {}
    for d in docs:
        rows.setdefault("/".join(group_of(d.id)), []).append(d.id)
    totals: dict[str, list[str]] = {}
    for d in docs:
        kind, _, join = group_of(d.id)
        totals.setdefault(f"{kind}: all {join}", []).append(d.id)
    whole = [d.id for d in docs if d.num_segments == 1]
    several = [d.id for d in docs if d.num_segments > 1]
    return list(rows.items()) + list(totals.items()) + [(WHOLE, whole), (SEVERAL, several)]


def summarise(docs: list, per_method: dict[str, dict]) -> dict:
    """label -> {"n", "ref", method -> {"exact", "segments", "pk"}}, and the summary (``mean``)."""
    out = {}
    for label, ids in groups(docs):
        if not ids:
            continue
        row = {"n": len(ids), "ref": float(np.mean([per_method["never cut"][i][3] for i in ids]))}
        for m, res in per_method.items():
            row[m] = {"exact": float(np.mean([res[i][1] for i in ids])),
                      "segments": float(np.mean([res[i][2] for i in ids])),
                      "pk": float(np.mean([res[i][0] for i in ids]))}
        out[label] = row
    halves = [out[label] for label in (WHOLE, SEVERAL) if label in out]
    out["mean"] = {m: float(np.mean([r[m]["exact"] for r in halves])) for m in per_method}
    return out


def table(summary: dict, methods: list[str]) -> str:
    header = ["texts", "n", "ref segs"]
    for m in methods:
        header += [f"{m} exact", f"{m} segs", f"{m} Pk"]
    rows = []
    for label, row in summary.items():
        if label == "mean":
            continue
        cells = [label, str(row["n"]), f"{row['ref']:.2f}"]
        for m in methods:
            cells += [f"{100 * row[m]['exact']:.0f} %", f"{row[m]['segments']:.2f}", f"{row[m]['pk']:.3f}"]
        rows.append(cells)
    rows.append(["mean of 'one subject kept whole' and 'several subjects exact'", "", ""]
                + [c for m in methods for c in (f"**{100 * summary['mean'][m]:.0f} %**", "", "")])
    return markdown_table(header, rows, "lrr" + "rrr" * len(methods))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated names under benchmarks/data or .jsonl paths")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=V1,V2",
                    help="a SegmentOptions field and its values (repeat for a grid); one table per setting")
    ap.add_argument("--limit", type=int, default=None, help="at most this many texts per kind/source/join")
    ap.add_argument("--no-baseline", action="store_true", help="leave out the embedding baseline (no torch needed)")
    ap.add_argument("--cache", type=Path, default=REPO / "runs" / "short_exact_cache.pkl")
    ap.add_argument("--json", type=Path, default=None, help="write every setting's numbers here")
    ap.add_argument("--run-together", action="store_true",
                    help="add each one-subject text again with its paragraphs run together (one/SOURCE/space)")
    args = ap.parse_args(argv)
    offline_settings()
    from headseg.api import Segmenter

    grid = settings(args.sets)
    docs = load([f for f in args.families.split(",") if f], args.limit)
    if args.run_together:
        docs += run_together(docs)
    store = Store(args.cache)
    seg = Segmenter(quiet=True)
    fixed = {"never cut": scores(docs, {d.id: [] for d in docs})}
    if not args.no_baseline:
        fixed["embedding"] = scores(docs, baseline_boundaries(docs, store))
        store.save()
    methods = [m for m in METHODS if m == "headseg" or m in fixed]
    results = []
    print(f"{len(docs)} texts of {args.families}; {load_average()}")
    for opts in grid:
        found = headseg_boundaries(seg, docs, opts, store)
        store.save()
        summary = summarise(docs, {"headseg": scores(docs, found), **fixed})
        label = ", ".join(f"{k}={v}" for k, v in opts.items()) or "defaults"
        print(f"\n### headseg with {label}\n\n{table(summary, methods)}", flush=True)
        results.append({"options": opts, "summary": summary})
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"families": args.families, "texts": len(docs), "settings": results},
                                        indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
