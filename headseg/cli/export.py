"""``headseg export``: write the selected heads as an ONNX artifact (graph + manifest)."""

from __future__ import annotations

import json
import sys

from headseg.analysis.errors import HeadsegError, InputError, ProfileError
from headseg.analysis.outputs import check_name_length, check_not_cache
from headseg.analysis.writing import STDOUT
from headseg.analysis.model import load_model
from headseg.analysis.profile import HeadProfile, resolve_profile

from headseg.export.artifact import PRECISIONS, check_out_dir
from headseg.export.builder import check_opset
from headseg.export.exporter import DEFAULT_OPSET, export_artifact, truncates
from headseg.export.policy import precision_preference, serving_device
from headseg.export.runtime import require_cuda
from headseg.export.provision import cache_target, export_available, write_cached

from . import options


def check_args(args) -> None:
    """Everything refused before the model loads: flag conflicts, malformed ``--heads``, an ``--out``
    folder headseg could clobber (exit 2), a missing toolchain, a device that cannot serve the precision.

    (``headseg`` runs a command's ``check_args`` before its ``run``.)
    """
    if args.out is not None and not args.out.strip():
        raise InputError("--out: empty path")  # not the cache: the user named a folder and it is blank
    if args.out == STDOUT:
        raise InputError("--out needs a directory, not '-' (an artifact is a folder of files)")
    if args.out and args.cache:
        raise InputError("give either --out DIR or --cache, not both")
    if args.heads is not None and args.profile:
        raise InputError("give either --profile or --heads, not both")
    if args.heads is not None:
        try:
            parse_heads(args.heads)
        except HeadsegError as exc:
            raise InputError(str(exc)) from None
    if args.out:
        check_name_length(args.out)
        check_not_cache(args.out, hint=" (`headseg export --cache` exports into the cache)")
        check_out_dir(args.out, args.force)
    why = export_available()
    if why:
        raise HeadsegError(f"cannot export the ONNX graph: {why}")
    try:
        check_opset(args.opset)  # before the model loads, not when onnxruntime refuses the finished graph
    except HeadsegError as exc:
        raise InputError(f"--opset: {exc}") from None
    check_device(args.device, args.precision)


def parse_heads(spec: str) -> list[tuple[int, int]]:
    """``"5:0,5:7,2:3"`` → ``[(5, 0), (5, 7), (2, 3)]``."""
    out = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            l, h = item.split(":")
            out.append((int(l), int(h)))
        except ValueError:
            raise HeadsegError(f"--heads: '{item}' is not LAYER:HEAD (e.g. --heads 5:0,5:7)") from None
    if not out:
        raise HeadsegError("--heads: no heads given")
    return out


def profile_for(args, loaded) -> HeadProfile:
    """``--heads`` as a profile, else the one profile policy (:func:`resolve_profile`) for ``--profile``."""
    if args.heads and args.profile:
        raise HeadsegError("give either --profile or --heads, not both")
    if not args.heads:
        return resolve_profile(loaded.info, args.profile)
    heads = sorted(set(parse_heads(args.heads)))
    info = loaded.info
    profile = HeadProfile(
        model_fingerprint=info.fingerprint,
        heads=heads,
        weights=[1.0] * len(heads),
        model_name=info.name,
        num_layers=info.num_layers,
        num_heads=info.num_heads,
        corpus="(--heads on the command line)",
        # The same heads for topics, so that exactly these heads are exported.
        topic_heads=heads,
    )
    try:
        profile.check_model(info)
    except ProfileError as exc:  # heads typed on the command line are an argument of it, not a profile file
        raise InputError(f"--heads: {exc}") from None
    return profile


def check_device(device: str, precision: str | None) -> str:
    """The device the export is checked on, refused before any work if it cannot serve ``precision``.

    ``--device cuda`` without a usable GPU: :class:`DeviceError` (exit 6);
    fp16 where the device is the CPU: :class:`InputError` (exit 2).
    """
    require_cuda(device)
    target = serving_device(device)
    if precision == "fp16" and target == "cpu":
        raise InputError("--precision fp16 is served on CUDA and runs slowly or not at all on this CPU; "
                         "export fp32 or int8 here, or fp16 with --device cuda on a machine with a GPU")
    return target


