"""Run methods over labelled documents, keep every result, summarise.

Results live in one JSON file (``--out``) rewritten atomically as records come
in, so an interrupted run loses at most the last half second of work and a
re-run with the same file skips every (data set, document, method, k mode)
already scored on the same document content by the same method signature
(settings, seed, model fingerprint, profile hash, backend and precision,
package versions: :meth:`Method.signature`); a record made with another
signature is recomputed, with a note naming what differs.  Failed records are
retried.

A method that cannot take k is run without it under ``--oracle-k``, and its
record is shared with the run without ``--oracle-k`` (the output is the same).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import math
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from headseg.analysis.errors import InputError, first_line
from headseg.analysis.writing import atomic_write_json
from headseg.analysis.progress import progress_bar

from .loaders import Document
from .methods import Method
from .metrics import METRIC_NAMES, mean_std, score_document

RESULTS_FORMAT = "headseg-eval-results"
RESULTS_VERSION = 1
#: Minimum seconds between two rewrites of the results file.
FLUSH_INTERVAL = 0.5


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def k_mode(oracle_k: bool, method: Method) -> str:
    """``"oracle"`` where the method is told k (``--oracle-k`` and it can take k), else ``"none"``."""
    return "oracle" if oracle_k and method.takes_k else "none"


def record_key(dataset: str, doc_id: str, method: str, mode: str) -> str:
    """The key of one result record: ``dataset|document|method|k mode``."""
    return f"{dataset}|{doc_id}|{method}|{mode}"


class ResultStore:
    """The results JSON: method descriptions, documents per data set, and one record per run."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self.data = {"format": RESULTS_FORMAT, "version": RESULTS_VERSION, "created": _now(), "updated": None,
                     "methods": {}, "datasets": {}, "records": {}}
        self._dirty = False
        self._last_flush = 0.0
        if self.path is not None and self.path.exists():
            self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"{self.path}: cannot read the results file ({exc}); move it away or pick another --out") from None
        if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
            raise InputError(f"{self.path}: not a headseg evaluation results file; pick another --out")
        if data.get("version") != RESULTS_VERSION:
            raise InputError(f"{self.path}: results version {data.get('version')} is not {RESULTS_VERSION}")
        for key in ("methods", "datasets", "records"):
            data.setdefault(key, {})
        why = _shape_error(data)
        if why:
            raise InputError(f"{self.path}: not a valid results file ({why}); move it away or pick another --out")
        self.data = data

    @property
    def records(self) -> dict:
        """Every result record by :func:`record_key` (the live dict inside ``data``)."""
        return self.data["records"]

    def done(self, key: str, fingerprint: str, signature: str | None = None) -> bool:
        """A finished record for this document content, made by a method with this signature hash.

        A record without the fields a summary reads (a file edited by hand) is not
        finished: it is computed again.
        """
        rec = self.records.get(key)
        return bool(rec and signature is not None and rec.get("status") == "ok"
                    and rec.get("fingerprint") == fingerprint and rec.get("signature") == signature
                    and all(isinstance(rec.get(k), t) for k, t in _OK_FIELDS.items())
                    and isinstance(rec.get("info", {}), dict))

    def add(self, key: str, record: dict) -> None:
        """Store ``record`` under ``key``; the file is rewritten at most every :data:`FLUSH_INTERVAL` seconds."""
        self.records[key] = record
        self._dirty = True
        self.flush(force=False)

    def note_dataset(self, name: str, path: str, docs: Sequence[Document]) -> None:
        """Record a data set's documents: units, segments, content fingerprint and reference boundaries."""
        ds = self.data["datasets"].setdefault(name, {"path": path, "documents": {}})
        ds["path"] = path
        for d in docs:
            ds["documents"][d.id] = {"units": d.n, "segments": d.num_segments, "fingerprint": d.fingerprint(),
                                     "boundaries": d.boundaries}
        self._dirty = True

    def note_method(self, m: Method, signature: dict | None = None) -> None:
        """Record a method's description, settings, setup time (s) and signature."""
        self.data["methods"][m.name] = {"description": m.description, "takes_k": m.takes_k, "params": m.params(),
                                        "setup_seconds": round(m.setup_seconds, 3), "signature": signature}
        self._dirty = True

    def flush(self, force: bool = True) -> None:
        """Rewrite the results file atomically if anything changed (unless ``force``, not twice within the interval)."""
        if self.path is None or not self._dirty:
            return
        now = time.monotonic()
        if not force and now - self._last_flush < FLUSH_INTERVAL:
            return
        self.data["updated"] = _now()
        atomic_write_json(self.path, self.data)
        self._last_flush = time.monotonic()
        self._dirty = False


