"""The segmentation options: one frozen, validated object for the API, the CLI, Ray and the adapters.

:class:`SegmentOptions` is the one place an option is declared.  Each field
carries its command-line flag (``cli`` metadata), so ``headseg segment`` builds
its flags from the fields (:func:`add_option_flags`) and reads them back
(:meth:`SegmentOptions.from_args`); the Python API, the Ray engine and the
framework adapters take the same object or its fields as keyword arguments.
A field's metadata also says what it takes (``bounds``) and, where None means a
fixed value, what that is (``effective``); :func:`validate_options` and the HTTP
schema (:func:`option_schema`) read them.  An option that goes with some levels
only is named in those levels' registrations (:func:`~headseg.segmenter.levels.register_level`),
which the check reads.  Adding an option is one field here and the code that
uses it (for a level's own option: the level, which declares it).  The search
never reads these options: it gets a :class:`~headseg.segmenter.request.SearchRequest`
(:meth:`SegmentOptions.request`).

Options are validated once, on construction (an :class:`InputError` naming the
option, or its flag when built from the command line), before any model is
loaded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from headseg.analysis.errors import HeadsegError, InputError, is_integer, shown
from headseg.analysis.settings import add_flags, cli_spec, flag as _flag, merged, values_from_args

from .levels import get_level, level_help, level_names, level_options, levels_taking
from .request import KEEP_APART, TARGET_FRACTION, SearchRequest, default_target
from .structure import STRUCTURES
from .tokens import TokenCounter, TokenCounterSpec, resolve_token_counter
from .topics import TopicParams

#: the largest ``penalty`` taken: far beyond it no document has a cut worth its price (the
#: correlation length is at most ``TopicParams.max_lag`` = 100 units), and much larger values
#: overflow the search's float sums
MAX_PENALTY = 1e6

#: the most levels ``depth`` takes (a segment tree deeper than this has nodes of a few units)
MAX_DEPTH = 8

#: the largest size or count taken (2**53: exact as a float, which the search's sums are); beyond it an
#: integer from JSON (any length) would overflow there
MAX_COUNT = 2 ** 53

SentenceSplitter = Callable[[str], Sequence[tuple[int, int]]]

#: a size or a count: a positive integer the search's float sums hold exactly
COUNT = (1, MAX_COUNT)


def _option(flag: str, help: str, *, bounds: tuple[float, float] | None = None, effective: Any = None,
            **argparse_kwargs: Any) -> dict:
    """A field's metadata: its flag (:func:`~headseg.analysis.settings.flag`), the ``bounds`` a number
    takes (checked by :func:`validate_options`, stated by :func:`option_schema`) and the value None
    stands for (``effective``, for the schema's ``default``)."""
    out = _flag(flag, help, **argparse_kwargs)
    if bounds is not None:
        out["bounds"] = bounds
    if effective is not None:
        out["effective"] = effective
    return out


@dataclass(frozen=True)
class SegmentOptions:
    """What to segment into and under which limits; see :meth:`headseg.Segmenter.segment`.

    Sizes are in characters (``*_chars``) or tokens (``max_tokens``: the
    segmenter model's tokens, or ``token_counter``'s).  ``max_chars`` and
    ``max_tokens`` are hard limits; ``min_chars`` is honoured whenever the limits
    allow it.  Raises :class:`InputError` on a bad value.
    """

    #: what the segments are: a registered level (:mod:`headseg.segmenter.levels`): ``"topic"``,
    #: coherent groups of units; ``"unit"``, sentence-like units
    level: str = field(default="topic", metadata=_flag("--level", level_help, choices=level_names))
    #: exactly this many topic segments per document (None: chosen automatically)
    segments: int | None = field(default=None, metadata=_option(
        "--segments", "exactly N segments per document", type=int, metavar="N", bounds=COUNT))
    #: levels of a segment tree below the document (``level="tree"``; None: the text decides)
    depth: int | None = field(default=None, metadata=_option(
        "--depth", "levels of the segment tree below the document (--level tree; default: the text decides)",
        type=int, metavar="N", bounds=(1, MAX_DEPTH)))
    #: avoid segments shorter than this many characters
    min_chars: int | None = field(default=None, metadata=_option(
        "--min-chars", "avoid segments shorter than this", type=int, bounds=COUNT))
    #: hard limit: no segment is longer than this many characters
    max_chars: int | None = field(default=None, metadata=_option(
        "--max-chars", "hard limit: no segment is longer", type=int, bounds=COUNT))
    #: hard limit in tokens (the model's, or ``token_counter``'s)
    max_tokens: int | None = field(default=None, metadata=_option(
        "--max-tokens", "hard limit in model tokens", type=int, bounds=COUNT))
    #: weight of the local correlation length in the cost of a new segment (None: 0.35)
    penalty: float | None = field(default=None, metadata=_option(
        "--penalty", "weight of the local correlation length in the cost of a new segment (default 0.35; "
                     "higher = fewer segments; docs/segmenter.md)", type=float, bounds=(0, MAX_PENALTY),
        effective=TopicParams.penalty))
    #: the confidence a topic boundary needs to be kept, in [0, 1] (the calibrated probability that it is a
    #: topic boundary: docs/segmenter.md, "Boundaries as evidence"); the weakest go first, and a boundary
    #: the hard limits need stays.  None or 0: the boundaries the evidence supports (1: none but those
    #: the limits need)
    min_confidence: float | None = field(default=None, metadata=_option(
        "--min-confidence", "keep only topic boundaries whose confidence (0-1, in each record) is at least X "
                            "(1: none but those the size limits need); docs/segmenter.md",
        type=float, metavar="X", bounds=(0, 1), effective=TopicParams.min_confidence))
    #: soft size target in the same tokens as ``max_tokens``: the search pays for a segment's
    #: distance from it, so segments come out about this size, cut where topics turn
    #: (None: ``TARGET_FRACTION`` of ``max_tokens`` when that is given, else no target)
    target_tokens: int | None = field(default=None, metadata=_option(
        "--target-tokens", "aim segments at about this many tokens (soft; default 0.6 x --max-tokens "
                           "when that is given; docs/segmenter.md)", type=int, bounds=COUNT))
    #: each chunk also repeats up to this many units (sentences) of the text before it, within the
    #: hard limits; the segments still tile the text, the overlapped chunks are ``result.chunks``
    #: (their offsets also in ``result.meta["chunks"]``), and the records, the service's answer and
    #: the adapters give the chunks, each with ``overlap_chars`` (None or 0: no overlap)
    overlap: int | None = field(default=None, metadata=_option(
        "--overlap", "chunks that also repeat up to N sentences of the segment before (within the limits): "
                     "the records are then the chunks, each with overlap_chars", type=int, metavar="N",
        bounds=(0, MAX_COUNT)))
    #: the text's structure: ``markdown`` reads headings, code, tables and lists (never cut inside a
    #: block that fits the limits, a segment opens at a heading when the sizes allow; every segment
    #: carries its heading path), ``plain`` reads none, ``auto`` reads Markdown when the text looks
    #: like it (a code fence, a table, two ``#`` headings; the command line: also a ``.md``,
    #: ``.markdown`` or ``.mdx`` file).  :mod:`headseg.segmenter.structure`
    structure: str = field(default="auto", metadata=_flag(
        "--structure", "the text's structure: markdown (headings, code, tables and lists shape the segments), "
                       "mdx (markdown whose JSX/HTML tags wrap fences and tables: Docusaurus tabs, components), "
                       "plain, or auto (mdx for .mdx files and Markdown whose HTML wraps a fence, markdown for "
                       ".md/.markdown files and text that looks like it)",
        choices=STRUCTURES))
    #: what ``max_tokens`` counts: a callable ``str -> int``, a tokenizer, or a
    #: local Hugging Face tokenizer directory or cached model name
    #: (:func:`headseg.segmenter.tokens.resolve_token_counter`); None: the model's tokens
    token_counter: TokenCounterSpec = field(default=None, compare=False)
    #: a callable ``text -> [(start, end), ...]`` (pysbd, spaCy...) for the units
    #: instead of the sentence rules (None: the segmenter's own)
    sentence_splitter: SentenceSplitter | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        validate_options({f.name: getattr(self, f.name) for f in fields(self)})
        # Resolved once, so a tokenizer directory is read once and a bad one fails here.
        object.__setattr__(self, "_counter", resolve_token_counter(self.token_counter))

    def __getstate__(self) -> dict[str, Any]:
        # The resolved counter is a closure pickle cannot take (the options go to worker processes):
        # it is resolved again from ``token_counter`` on the other side.
        state = dict(self.__dict__)
        state.pop("_counter", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        object.__setattr__(self, "_counter", resolve_token_counter(self.token_counter))

    @property
    def counter(self) -> TokenCounter | None:
        """The resolved ``token_counter`` (None: count the segmenter model's tokens)."""
        return self._counter  # type: ignore[attr-defined]

    @classmethod
    def of(cls, options: "SegmentOptions | Mapping[str, Any] | None" = None, **overrides: Any) -> "SegmentOptions":
        """``options`` (an object, a mapping of fields, or None for the defaults) with ``overrides`` applied.

        An override whose value is None keeps ``options``' value, so callers can
        pass their keyword arguments through unchanged.  Unknown names raise
        :class:`HeadsegError`.
        """
        return merged(cls, options, {k: v for k, v in overrides.items() if v is not None}, "options",
                      "option(s) for segment")

    @classmethod
    def from_args(cls, args: Any) -> "SegmentOptions":
        """The options of parsed command-line ``args`` (flags from :func:`add_option_flags`);
        an error names the flag, e.g. ``--max-chars``."""
        values = values_from_args(cls, args)
        validate_options(values, label=lambda name: _cli(name)["flag"])
        return cls(**values)

    @property
    def size_target(self) -> float | None:
        """The soft size target of the search in ``max_tokens``' units: ``target_tokens``, else
        :data:`TARGET_FRACTION` of ``max_tokens``, else None (no target)."""
        if self.target_tokens is not None:
            return float(self.target_tokens)
        return default_target(self.max_tokens)

    def request(self) -> SearchRequest:
        """What the search is asked for (:class:`~headseg.segmenter.request.SearchRequest`): the limits,
        the effective size target, the number of segments, the penalty and the confidence a boundary needs."""
        return SearchRequest(max_chars=self.max_chars, min_chars=self.min_chars, max_tokens=self.max_tokens,
                             target_tokens=self.size_target, segments=self.segments, penalty=self.penalty,
                             min_confidence=self.min_confidence, keep_apart=self.keep_apart)

    @property
    def keep_apart(self) -> float | None:
        """Under the size target ``max_tokens`` implies (no explicit ``target_tokens``), the evidence that
        keeps a topic boundary whatever the target (:data:`KEEP_APART`); None where there is no such
        target (an explicit target decides alone)."""
        if self.max_tokens is None or self.target_tokens is not None:
            return None
        return KEEP_APART

    def settings(self) -> dict[str, Any]:
        """The command-line options as plain values (a resumed run must match them)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if "cli" in f.metadata}


def validate_options(values: Mapping[str, Any], label: Callable[[str], str] = str) -> None:
    """Raise :class:`InputError` for the first bad value in ``values`` (fields of
    :class:`SegmentOptions`), naming the option by ``label(field name)``: a number outside its field's
    ``bounds``, an option that goes with other levels (the levels' registrations say which), or two
    values that contradict each other."""
    level = values.get("level", "topic")
    names = level_names()
    if not isinstance(level, str) or level not in names:
        raise InputError(f"{label('level')} must be one of {', '.join(names)} (got {shown(level)})")
    specs = [(f.name, f.metadata) for f in fields(SegmentOptions) if "bounds" in f.metadata]
    for name, meta in specs:
        _check_bounds(values.get(name), label(name), meta["bounds"], meta["cli"]["type"])
    taken, specific = get_level(level), set(level_options())
    for name in (f.name for f in fields(SegmentOptions) if f.name in specific):
        v = values.get(name)
        if v is not None and v != 0 and not taken.takes(name):
            # a number of segments means topic segments; units are as many as the text has
            raise InputError(f"{label(name)} goes with {label('level')} {', '.join(levels_taking(name))}, "
                             f"not {level}")
    lo, hi = values.get("min_chars"), values.get("max_chars")
    if hi is not None and lo is not None and lo > hi:
        raise InputError(f"{label('min_chars')} ({lo}) is larger than {label('max_chars')} ({hi})")
    target, cap = values.get("target_tokens"), values.get("max_tokens")
    if target is not None and cap is not None and target > cap:
        raise InputError(f"{label('target_tokens')} ({target}) is larger than {label('max_tokens')} ({cap})")
    structure = values.get("structure", "auto")
    if not isinstance(structure, str) or structure not in STRUCTURES:
        raise InputError(f"{label('structure')} must be one of {', '.join(STRUCTURES)} (got {shown(structure)})")
    check_splitter(values.get("sentence_splitter"))


def _check_bounds(v: Any, name: str, bounds: tuple[float, float], kind: type) -> None:
    """Raise :class:`InputError` unless ``v`` is None or a ``kind`` (int or float) within ``bounds``."""
    if v is None:
        return
    lo, hi = bounds
    if kind is int:
        if not is_integer(v) or not lo <= v <= hi:
            what = {(1, MAX_COUNT): "a positive integer up to 2**53",
                    (0, MAX_COUNT): "a non-negative integer up to 2**53"}.get((lo, hi), f"an integer from {lo} to {hi}")
            raise InputError(f"{name} must be {what} (got {shown(v)})")
    # an int is compared as it is: converting 10**400 to a float for isfinite() is an OverflowError
    elif (isinstance(v, bool) or not isinstance(v, (int, float, np.floating))
          or (not isinstance(v, int) and not math.isfinite(v)) or not lo <= v <= hi):
        raise InputError(f"{name} must be a number from {lo:g} to {hi:g} (got {shown(v)})")


def check_splitter(splitter: SentenceSplitter | None) -> SentenceSplitter | None:
    """``splitter``, after checking that it is None or a callable (raises :class:`HeadsegError`)."""
    if splitter is not None and not callable(splitter):
        raise HeadsegError("sentence_splitter must be a callable text -> [(start, end), ...]")
    return splitter


def option_names() -> tuple[str, ...]:
    """Every field of :class:`SegmentOptions`, in declaration order."""
    return tuple(f.name for f in fields(SegmentOptions))


def _cli(name: str) -> dict:
    return cli_spec(SegmentOptions, name)


def add_option_flags(parser: Any, exclude: Sequence[str] = ()) -> None:
    """Declare one flag per command-line option of :class:`SegmentOptions` on an argparse parser
    (``exclude``: field names a command has no use for)."""
    add_flags(parser, SegmentOptions, exclude=exclude)


def option_schema(names: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """A JSON Schema property for each command-line option (``names``: those, in that order; None: all).

    Made from the fields, so the HTTP schema and the viewer page's form say
    what the flags say: ``type`` (from the flag's argparse type), ``enum`` (a
    registry's names: the levels registered when this is called),
    ``description`` (the flag's help), ``minimum``/``maximum`` (the field's
    ``bounds``, what :func:`validate_options` takes) and ``default`` (a choice's
    own, or the value None stands for: the field's ``effective``).
    """
    out: dict[str, dict[str, Any]] = {}
    for f in fields(SegmentOptions):
        if "cli" not in f.metadata or (names is not None and f.name not in names):
            continue
        spec = cli_spec(SegmentOptions, f.name)
        prop: dict[str, Any] = {"description": spec["help"]}
        if "choices" in spec:
            prop.update(type="string", enum=list(spec["choices"]), default=f.default)
        else:
            prop["type"] = {int: "integer", float: "number"}[spec["type"]]
            lo, hi = f.metadata["bounds"]
            prop.update(minimum=lo, maximum=hi)
        if "effective" in f.metadata:
            prop["default"] = f.metadata["effective"]
        out[f.name] = prop
    if names is not None:
        out = {n: out[n] for n in names if n in out}
    return out
