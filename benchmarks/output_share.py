"""What reading the model's own output embedding costs: the shipped profile against the same heads alone.

The embedded model's profile gives the model's output embedding a share of each
topic unit vector (``HeadProfile.topic_output_weight``, docs/segmenter.md), so its
serving graph keeps the last layer's feed-forward block, which a heads-only
profile drops.  This segments the same documents with both profiles on the
default engine (int8 ONNX on CPU), alternating the two per repeat so that the
shared machine's load falls on both alike, and prints seconds per run, the
ratio, each graph's size and the width of a unit vector (the topic search's
cost grows with it: O(n·L·D), segmenter/search.py).

    python -m benchmarks.output_share --docs 20 --repeats 3
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path

from benchmarks.common import segmentation_root


def _one_doc(seg, text: str):
    """``(doc, units)`` of ``text`` as the segmenter makes them."""
    from headseg.analysis.text import tokenize

    doc = tokenize(text, seg.loaded.tokenizer)
    return doc, seg.units(text, doc=doc)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(segmentation_root() / "choi/3/3-11"), help="a folder of dev documents")
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    from headseg import Segmenter
    from headseg.segmenter.evaluation.loaders import iter_documents

    texts = [d.text for d in iter_documents(Path(args.data), limit=args.docs)]
    shipped = Segmenter(threads=args.threads, quiet=True)
    heads_only = Segmenter(profile=dataclasses.replace(shipped.profile, topic_output_weight=0.0),
                           threads=args.threads, quiet=True)
    engines = {"shipped (output share %g)" % shipped.profile.topic_output_weight: shipped,
               "heads alone (share 0)": heads_only}
    for seg in engines.values():  # warm-up: sessions, caches
        seg.segment_many(texts[:2])
    times = {name: [] for name in engines}
    load0 = os.getloadavg()[0]
    for _ in range(args.repeats):
        for name, seg in engines.items():
            t0 = time.perf_counter()
            seg.segment_many(texts)
            times[name].append(time.perf_counter() - t0)
    base = min(times["heads alone (share 0)"])
    print(f"{len(texts)} documents from {args.data}, best of {args.repeats}; "
          f"load average {load0:.1f} → {os.getloadavg()[0]:.1f}\n")
    print("| profile | graph | whole encoder | unit vector width | seconds (best) | ratio |")
    print("|---|---:|---|---:|---:|---:|")
    for name, seg in engines.items():
        m = seg.backend.manifest
        width = seg.unit_vectors(*_one_doc(seg, texts[0])).shape[1]
        print(f"| {name} | {m.graph_bytes / 1e6:.1f} MB {m.precision} | {'no' if m.truncated else 'yes'} | {width} | "
              f"{min(times[name]):.2f} | {min(times[name]) / base:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
