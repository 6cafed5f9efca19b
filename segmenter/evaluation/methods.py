"""What a segmentation method under evaluation is, and the registry that names the methods.

A method sees a :class:`~segmenter.evaluation.loaders.Document` (its text and
unit spans, never the reference boundaries) and, with ``--oracle-k``, the
reference number of segments ``k`` if it can use it (``takes_k``).  It returns
a :class:`Prediction`: unit indices that open a segment, or character offsets
that the harness snaps to the nearest unit boundary.

Every method registers itself once, where it is defined, with
:func:`register_method` (as chonkie registers its chunkers); ``headseg
evaluate`` and ``benchmarks/segmentation.py`` take names, choices, help and
constructor options from here.  The built-in methods live in
:mod:`.baselines`, which the package imports, so the registry is complete
whenever :mod:`headseg.segmenter.evaluation` is.  Registry order is the order
``all`` runs them and the tables list them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence, TypeVar

from headseg.analysis.errors import HeadsegError, shown
from headseg.analysis.registry import Registry

from .loaders import Document, snap_each, snap_offsets


@dataclass
class Prediction:
    """Exactly one of ``units`` (segment-opening unit indices) or ``chars`` (character offsets);
    ``confidence``, where the method gives one, each boundary's (in [0, 1] or None, in the same order)."""

    units: list[int] | None = None
    chars: list[int] | None = None
    info: dict = field(default_factory=dict)
    confidence: list[float | None] | None = None

    def unit_confidence(self, doc: Document) -> dict[int, float]:
        """Each predicted boundary's confidence by the unit index :meth:`unit_boundaries` gives it; where
        two boundaries snap to one unit it has the higher confidence, and one without a confidence none."""
        if self.confidence is None:
            return {}
        given = self.units if self.units is not None else self.chars
        if given is None or len(given) != len(self.confidence):
            raise HeadsegError(f"{len(self.confidence)} confidences for {0 if given is None else len(given)} boundaries")
        units = [int(b) for b in given] if self.units is not None else snap_each(given, doc.starts, len(doc.text))
        out: dict[int, float] = {}
        for u, c in zip(units, self.confidence):
            if c is not None and u is not None and 0 < u < doc.n:
                out[u] = max(float(c), out.get(u, 0.0))
        return out

    def unit_boundaries(self, doc: Document) -> list[int]:
        """The predicted boundaries as sorted unit indices in ``1 .. doc.n - 1`` (offsets snapped to units)."""
        if self.units is not None:
            units = {int(u) for u in self.units}
            if any(u < 0 or u > doc.n for u in units):
                raise HeadsegError(f"predicted unit index outside 0..{doc.n}")
            # 0 and n are the document's edges, not boundaries.
            return sorted(u for u in units if 0 < u < doc.n)
        if self.chars is not None:
            return snap_offsets(self.chars, doc.starts, len(doc.text))
        raise HeadsegError("a prediction needs unit indices or character offsets")


class MethodUnavailable(HeadsegError):
    """The method cannot run here (missing optional dependency, missing API)."""


class Method:
    """Base class: ``setup()`` once per run (lazily), ``predict(doc, k)`` per document.

    ``name`` and ``options`` are set by :func:`register_method`; ``takes_k``
    says whether :meth:`predict` can use the reference number of segments.
    """

    name = "method"
    takes_k = False
    description = ""
    #: constructor keywords that ``headseg evaluate`` fills from its options of the same name
    options: tuple[str, ...] = ()

    def __init__(self):
        self._ready = False
        self._setup_error: BaseException | None = None
        self.setup_seconds = 0.0

    def ensure_setup(self) -> None:
        """Run ``setup`` once; a failed setup fails every later call with the same reason."""
        if self._setup_error is not None:
            raise self._setup_error
        if not self._ready:
            t0 = time.perf_counter()
            try:
                self.setup()
            except BaseException as exc:  # noqa: BLE001 - recorded per document by the harness
                if isinstance(exc, KeyboardInterrupt):
                    raise
                self._setup_error = exc
                raise
            finally:
                self.setup_seconds = time.perf_counter() - t0
            self._ready = True

    def setup(self) -> None:
        """Load what the method needs (models, libraries); run once, by :meth:`ensure_setup`."""

    def predict(self, doc: Document, k: int | None = None) -> Prediction:
        """The method's boundaries for ``doc``; ``k`` is the reference segment count (``takes_k`` methods only)."""
        raise NotImplementedError

    def params(self) -> dict:
        """The settings that change this method's output (JSON-serialisable), for results and signatures."""
        return {}

    #: distributions whose version can change this method's output
    packages: tuple[str, ...] = ()

    def signature(self) -> dict:
        """Everything that changes this method's output: stored results are reused only when it matches.

        Methods built on a model add its fingerprint, which needs :meth:`setup`.
        """
        return {"method": self.name, "params": self.params(), "versions": package_versions(("headseg",) + self.packages)}


def package_versions(names: Sequence[str]) -> dict:
    """Installed versions of the named distributions (absent ones are left out)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


#: every registered method by name, in registry order (register with :func:`register_method`)
METHODS: Registry[type[Method]] = Registry("method")

M = TypeVar("M", bound=type[Method])


def register_method(name: str, options: Sequence[str] = (), first: bool = False) -> Callable[[M], M]:
    """Class decorator: register a :class:`Method` subclass under ``name``.

    Sets the class's ``name`` and ``options`` (the constructor keywords
    ``headseg evaluate`` fills from its options of the same name, e.g.
    ``("model",)`` from ``--model``).  ``first``: at the head of the registry
    order (headseg's own method, registered after the baselines it leads).
    Refuses a name already taken.
    """
    if not isinstance(name, str) or not name or "," in name or name == "all":
        raise HeadsegError(f"a method name must be a non-empty string without ',' and not 'all' (got {shown(name)})")

    def named(cls: M) -> M:
        if not (isinstance(cls, type) and issubclass(cls, Method)):
            raise HeadsegError(f"method '{name}' must be a Method subclass")
        cls.name = name
        cls.options = tuple(options)
        return cls

    return METHODS.register(name, named, first=first)


def method_names() -> tuple[str, ...]:
    """The registered method names, in registry order."""
    return METHODS.names()


def parse_methods(spec: str | Sequence[str]) -> list[str]:
    """``"a,b"`` or a list → validated method names in the given order (``all`` = every method)."""
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if names == ["all"]:
        return list(METHODS)
    unknown = [n for n in names if n not in METHODS]
    if unknown:
        raise METHODS.unknown(unknown[0], also="all")
    if not names:
        raise HeadsegError("no method given")
    return list(dict.fromkeys(names))


def make_method(name: str, **kwargs) -> Method:
    """A new instance of the method registered as ``name``, built with ``kwargs``."""
    return METHODS.get(name)(**kwargs)