def run(args) -> int:
    """Run ``headseg export``: export the profile's heads (to ``--out`` or the cache), print the artifact; exit code."""
    # check_args (run first by the command line) refused what can be refused before the model loads
    device = serving_device(args.device)
    precision = args.precision or precision_preference(device)[0]
    # The builder reads model.safetensors itself: torch is not loaded.
    loaded = load_model(args.model, weights=False)
    profile = profile_for(args, loaded)
    phash = profile.hash()
    out = args.out or cache_target(loaded, phash, precision)
    # Unit-detection and topic heads alike: every head the segmenter will ask for.
    heads = profile.capture_heads
    truncate = truncates(profile, not args.no_truncate)
    if not args.quiet:
        last = profile.deepest_layer if truncate else loaded.info.num_layers - 1
        print(f"headseg: exporting {len(heads)} head(s) of {loaded.info.name} "
              f"(layers 0..{last} of {loaded.info.num_layers}) as {precision} ...", file=sys.stderr)
    kwargs = dict(precision=precision, attention=args.attention, norms=args.norms, truncate=truncate,
                  opset=args.opset, parity_device=device, profile=profile, progress=not args.quiet)
    if args.out:
        m = export_artifact(loaded, heads, phash, out, force=args.force, **kwargs)
    else:
        # the cache is shared with serving processes: the same lock as their exports
        m = write_cached(loaded, out, heads, phash, **kwargs)
    if args.json:
        print(json.dumps({"artifact": str(out), **m.to_dict()}, indent=2))
        return 0
    p = m.parity
    print(f"artifact: {out}")
    print(f"  graph {m.graph_bytes / 1e6:.1f} MB, {m.precision}, opset {m.opset}, "
          f"layers exported {m.layers_exported}/{m.num_layers}, outputs {', '.join(m.outputs)}")
    if "z_max_abs_error" in p:
        print(f"  parity vs {p['reference']} on {p['windows']} windows ({p['tokens']} tokens, {p['device']}): "
              f"max abs error {p['z_max_abs_error']:.3g} (|z| up to {p['z_max_abs_value']:.3g}), "
              f"min cosine {p['z_min_cosine']:.6f}")
    else:
        print(f"  parity not measured: {p.get('not_measured', '?')}")
    return 0


def register(sub) -> None:
    """Add the ``export`` command to the subparsers ``sub``."""
    p = sub.add_parser(
        "export",
        help="export the selected heads to ONNX (graph + manifest)",
        description="Export the heads of a head profile to an ONNX graph that returns their per-head context "
                    "vectors [batch, heads, tokens, head_dim]; layers above the deepest selected head are left out. "
                    "Writes model.onnx and manifest.json to --out DIR, or to the cache "
                    "($HEADSEG_CACHE or ~/.cache/headseg, onnx/<model>-<profile>-<precision>/) that "
                    "`--backend auto` looks in.",
    )
    options.add_model(p)
    options.add_profile(p)
    p.add_argument("--heads", metavar="L:H,...", default=None, help="export these heads instead of a profile")
    p.add_argument("--out", metavar="DIR", default=None, help="artifact directory (default: the cache)")
    p.add_argument("--cache", action="store_true", help="write into the cache (the default when --out is omitted)")
    p.add_argument("--force", action="store_true",
                   help="write into an --out folder that holds other files (never replacing one headseg did not write)")
    p.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="fp32 (exactly the torch path's boundaries); fp16 (for GPUs); int8 (dynamic quantisation, "
                        "for CPUs); default: what `segment` serves on --device (int8 on CPU, fp16 on CUDA)")
    p.add_argument("--attention", action="store_true", help="also output the heads' attention rows [B, N, T, T]")
    p.add_argument("--norms", action="store_true", help="also output the value-vector norms ‖f_h(x)‖ [B, N, T]")
    p.add_argument("--no-truncate", action="store_true",
                   help="keep every layer in the graph, with the last hidden states (a profile with a "
                        "topic_output_weight, as the embedded model's, always does)")
    p.add_argument("--opset", type=int, default=DEFAULT_OPSET, help=f"ONNX opset (default {DEFAULT_OPSET})")
    options.add_device(p)
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    options.add_quiet(p)
    p.set_defaults(func=run)
