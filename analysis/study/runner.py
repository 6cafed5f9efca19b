"""``headseg study``: the streaming similarity-matrix study over a corpus.

Pipeline: corpus → planned windows (:mod:`headseg.analysis.study.corpus`) →
batches through :class:`~headseg.analysis.capture.TorchBackend` (all heads,
attention and value norms) → fixed-size accumulators
(:mod:`headseg.analysis.study.stats`) → report, figures and head profile
(:mod:`headseg.analysis.study.report`).  The same run sharded over Ray is
:mod:`headseg.analysis.study.distributed`.

The accumulator is checkpointed atomically to ``DIR/checkpoint.npz`` every
``checkpoint_every`` batches and at the end; ``resume`` continues from it.
Batches are formed deterministically from the plan, and each sample's random
numbers are seeded by ``(seed, sample index)``, so a resumed run adds exactly
the same numbers in the same order as an uninterrupted one: its
``report.json`` is bit-identical.
"""

from __future__ import annotations

import json
import os
import resource
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..capture import TorchBackend
from ..text import WINDOW_TOKENS, window_width
from ..errors import HeadsegError, InputError, ProfileError
from ..reading import AUTO_ENCODING, DEFAULT_MAX_BYTES, read_json_object
from ..writing import atomic_save_npz, atomic_write_json
from ..progress import progress_bar
from .corpus import CorpusDocument, build_window, corpus_fingerprint, plan_samples, read_corpus, tokenize_corpus
from .stats import StudyAccumulator, token_category_index

CHECKPOINT = "checkpoint.npz"
#: files the study writes into DIR (anything else there is left alone).
OUTPUT_FILES = ("report.json", "report.md", "heads.json", "run.json", CHECKPOINT)
REPORT_SCHEMA = 1


@dataclass
class StudyConfig:
    """Everything that determines the study's result (plus a few run options)."""

    corpus: list[str]
    out: str
    samples: int = 20000
    seq_len: int = WINDOW_TOKENS
    seed: int = 0
    batch_size: int = 32
    top_fraction: float = 0.05
    attention_threshold: float = 1.0
    short_range: int = 8
    null_permutations: int = 4
    max_heads: int = 12
    min_heads: int = 8
    corpus_name: str = ""
    # run options: do not change the result
    checkpoint_every: int = 20
    resume: bool = False
    force: bool = False
    encoding: str = AUTO_ENCODING
    max_bytes: int = DEFAULT_MAX_BYTES
    device: str = "cpu"
    figures: bool = True
    quiet: bool = False
    command: str = ""

    def parameters(self) -> dict:
        """The parameters that the result depends on (recorded and checked on resume)."""
        keys = ("samples", "seq_len", "seed", "batch_size", "top_fraction", "attention_threshold",
                "short_range", "null_permutations", "max_heads", "min_heads")
        return {k: getattr(self, k) for k in keys}

    def validate(self, max_positions: int) -> None:
        """Refuse (:class:`InputError`, naming the flag) settings no study can run with; ``max_positions``
        is the model's window limit in tokens.
        """
        if self.samples < 1:
            raise InputError("--samples must be at least 1")
        if self.batch_size < 1:
            raise InputError("--batch-size must be at least 1")
        if self.seq_len < 8:
            raise InputError("--seq-len must be at least 8 tokens")
        if self.seq_len > max_positions:
            raise InputError(f"--seq-len {self.seq_len} is over the model's limit of {max_positions} tokens")
        if not 0.0 < self.top_fraction < 1.0:
            raise InputError(f"--top-fraction must be between 0 and 1 (got {self.top_fraction})")
        if self.attention_threshold < 0:
            raise InputError("--attention-threshold must be at least 0")
        if self.short_range < 1:
            raise InputError("--short-range must be at least 1")
        if self.null_permutations < 1:
            raise InputError("--null-permutations must be at least 1")
        if not 1 <= self.min_heads <= self.max_heads:
            raise InputError("need 1 <= --min-heads <= --max-heads")
        if self.checkpoint_every < 1:
            raise InputError("--checkpoint-every must be at least 1")


