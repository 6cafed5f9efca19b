"""max_tokens in a foreign tokenizer: what the counter costs and how often the final check repairs.

One manifesto (its first --chars characters) is segmented with the embedded
model under one hard limit, counting tokens four ways: the segmenter model's
own tokens in the document (no counter, exact and additive), the same
tokenizer as a counter on each segment's text (tokenizer.json directory),
whitespace words, and that tokenizer plus two special tokens.  For each: the
segments, the largest count (must be <= the limit), the cuts the final check
added to the search's (additive estimate) cuts, and the wall time.

    python -m benchmarks.token_limits [--chars 30000] [--max-tokens 128]

Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from benchmarks.common import data_root, default_model_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", default=str(data_root() / "corpus" / "manifesto_61320_200811.txt"))
    ap.add_argument("--chars", type=int, default=30000)
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()

    from headseg import Segmenter
    from headseg.segmenter import topics
    from headseg.segmenter.tokens import resolve_token_counter

    text = Path(args.file).read_text(encoding="utf-8")[: args.chars]
    seg = Segmenter(backend="torch", device="cpu")
    model_tokens = resolve_token_counter(str(default_model_dir()))
    counters = {
        "model tokens in the document (no counter)": None,
        "tokenizer.json directory": str(default_model_dir()),
        "whitespace words": lambda s: len(s.split()),
        "tokenizer + 2 special tokens": lambda s: model_tokens(s) + 2,
    }
    added = []
    real = topics.repair_cuts

    def counting_repair(cost, cuts, fits):
        out = real(cost, cuts, fits)
        added.append(len(out) - len(cuts))
        return out

    topics.repair_cuts = counting_repair
    seg.segment(text[:2000])  # warm the model before timing
    print(f"{Path(args.file).name}, first {len(text)} characters, max_tokens={args.max_tokens}, "
          f"load average {os.getloadavg()[0]:.2f}\n")
    print("| counter | segments | largest count | cuts added by the check | seconds |")
    print("|---|---:|---:|---:|---:|")
    for name, spec in counters.items():
        added.clear()
        t0 = time.perf_counter()
        result = seg.segment(text, max_tokens=args.max_tokens, token_counter=spec)
        dt = time.perf_counter() - t0
        largest = max(s.token_count for s in result)
        if largest > args.max_tokens:
            raise SystemExit(f"limit broken by {name}: {largest}")
        print(f"| {name} | {len(result)} | {largest} | {sum(added) if added else '-'} | {dt:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
