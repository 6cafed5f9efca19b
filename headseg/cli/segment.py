"""``headseg segment``: topic segments or units of one or many documents."""

from __future__ import annotations

import json
import sys

from headseg.analysis.errors import HeadsegError
from headseg.analysis.io import atomic_write_text, read_text
from headseg.analysis.progress import progress_bar

from headseg.segmenter.api import LEVELS, Segmenter

from . import options


def _render(fmt: str, docs: list[tuple[str, object]]) -> str:
    if fmt == "jsonl":
        lines = []
        for name, seg in docs:
            for rec in seg.to_dict(document=name)["segments"]:
                lines.append(json.dumps({"document": name, **rec}, ensure_ascii=False))
        return "".join(line + "\n" for line in lines)
    if fmt == "json":
        payload = [seg.to_dict(document=name) for name, seg in docs]
        return json.dumps(payload if len(payload) != 1 else payload[0], indent=2, ensure_ascii=False) + "\n"
    out = []
    for name, seg in docs:
        if len(docs) > 1:
            out.append(f"##### {name}\n")
        for i, s in enumerate(seg):
            out.append(f"----- segment {i + 1}/{len(seg)}  chars {s.start}-{s.end}  score {s.score:.3f} -----\n")
            body = s.text
            out.append(body if body.endswith("\n") else body + "\n")
    return "".join(out)


def run(args) -> int:
    names = args.files
    texts, ok_names, failed = [], [], 0
    for name in names:
        try:
            texts.append(read_text(name, encoding=args.encoding, max_bytes=args.max_bytes))
            ok_names.append("<stdin>" if name == "-" else name)
        except HeadsegError as exc:
            if len(names) == 1:
                raise
            print(f"headseg: error: {exc}", file=sys.stderr)
            failed += 1
    if not texts:
        raise HeadsegError("no readable input")
    seg = Segmenter(model=args.model, profile=args.profile, backend=args.backend, device=args.device,
                    batch_size=args.batch_size, unit_mode=args.unit_mode, artifact=args.artifact,
                    precision=args.precision, quiet=args.quiet)
    kwargs = dict(level=args.level, segments=args.segments, min_chars=args.min_chars,
                  max_chars=args.max_chars, max_tokens=args.max_tokens, penalty=args.penalty)
    results = []
    # Documents go through in groups so the model batches across documents while
    # memory stays bounded by the group, not by the number of files.
    group_chars = 2_000_000
    with progress_bar(total=len(texts), desc="segmenting", disable=args.quiet, unit="doc") as bar:
        group: list[int] = []
        size = 0
        for i, t in enumerate(texts + [None]):
            if t is not None:
                group.append(i)
                size += len(t)
            if group and (t is None or size >= group_chars):
                results.extend(seg.segment_many([texts[j] for j in group], **kwargs))
                bar.update(len(group))
                group, size = [], 0
    rendered = _render(args.format, list(zip(ok_names, results)))
    if args.out:
        atomic_write_text(args.out, rendered)
    else:
        sys.stdout.write(rendered)
        sys.stdout.flush()
    return 1 if failed else 0


def register(sub) -> None:
    p = sub.add_parser("segment", help="split documents into topic segments or sentence-like units",
                       description="Segment text files (or '-' for stdin) into topic segments (default) or units. "
                                   "Segments tile the input exactly: joining their texts gives the input back.")
    p.add_argument("files", nargs="+", metavar="FILE", help="text files, or '-' for stdin")
    p.add_argument("--format", choices=("text", "jsonl", "json"), default="text")
    p.add_argument("--level", choices=LEVELS, default="topic")
    options.add_model(p)
    options.add_profile(p)
    p.add_argument("--backend", choices=("auto", "onnx", "torch"), default="auto",
                   help="auto: the ONNX engine (exported into the cache on first use), torch where it cannot "
                        "serve; onnx: ONNX or an error; torch: the reference path")
    p.add_argument("--artifact", default=None, metavar="DIR",
                   help="serve this exported artifact (from `headseg export --out DIR`)")
    p.add_argument("--precision", choices=("fp32", "fp16", "int8"), default=None,
                   help="ONNX precision (default: fp32 on CPU, fp16 on CUDA)")
    options.add_device(p)
    p.add_argument("--unit-mode", choices=("auto", "rules", "heads"), default="auto",
                   help="units from sentence rules with the heads' block detector for long unpunctuated "
                        "stretches (auto), rules only, or the heads' detector everywhere")
    p.add_argument("--segments", type=int, default=None, metavar="N", help="exactly N segments per document")
    p.add_argument("--min-chars", type=int, default=None, help="avoid segments shorter than this")
    p.add_argument("--max-chars", type=int, default=None, help="hard limit: no segment is longer")
    p.add_argument("--max-tokens", type=int, default=None, help="hard limit in model tokens")
    p.add_argument("--penalty", type=float, default=None,
                   help="cost of a new segment relative to the document's scatter (higher = fewer segments)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--out", default=None, help="write here (atomically) instead of stdout")
    options.add_input(p)
    options.add_quiet(p)
    p.set_defaults(func=run)
