"""Sweep topic-search designs on cached unit vectors (``benchmarks/topic_cache.py``).

Scores each design the way the evaluation harness does: the segmenter's cuts
(unit indices) become character offsets, snap to the reference units, and Pk
and segments per reference segment are averaged over the documents of each
data set.  Only the search runs, so a sweep over many settings takes seconds to
minutes instead of hours.

    python -m benchmarks.topic_sweep                     # the shipped TopicParams
    python -m benchmarks.topic_sweep --set penalty=0.5,1.0 --set noise=median,mean

``--set NAME=V1,V2`` sweeps a TopicParams field (the grid is the product).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import DATASETS, REPO, dataset_path, segmentation_root, slug


def load_cache(path: Path, limit: int | None = None, data: Path | None = None) -> list[dict]:
    """The cached documents; with ``data`` (the data set's folder) also their texts, for the headings."""
    z = np.load(path, allow_pickle=False)
    ids = list(z["ids"])
    docs = []
    for i, d in enumerate(ids[:limit] if limit else ids):
        docs.append({"id": str(d), "x": z[f"x{i}"].astype(np.float64), "units": z[f"u{i}"], "ref": z[f"r{i}"],
                     "bounds": z[f"b{i}"], "len": int(z[f"len{i}"][0]),
                     "tokens": z[f"t{i}"] if f"t{i}" in z.files else None, "text": None})
    if data is not None:
        from headseg.segmenter.evaluation.loaders import iter_documents

        for doc, d in zip(docs, iter_documents(data, limit=len(docs))):
            if d.id != doc["id"] or len(d.text) != doc["len"]:
                raise SystemExit(f"{path}: document {doc['id']} does not match {data}; rebuild the cache")
            doc["text"] = d.text
    return docs


def unit_tokens(doc: dict) -> np.ndarray:
    """Token counts of the units (characters / 4 for a cache written before they were stored)."""
    if doc["tokens"] is not None:
        return doc["tokens"]
    return (np.append(doc["units"][1:], doc["len"]) - doc["units"]) / 4.0


def unit_headings(doc: dict, params) -> np.ndarray | None:
    """Which cached units are headings (None without the document's text)."""
    from headseg.segmenter.lines import heading_units

    if doc["text"] is None:
        return None
    starts = [int(v) for v in doc["units"]]
    spans = list(zip(starts, starts[1:] + [doc["len"]]))
    return heading_units(doc["text"], spans, unit_tokens(doc), params.heading_tokens)


def unit_lines(doc: dict) -> np.ndarray:
    """The line each cached unit starts on: the loaders join the reference units with line breaks."""
    return np.searchsorted(doc["ref"], doc["units"], side="right") - 1


def score(doc: dict, cuts) -> tuple[float, int]:
    """Pk of the cuts (segmenter unit indices) against the reference, and the predicted segment count."""
    from headseg.segmenter.evaluation.loaders import snap_offsets
    from headseg.segmenter.evaluation.metrics import score_document

    chars = [int(doc["units"][c]) for c in cuts]
    hyp = snap_offsets(chars, list(doc["ref"]), doc["len"])
    s = score_document(list(doc["bounds"]), hyp, len(doc["ref"]))
    return s.pk, len(hyp) + 1


#: what the search for exactly k segments minimises (``--exact-k``): the product's objective
#: (``topics.exact_k_objective``), the plain scatter, the penalised search's (``topics.search_objective``:
#: scatter + per-start penalty β + short-segment surcharge), or scatter + only one of the two; ``relCC``:
#: scatter + the surcharge on segments shorter than ``min(64, 0.CC · M)`` tokens, ``M = T_total / N`` the
#: known mean segment length (the product's since it was adopted, at 0.35), ``belowCC`` below ``0.CC · M``
#: (no cap at 64)
EXACT_K_OBJECTIVES = ("product", "scatter", "penalised", "penalty", "surcharge",
                      "rel25", "rel35", "rel40", "rel45", "rel50", "below25", "below50")
RELATIVE_SURCHARGE = {n: (int(n[-2:]) / 100, n.startswith("rel")) for n in EXACT_K_OBJECTIVES if n[-2:].isdigit()}


@contextlib.contextmanager
def exact_k_objective(name: str):
    """Within it, the k-oracle search minimises ``name``'s objective (one of :data:`EXACT_K_OBJECTIVES`).

    Replaces ``topics.exact_k_objective`` (what a segment costs beyond its
    scatter when k is fixed) for the benchmark only; the product is untouched.
    """
    from headseg.segmenter import topics

    if name not in EXACT_K_OBJECTIVES:
        raise SystemExit(f"--exact-k: one of {', '.join(EXACT_K_OBJECTIVES)}, got {name!r}")
    full = topics.search_objective

    def relative(cost, x, params, penalty=None, tokens=None, prior=None, segments=None):
        c, capped = RELATIVE_SURCHARGE[name]
        if tokens is None or not segments:
            return 0.0, None
        mean = float(np.sum(tokens)) / segments
        short = min(params.short_tokens, c * mean) if capped else c * mean
        return 0.0, full(cost, x, dataclasses.replace(params, short_tokens=short), penalty, tokens)[1]

    def penalised(*args, segments=None, **kwargs):
        return full(*args, **kwargs)

    replacement = {
        "product": topics.exact_k_objective,
        "scatter": lambda *args, **kwargs: (0.0, None),
        "penalised": penalised,
        "penalty": lambda *args, **kwargs: (penalised(*args, **kwargs)[0], None),
        "surcharge": lambda *args, **kwargs: (0.0, penalised(*args, **kwargs)[1]),
    }.get(name, relative)
    shipped = topics.exact_k_objective
    topics.exact_k_objective = replacement
    try:
        yield
    finally:
        topics.exact_k_objective = shipped


def document_scores(docs: list[dict], params, segments_oracle: bool = False, exact_k: str = "product") -> tuple[list, list]:
    """Pk and predicted / reference segment count of every document under one design."""
    from headseg.segmenter.topics import topic_cuts

    pks, ratio = [], []
    with exact_k_objective(exact_k) if segments_oracle else contextlib.nullcontext():
        for d in docs:
            k = len(d["bounds"]) + 1 if segments_oracle else None
            cuts = topic_cuts(d["x"], params, segments=k, unit_tokens=unit_tokens(d), lines=unit_lines(d),
                              headings=unit_headings(d, params))
            pk, m = score(d, cuts)
            pks.append(pk)
            ratio.append(m / (len(d["bounds"]) + 1))
    return pks, ratio


def run_design(docs: list[dict], params, segments_oracle: bool = False, exact_k: str = "product") -> dict:
    pks, ratio = document_scores(docs, params, segments_oracle, exact_k)
    return {"pk": float(np.mean(pks)), "ratio": float(np.mean(ratio)), "n": len(docs)}


def gains(docs: list[dict]) -> dict:
    """Scatter saved by the true boundaries and by the best split inside each true segment, per σ².

    Unweighted scatter of the centred vectors, σ² half the mean squared adjacent
    distance over the whole document: what a penalty per segment has to separate.
    """
    from headseg.segmenter.topics import TopicParams, prepare_vectors
    from headseg.segmenter.search import SegmentCost

    true, spurious, lengths = [], [], []
    for d in docs:
        x = prepare_vectors(d["x"], TopicParams())
        diff = x[1:] - x[:-1]
        s2 = max(float(np.einsum("ij,ij->i", diff, diff).mean()) / 2.0, 1e-9)
        # the segmenter's unit that each reference boundary falls on
        starts = np.searchsorted(d["units"], d["ref"][d["bounds"]], side="left")
        edges = [0, *[int(v) for v in starts], len(x)]
        cost = SegmentCost(x)
        for a, m, b in zip(edges, edges[1:], edges[2:]):
            if a < m < b:
                true.append((cost.cost(a, b) - cost.cost(a, m) - cost.cost(m, b)) / s2)
        for a, b in zip(edges, edges[1:]):
            if b - a >= 2:
                spurious.append(max(cost.cost(a, b) - cost.cost(a, t) - cost.cost(t, b) for t in range(a + 1, b)) / s2)
                lengths.append(b - a)
    return {"true": f"{np.median(true):.2f} ({np.percentile(true, 10):.2f})",
            "spurious": f"{np.median(spurious):.2f} ({np.percentile(spurious, 90):.2f})",
            "length": f"{np.median(lengths):g}"}


def offsets(docs: list[dict], params, near: int = 3) -> dict:
    """Where the boundaries go, given the reference number of segments: for each reference
    boundary, the offset (in reference units) of the nearest predicted one, -near..near, or
    ``far`` beyond that; negative = placed early."""
    from headseg.segmenter.evaluation.loaders import snap_offsets
    from headseg.segmenter.topics import topic_cuts

    counts = {o: 0 for o in range(-near, near + 1)}
    counts["far"] = 0
    for d in docs:
        cuts = topic_cuts(d["x"], params, segments=len(d["bounds"]) + 1, unit_tokens=unit_tokens(d),
                          lines=unit_lines(d), headings=unit_headings(d, params))
        hyp = np.asarray(snap_offsets([int(d["units"][c]) for c in cuts], list(d["ref"]), d["len"]))
        for b in d["bounds"]:
            o = int(hyp[np.argmin(np.abs(hyp - b))] - b) if len(hyp) else near + 1
            counts[o if abs(o) <= near else "far"] += 1
    return counts


def mix_layers(docs: list[dict], heads: np.ndarray, spec: str) -> list[dict]:
    """Documents whose vectors concatenate the given layers' heads of an all-heads cache, each
    head weighted ``sqrt(w / H)`` as :func:`headseg.segmenter.encode.pool_units` does."""
    weights = {int(l): float(w) for l, _, w in (p.partition(":") for p in spec.split(","))}
    n_heads = int(heads[:, 1].max()) + 1
    out = []
    for d in docs:
        x = d["x"].reshape(len(d["x"]), len(heads), -1)
        cols = [np.sqrt(weights[int(l)] / n_heads) * x[:, i] for i, (l, _) in enumerate(heads) if int(l) in weights]
        out.append({**d, "x": np.concatenate(cols, axis=1)})
    return out


def sweep_layers(data: dict, specs: list[str], oracle: bool, designs: list) -> int:
    """One row per layer mixture and TopicParams design (``designs``: ``(label, params)``)."""
    cols = list(data)
    print("| layers (LAYER:WEIGHT) | " + " | ".join(cols) + " | mean |")
    print("|---|" + "---:|" * (len(cols) + 1))
    for spec in specs:
        mixed = {n: mix_layers(docs, heads, spec) for n, (docs, heads) in data.items()}
        for label, params in designs:
            for k_oracle in ([False, True] if oracle else [False]):
                res = {n: run_design(docs, params, k_oracle) for n, docs in mixed.items()}
                cells = [f"{r['pk']:.3f} ({r['ratio']:.2f})" for r in res.values()]
                mean = np.mean([r["pk"] for r in res.values()])
                name = spec + ("" if label == "default" else f", {label}") + (" k oracle" if k_oracle else "")
                print(f"| {name} | " + " | ".join(cells) + f" | {mean:.3f} |", flush=True)
    return 0


def parse_value(v: str):
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(v.lower(), v)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(REPO / "runs" / "topic_cache"))
    ap.add_argument("--data-root", default=str(segmentation_root()), help="the documents' texts, for the headings")
    ap.add_argument("--datasets", default=None, help="comma-separated names (default: every cached one)")
    ap.add_argument("--limit", type=int, default=0, help="documents per data set (0 = all)")
    ap.add_argument("--set", action="append", default=[], help="NAME=V1,V2,... over TopicParams fields")
    ap.add_argument("--oracle", action="store_true", help="also score with the reference number of segments")
    ap.add_argument("--exact-k", default="product", choices=EXACT_K_OBJECTIVES,
                    help="what the k-oracle search minimises: the product's objective (default), the plain scatter, "
                         "the penalised search's (scatter + per-start penalty + short-segment surcharge), "
                         "scatter + only the penalty or only the surcharge, or the surcharge relative to the "
                         "mean segment length (relCC: below min(64, 0.CC·T/N) tokens; belowCC: below 0.CC·T/N)")
    ap.add_argument("--layers", action="append", default=[],
                    help="with an --all-heads cache: LAYER:WEIGHT,... per head relative to the last layer's "
                         "(e.g. 5:1,0:0.25); repeat to compare mixtures")
    ap.add_argument("--gains", action="store_true",
                    help="print what a penalty must separate: savings of true boundaries and of spurious splits")
    ap.add_argument("--offsets", action="store_true",
                    help="print, with the reference number of segments, how far each reference boundary's nearest "
                         "predicted boundary lies (reference units; negative = early)")
    args = ap.parse_args(argv)
    from headseg.segmenter.topics import TopicParams

    names = [n for n, _ in DATASETS]
    if args.datasets:
        names = [n for n in names if any(n == w or n.startswith(w.rstrip("/") + "/") for w in args.datasets.split(","))]
    data = {}
    for n in names:
        p = Path(args.cache) / f"{slug(n)}.npz"
        if p.exists():
            data[n] = load_cache(p, args.limit or None, dataset_path(n, args.data_root))
            if args.layers:
                with np.load(p, allow_pickle=False) as z:
                    if "heads" not in z.files:
                        raise SystemExit(f"{p}: no head list; --layers needs a topic_cache.py --all-heads cache")
                    data[n] = (data[n], z["heads"])
    if args.gains:
        print("| data set | true boundary: median (10th pct) | best split inside a true segment: median (90th pct) "
              "| segment length (median) |")
        print("|---|---|---|---|")
        for n, docs in data.items():
            g = gains(docs)
            print(f"| {n} | {g['true']} | {g['spurious']} | {g['length']} |")
        return 0
    if args.offsets:
        cols = [*range(-3, 4), "far"]
        print("| data set | boundaries | " + " | ".join(f"{c:+d}" if c != "far" else "> 3 away" for c in cols) + " |")
        print("|---|---:|" + "---:|" * len(cols))
        for n, docs in data.items():
            c = offsets(docs, TopicParams())
            total = sum(c.values())
            print(f"| {n} | {total} | " + " | ".join(f"{100 * c[k] / total:.0f} % ({c[k]})" for k in cols) + " |")
        return 0
    grid_names, grid_values = [], []
    for spec in args.set:
        name, _, values = spec.partition("=")
        if name not in {f.name for f in dataclasses.fields(TopicParams)}:
            raise SystemExit(f"unknown TopicParams field {name}")
        grid_names.append(name)
        grid_values.append([parse_value(v) for v in values.split(",")])
    if args.layers:
        designs = []
        for combo in itertools.product(*grid_values) if grid_values else [()]:
            label = ", ".join(f"{k}={v}" for k, v in zip(grid_names, combo)) or "default"
            designs.append((label, TopicParams(**dict(zip(grid_names, combo)))))
        return sweep_layers(data, args.layers, args.oracle, designs)
    cols = list(data)
    print("| design | " + " | ".join(cols) + " | mean |")
    print("|---|" + "---:|" * (len(cols) + 1))
    for combo in itertools.product(*grid_values) if grid_values else [()]:
        params = TopicParams(**dict(zip(grid_names, combo)))
        label = ", ".join(f"{k}={v}" for k, v in zip(grid_names, combo)) or "default"
        for oracle in ([False, True] if args.oracle else [False]):
            t0 = time.perf_counter()
            res = {n: run_design(docs, params, oracle, args.exact_k) for n, docs in data.items()}
            cells = [f"{r['pk']:.3f} ({r['ratio']:.2f})" for r in res.values()]
            mean = np.mean([r["pk"] for r in res.values()])
            print(f"| {label}{' k oracle' if oracle else ''} | " + " | ".join(cells) + f" | {mean:.3f} |", flush=True)
            print(f"  ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