#: the fields of a finished record that summaries read, and their JSON types
_OK_FIELDS = {"boundaries": list, "seconds": (int, float), "pred_segments": int, "ref_segments": int,
              "units": int, "scores": dict, "doc": str}


def _shape_error(data: dict) -> str | None:
    """What in a results file's sections is not of the shape :class:`ResultStore` writes, else None."""
    for key in ("methods", "datasets", "records"):
        if not isinstance(data[key], dict):
            return f"'{key}' is not an object"
    for section, inner in (("methods", None), ("datasets", "documents"), ("records", None)):
        for name, entry in data[section].items():
            if not isinstance(entry, dict) or (inner and not isinstance(entry.get(inner, {}), dict)):
                return f"{section} entry '{name}' is not of the shape headseg writes"
    return None


def _short_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {first_line(exc, 280)}"


def run_one(method: Method, doc: Document, k: int | None) -> dict:
    """Run one method on one document; a failure becomes a record, never an exception."""
    try:
        method.ensure_setup()
    except Exception as exc:  # noqa: BLE001
        return {"status": "failed", "error": "setup: " + _short_error(exc), "seconds": 0.0}
    t0 = time.perf_counter()
    try:
        pred = method.predict(doc, k)
        hyp = pred.unit_boundaries(doc)
        scores = score_document(doc.boundaries, hyp, doc.n)
        by_unit = pred.unit_confidence(doc) if pred.confidence is not None else None
    except Exception as exc:  # noqa: BLE001 - any library error is that document's failure
        return {"status": "failed", "error": _short_error(exc), "seconds": time.perf_counter() - t0}
    rec = {"status": "ok", "seconds": time.perf_counter() - t0, "boundaries": hyp,
           "pred_segments": len(hyp) + 1, "scores": scores.to_dict(), "info": pred.info}
    if by_unit is not None:
        rec["confidence"] = [by_unit.get(u) for u in hyp]  # one per stored boundary, None where it has none
    return rec


@dataclass
class Dataset:
    """A named data set: where it was read from and its labelled documents."""

    name: str
    path: str
    documents: list[Document]


@dataclass
class Summary:
    """Macro averages for one (data set, method, k mode)."""

    dataset: str
    method: str
    mode: str
    documents: int
    ok: int
    failed: int
    metrics: dict  # name -> (mean, std)
    pred_segments: float
    ref_segments: float
    docs_per_s: float
    errors: list = field(default_factory=list)  # (reason, count), most common first

    def to_dict(self) -> dict:
        """JSON-ready: NaN (no finished document) becomes None."""
        nan_none = lambda v: None if isinstance(v, float) and math.isnan(v) else v  # noqa: E731
        d = {k: nan_none(v) for k, v in self.__dict__.items()}
        d["metrics"] = {k: {"mean": nan_none(v[0]), "std": nan_none(v[1])} for k, v in self.metrics.items()}
        d["errors"] = [{"reason": r, "documents": c} for r, c in self.errors]
        return d


def evaluate(
    datasets: Sequence[Dataset],
    methods: Sequence[Method],
    oracle_k: bool = False,
    store: ResultStore | None = None,
    quiet: bool = False,
    redo: bool = False,
) -> list[Summary]:
    """Score every method on every document; returns the summaries of this run's documents.

    ``redo`` runs these methods again even where the store has their results
    (e.g. after changing the segmenter); other methods' records are kept.
    """
    store = store or ResultStore(None)
    total = sum(len(ds.documents) for ds in datasets) * len(methods)
    sigs: dict[str, tuple[dict | None, str | None]] = {}
    stale: Counter = Counter()

    def signature(m: Method) -> tuple[dict | None, str | None]:
        # Computed once per method, lazily: for a method with a model it needs the model loaded.
        if m.name not in sigs:
            try:
                sig = m.signature()
            except Exception:  # noqa: BLE001 - a setup failure is recorded per document by run_one
                sig = None
            sigs[m.name] = (sig, signature_hash(sig) if sig is not None else None)
        return sigs[m.name]

    try:
        with progress_bar(total=total, desc="evaluate", disable=quiet, unit="doc") as bar:
            for ds in datasets:
                store.note_dataset(ds.name, ds.path, ds.documents)
                for doc in ds.documents:
                    fp = doc.fingerprint()
                    for m in methods:
                        mode = k_mode(oracle_k, m)
                        key = record_key(ds.name, doc.id, m.name, mode)
                        sig, sig_hash = signature(m)
                        if redo or not store.done(key, fp, sig_hash):
                            old = store.records.get(key)
                            if (not redo and old and old.get("status") == "ok" and old.get("fingerprint") == fp
                                    and sig_hash is not None):
                                stale[m.name] += 1
                            k = doc.num_segments if mode == "oracle" else None
                            rec = run_one(m, doc, k)
                            rec.update({"dataset": ds.name, "doc": doc.id, "method": m.name, "mode": mode,
                                        "k": k, "units": doc.n, "ref_segments": doc.num_segments,
                                        "fingerprint": fp, "signature": sig_hash})
                            if m._ready:
                                if m.name in stale and stale[m.name] == 1:
                                    _warn_stale(m.name, store.data["methods"].get(m.name, {}).get("signature"), sig)
                                store.note_method(m, sig)
                            store.add(key, rec)
                        bar.update()
    finally:
        store.flush()
    return summarise(store, datasets, [m.name for m in methods], {m.name: k_mode(oracle_k, m) for m in methods})