def check_out_dir(out: Path, resume: bool, force: bool) -> None:
    """Refuse to write into a non-empty directory unless resuming (its checkpoint is there) or forced."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a directory")
    if not out.exists() or force or not any(out.iterdir()):
        return
    if not resume:
        raise InputError(f"--out {out}: directory exists and is not empty; pass --resume to continue it or --force to overwrite")
    if not (out / CHECKPOINT).is_file():
        # nothing to resume: the run would start afresh and replace files of these names that headseg did not write
        raise InputError(f"--out {out}: no {CHECKPOINT} to resume from, and the folder is not empty; "
                         "pick another --out, or pass --force to start over in it")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class Study:
    """One study run: planning, the streaming loop, checkpoints and outputs."""

    def __init__(self, cfg: StudyConfig, loaded, docs: list[CorpusDocument] | None = None):
        """``docs``: the corpus already read (:func:`read_corpus` of ``cfg``'s paths, so a caller can
        refuse a bad corpus before the model loads); None: read here."""
        self.cfg = cfg
        self.loaded = loaded
        self.info = loaded.info
        self.out = Path(cfg.out)
        cfg.validate(self.info.max_positions)
        check_out_dir(self.out, cfg.resume, cfg.force)
        self._check_existing_profile()
        if docs is None:
            docs = read_corpus(cfg.corpus, encoding=cfg.encoding, max_bytes=cfg.max_bytes)
        tok = loaded.tokenizer
        self.docs = tokenize_corpus(docs, tok)
        self.width = window_width(tok, cfg.seq_len)
        if self.width < 2:
            raise InputError(f"--seq-len {cfg.seq_len} leaves no room for text")
        lengths = [len(d) for d in self.docs]
        if sum(lengths) == 0:
            raise InputError("the corpus is empty: it has no tokens")
        plan, self.sampling = plan_samples(lengths, self.width, cfg.samples, cfg.seed)
        # Sorted by window length so that batches need little padding and all
        # windows of a batch usually share one length (one vectorised group);
        # within a length, in a seeded random order, so that any prefix of the
        # run (an interrupted or partial run) is a random sample of the corpus.
        rank = np.random.default_rng([cfg.seed, 1]).permutation(len(plan))
        self.plan = [plan[i] for i in sorted(range(len(plan)), key=lambda i: (min(lengths[plan[i][0]] - plan[i][1], self.width), rank[i]))]
        self.batches = [self.plan[i : i + cfg.batch_size] for i in range(0, len(self.plan), cfg.batch_size)]
        self.corpus = {
            "description": cfg.corpus_name or ", ".join(cfg.corpus),
            "paths": list(cfg.corpus),
            "documents": len(docs),
            "tokens": int(sum(lengths)),
            "characters": int(sum(len(d.text) for d in docs)),
            "fingerprint": corpus_fingerprint(docs),
            "marker_lines": "lines '==========' removed",
        }
        self.acc = StudyAccumulator(
            self.info.num_layers,
            self.info.num_heads,
            cfg.seq_len,
            int(tok.vocab_size),
            top_fraction=cfg.top_fraction,
            attention_threshold=cfg.attention_threshold,
            null_permutations=cfg.null_permutations,
            seed=cfg.seed,
        )

    # -- checkpoints -------------------------------------------------------
    def _meta(self) -> dict:
        return {
            "schema": REPORT_SCHEMA,
            "model_fingerprint": self.info.fingerprint,
            "model_name": self.info.name,
            "corpus_fingerprint": self.corpus["fingerprint"],
            "parameters": self.cfg.parameters(),
            "batches_total": len(self.batches),
        }

    def _check_existing_profile(self) -> None:
        hp = self.out / "heads.json"
        if self.cfg.resume and not self.cfg.force and hp.is_file():
            unreadable = "{path}: cannot read the existing head profile; use --force to overwrite"
            fp = read_json_object(hp, ProfileError, unreadable=unreadable, not_object=unreadable).get("model_fingerprint")
            if fp != self.info.fingerprint:
                raise ProfileError(
                    f"{hp} is a profile for another model ({fp}), not {self.info.name} ({self.info.fingerprint}); "
                    "use another --out or --force"
                )

    def save_checkpoint(self, batches_done: int) -> None:
        """Write the accumulator and run metadata to ``DIR/checkpoint.npz``, atomically."""
        meta = dict(self._meta(), batches_done=batches_done)
        atomic_save_npz(self.out / CHECKPOINT, meta=np.asarray(json.dumps(meta, sort_keys=True)), **self.acc.state())

    def load_checkpoint(self) -> int:
        """Load ``DIR/checkpoint.npz`` into the accumulator; returns the batches it holds.

        Refused when unreadable, or made for another model, corpus or parameters.
        """
        path = self.out / CHECKPOINT
        try:
            with np.load(path, allow_pickle=False) as f:
                meta = json.loads(str(f["meta"]))
                state = {k: f[k] for k in f.files if k != "meta"}
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise InputError(f"{path}: not a readable study checkpoint ({type(exc).__name__}: {exc}); "
                             "use --force to start over") from None
        if not isinstance(meta, dict) or not isinstance(meta.get("batches_done"), int):
            raise InputError(f"{path}: not a readable study checkpoint (bad metadata); use --force to start over")
        mine = self._meta()
        if meta.get("model_fingerprint") != mine["model_fingerprint"]:
            raise ProfileError(
                f"{path} was made for model {meta.get('model_name')} ({meta.get('model_fingerprint')}), "
                f"not {self.info.name} ({self.info.fingerprint}); use another --out or --force"
            )
        for key, label in (("corpus_fingerprint", "a different corpus"), ("parameters", "other parameters"),
                           ("schema", "a different schema")):
            if meta.get(key) != mine[key]:
                raise InputError(
                    f"{path} was made with {label} ({_difference(meta.get(key), mine[key])}); "
                    "use the same settings to resume, or --force to start over"
                )
        try:
            self.acc.load_state(state)
        except HeadsegError as exc:
            raise InputError(f"{path}: {exc}; use --force to start over") from None
        return int(meta["batches_done"])

    # -- the loop ------------------------------------------------------------
    def _process(self, backend, batch: list[tuple[int, int]], first_index: int) -> None:
        tok = self.loaded.tokenizer
        windows = [build_window(self.docs[d], s, self.width, tok, self.cfg.seq_len) for d, s in batch]
        acts = backend.capture(windows, heads=None, attention=True, norms=True)
        t = acts.attention_mask.shape[1]
        cats = np.full((len(windows), t), -1, dtype=np.int64)
        for b, w in enumerate(windows):
            cats[b, : len(w)] = token_category_index(w.tokens, w.special)
        self.acc.add_attention(acts.attn, acts.fnorm, cats, acts.attention_mask)
        groups: dict[tuple, list[int]] = {}
        for b, w in enumerate(windows):
            groups.setdefault((len(w), w.special.tobytes()), []).append(b)
        for (length, _), members in groups.items():
            w0 = windows[members[0]]
            content = w0.content
            # Batches are sorted by length, so a group is usually a run of the
            # batch: slicing (views) instead of gathering spares copying the
            # attention, the largest array of the study.
            rows = slice(members[0], members[-1] + 1) if members[-1] - members[0] + 1 == len(members) else members
            if content.size and np.all(np.diff(content) == 1):
                sl = slice(int(content[0]), int(content[-1]) + 1)
                z = acts.z[rows][:, :, sl]
                attn = acts.attn[rows][:, :, sl, sl]
            else:
                z = acts.z[rows][:, :, content]
                attn = acts.attn[rows][:, :, content][:, :, :, content]
            ids = np.stack([windows[b].input_ids[content] for b in members])
            sent = np.stack([windows[b].sentence_ids[content] for b in members])
            self.acc.add_pairs(z, attn, ids, sent, np.asarray(members) + first_index, window_len=length)

    def accumulate_shard(self, lo: int, hi: int, backend=None) -> StudyAccumulator:
        """A fresh accumulator over batches ``[lo, hi)``: one shard of a distributed study.

        Samples keep their global indices (they seed the permutation null), so
        the shards of a run merged with :meth:`StudyAccumulator.merge` give the
        accumulator of the whole run.
        """
        if not 0 <= lo <= hi <= len(self.batches):
            raise HeadsegError(f"shard [{lo}, {hi}) is outside the {len(self.batches)} batches")
        keep = self.acc
        self.acc = StudyAccumulator(**keep.settings())
        try:
            backend = backend or TorchBackend(self.loaded, device=self.cfg.device)
            for bi in range(lo, hi):
                self._process(backend, self.batches[bi], bi * self.cfg.batch_size)
                self.acc.arrays["batches"] += 1
            return self.acc
        finally:
            self.acc = keep

    def report_from_checkpoint(self) -> dict:
        """Write the outputs from ``DIR/checkpoint.npz`` as it stands (an interim report of a running study)."""
        if not (self.out / CHECKPOINT).is_file():
            raise InputError(f"--report-only: no {CHECKPOINT} in {self.out}")
        done = self.load_checkpoint()
        from .report import write_outputs

        report = write_outputs(self, figures=self.cfg.figures)
        report["batches_done"] = done
        return report

    def run(self, stop_after_batches: int | None = None) -> dict | None:
        """Run (or resume) the study; returns the report, or None if stopped early on purpose.

        ``stop_after_batches`` simulates an interruption: the run checkpoints and
        stops after that many batches in total (for tests and demonstrations).
        """
        cfg = self.cfg
        self.out.mkdir(parents=True, exist_ok=True)
        ck = self.out / CHECKPOINT
        start = 0
        if cfg.force and ck.exists():
            ck.unlink()
        elif cfg.resume and ck.exists():
            start = self.load_checkpoint()
        backend = TorchBackend(self.loaded, device=cfg.device)
        t0 = time.monotonic()
        c0 = time.process_time()
        done = start
        with progress_bar(total=len(self.batches), desc="study", disable=cfg.quiet, unit="batch") as prog:
            prog.update(start)
            for bi in range(start, len(self.batches)):
                self._process(backend, self.batches[bi], bi * cfg.batch_size)
                self.acc.arrays["batches"] += 1
                done = bi + 1
                prog.update(1)
                if stop_after_batches is not None and done >= stop_after_batches and done < len(self.batches):
                    self.save_checkpoint(done)
                    return None
                if done % cfg.checkpoint_every == 0:
                    self.save_checkpoint(done)
        return self.finish(start, done, time.monotonic() - t0, backend.device,
                           cpu_seconds_this_session=round(time.process_time() - c0, 2))

    def finish(self, start: int, done: int, elapsed: float, device: str, **run_info) -> dict:
        """Checkpoint, write the report, figures, heads.json and run.json; returns the report."""
        cfg = self.cfg
        self.out.mkdir(parents=True, exist_ok=True)
        self.save_checkpoint(done)
        from .report import write_outputs

        report = write_outputs(self, figures=cfg.figures)
        processed = sum(len(b) for b in self.batches[start:done])
        atomic_write_json(
            self.out / "run.json",
            {
                "command": cfg.command,
                "wall_seconds_this_session": round(elapsed, 2),
                "batches_this_session": done - start,
                "samples_this_session": int(processed),
                "samples_per_second": round(processed / elapsed, 3) if elapsed > 0 else None,
                "resumed_from_batch": start,
                "peak_rss_mb": round(_peak_rss_mb(), 1),
                "device": device,
                "torch_threads": _torch_threads(),
                "cpu_count": os.cpu_count(),
                "load_average_end": list(os.getloadavg()),
                **run_info,
            },
        )
        return report


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def run_study(cfg: StudyConfig, loaded, stop_after_batches: int | None = None,
              docs: list[CorpusDocument] | None = None) -> dict | None:
    """Run the study of ``cfg`` with ``loaded`` (see :meth:`Study.run`); the report, or None when stopped early.

    ``docs``: the corpus already read (None: read from ``cfg.corpus``)."""
    return Study(cfg, loaded, docs).run(stop_after_batches=stop_after_batches)


def _difference(old, new) -> str:
    """``old`` against ``new`` in a message: only the entries that differ when both are mappings."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = [k for k in sorted(set(old) | set(new), key=str) if old.get(k) != new.get(k)]
        return ", ".join(f"{k} {old.get(k)!r} then, {new.get(k)!r} now" for k in keys)
    return f"{old} then, {new} now"