def signature_hash(sig: dict) -> str:
    """Short stable hash of a method signature (what the records store)."""
    return hashlib.sha256(json.dumps(sig, sort_keys=True, default=str).encode()).hexdigest()[:16]


def signature_diff(old, new, prefix: str = "") -> list[str]:
    """Dotted names of the entries that differ between two signatures."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return [prefix.rstrip(".") or "signature"] if old != new else []
    out = []
    for k in sorted(set(old) | set(new)):
        if old.get(k) != new.get(k):
            if isinstance(old.get(k), dict) and isinstance(new.get(k), dict):
                out += signature_diff(old[k], new[k], f"{prefix}{k}.")
            else:
                out.append(f"{prefix}{k}")
    return out


def _warn_stale(name: str, old: dict | None, new: dict | None) -> None:
    what = ", ".join(signature_diff(old, new)[:6]) if old else "no recorded settings (older results file)"
    logging.getLogger("headseg").warning(
        "note: stored results of %s were made with different settings (%s); recomputing them", name, what)


def summarise(store: ResultStore, datasets: Sequence[Dataset] | None, methods: Sequence[str],
              modes: dict[str, str]) -> list[Summary]:
    """Summaries over the given data sets' documents (all stored documents when ``datasets`` is None)."""
    out = []
    ds_docs: list[tuple[str, list[str]]]
    if datasets is None:
        ds_docs = [(name, list(info["documents"])) for name, info in store.data["datasets"].items()]
    else:
        ds_docs = [(ds.name, [d.id for d in ds.documents]) for ds in datasets]
    for name, doc_ids in ds_docs:
        docs_info = store.data["datasets"].get(name, {}).get("documents", {})
        for mname in methods:
            mode = modes[mname]
            recs = [store.records.get(record_key(name, d, mname, mode)) for d in doc_ids]
            recs = [r for r in recs if r is not None]
            ok = [r for r in recs if r["status"] == "ok"]
            failed = [r for r in recs if r["status"] != "ok"]
            scores = [_rescore(r, docs_info.get(r["doc"])) for r in ok]
            metrics = {k: mean_std([sc[k] for sc in scores]) for k in METRIC_NAMES}
            # Records that reused embeddings from the run without k would inflate the speed.
            timed = [r for r in ok if not r.get("info", {}).get("cached")]
            secs = sum(r["seconds"] for r in timed)
            out.append(Summary(
                dataset=name, method=mname, mode=mode, documents=len(doc_ids), ok=len(ok), failed=len(failed),
                metrics=metrics,
                pred_segments=mean_std([r["pred_segments"] for r in ok])[0],
                ref_segments=mean_std([r["ref_segments"] for r in recs])[0],
                docs_per_s=(len(timed) / secs) if secs > 0 else math.nan,
                errors=Counter(r.get("error", "?") for r in failed).most_common(3),
            ))
    return out


def _rescore(rec: dict, doc_info: dict | None) -> dict:
    """Scores recomputed from the stored boundaries, so a cached record follows the current metric code."""
    if doc_info is None or doc_info.get("fingerprint") != rec.get("fingerprint") or "boundaries" not in doc_info:
        return rec["scores"]
    return score_document(doc_info["boundaries"], rec["boundaries"], rec["units"]).to_dict()


def _fmt(v: float, std: float | None = None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.3f}" if std is None else f"{v:.3f}±{std:.2f}"


TABLE_COLUMNS = ("method", "k", "ok/fail", "Pk↓", "WD↓", "B↑", "P", "R", "F1", "P±1", "R±1", "F1±1",
                 "segs hyp/ref", "docs/s")


def summary_row(s: Summary) -> list[str]:
    """One table row, in :data:`TABLE_COLUMNS` order (metrics as mean±std, documents per second)."""
    m = s.metrics
    return [
        s.method,
        "oracle" if s.mode == "oracle" else "-",
        f"{s.ok}/{s.failed}",
        _fmt(*m["pk"]), _fmt(*m["windowdiff"]), _fmt(*m["b"]),
        _fmt(m["precision"][0]), _fmt(m["recall"][0]), _fmt(*m["f1"]),
        _fmt(m["precision_1"][0]), _fmt(m["recall_1"][0]), _fmt(*m["f1_1"]),
        f"{_fmt1(s.pred_segments)}/{_fmt1(s.ref_segments)}",
        _fmt_rate(s.docs_per_s),
    ]


def _fmt_rate(v: float) -> str:
    if math.isnan(v):
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.2g}"


def _fmt1(v: float) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:.1f}"


def format_tables(summaries: Iterable[Summary]) -> str:
    """Plain-text tables, one per data set."""
    by_ds: dict[str, list[Summary]] = {}
    for s in summaries:
        by_ds.setdefault(s.dataset, []).append(s)
    blocks = []
    for name, rows in by_ds.items():
        cells = [list(TABLE_COLUMNS)] + [summary_row(s) for s in rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(TABLE_COLUMNS))]
        lines = [f"{name}  ({rows[0].documents} documents)"]
        for j, r in enumerate(cells):
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
            if j == 0:
                lines.append("  ".join("-" * w for w in widths))
        for s in rows:
            for reason, count in s.errors:
                lines.append(f"  {s.method} failed on {count} document(s): {reason}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def format_markdown(summaries: Iterable[Summary]) -> str:
    """Markdown tables, one per data set (for docs/results.md)."""
    by_ds: dict[str, list[Summary]] = {}
    for s in summaries:
        by_ds.setdefault(s.dataset, []).append(s)
    blocks = []
    for name, rows in by_ds.items():
        out = [f"### {name} ({rows[0].documents} documents)", "",
               "| " + " | ".join(TABLE_COLUMNS) + " |",
               "|" + "|".join("---" if i == 0 else "---:" for i in range(len(TABLE_COLUMNS))) + "|"]
        for s in rows:
            out.append("| " + " | ".join(summary_row(s)) + " |")
        notes = [f"- {s.method}: failed on {c} document(s): `{reason}`" for s in rows for reason, c in s.errors]
        if notes:
            out += [""] + notes
        blocks.append("\n".join(out))
    return "\n\n".join(blocks)


def check_k_modes(methods: Sequence[Method], oracle_k: bool) -> list[str]:
    """Names of methods that run without k although ``--oracle-k`` was asked for."""
    return [m.name for m in methods if oracle_k and not m.takes_k]


def load_datasets(paths: Sequence[str], fmt: str = "auto", wiki_level: int | None = None,
                  limit: int | None = None, encoding: str = "utf-8", max_bytes: int | None = None,
                  names: Sequence[str] | None = None) -> list[Dataset]:
    """One :class:`Dataset` per path (a file or a directory), at most ``limit`` documents each.

    A data set is named by ``names`` or by the path's last part (the whole path
    where two would share a name); the same data set twice is an error.
    """
    from headseg.analysis.reading import DEFAULT_MAX_BYTES

    from .loaders import iter_documents

    seen: dict[str, str] = {}
    for p in paths:  # before any file is read: the same folder by two spellings would be scored twice
        real = os.path.realpath(p)
        if real in seen:
            raise InputError(f"data set {p} is given twice (as {seen[real]})"
                             if seen[real] != str(p) else f"data set {p} is given twice")
        seen[real] = str(p)
    out = []
    used = set()
    for i, p in enumerate(paths):
        name = names[i] if names else Path(p).name or str(p)
        if name in used:
            name = str(p)
        if name in used:  # "x" after "a/x": the real path is unique (checked above)
            name = os.path.realpath(p)
        used.add(name)
        docs = list(iter_documents(p, fmt, wiki_level=wiki_level, limit=limit, encoding=encoding,
                                   max_bytes=max_bytes or DEFAULT_MAX_BYTES))
        out.append(Dataset(name=name, path=str(p), documents=docs))
    return out
