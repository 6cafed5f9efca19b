"""Report, verdicts, figures and head selection of ``headseg study``.

``report.json`` schema (version 1), all per-head lists in layer-major order
(index ``layer * num_heads + head``):

* ``schema``, ``model`` (ModelInfo fields), ``corpus`` (description, paths,
  documents, tokens, characters, fingerprint), ``parameters``, ``sampling``
  (requested, drawn, passes, offsets, exhausted), ``windows``;
* ``baseline``: statistics of *all* content-token pairs (pairs, mean_distance,
  short_share, same_sentence_share, identical_share);
* ``variants.quantile`` / ``variants.attention``: per head ``count`` (high
  elements), ``mean_distance``, ``short_share``, ``within_sentence``,
  ``within_chance``, ``within_lift``, ``identical``, ``identical_chance``,
  ``identical_lift``, ``identical_mean_distance``; ``layers`` (pooled per layer:
  mean_distance, short_share, within_sentence, within_chance); ``attention``
  variant also ``overlap`` = its count / the quantile count;
* ``attention``: ``categories``, ``share_weight`` / ``share_norm`` [N][K],
  ``separator_weight`` / ``separator_norm`` [N], ``fnorm_mean`` [N][K],
  ``token_counts`` [K];
* ``focus``: per head ``top_token`` (string), ``top_token_id``,
  ``top_token_share``; per layer ``unique_observed``, ``unique_null``,
  ``null_at_least_observed``;
* ``histograms``: ``all_pairs`` [D], ``high`` {variant: [N][D]};
* ``selection``: ``score`` [N], ``within_component``, ``separator_component``,
  ``selected`` [{layer, head, score, weight}];
* ``claims``: [{claim, paper, this_run, verdict}].
"""

from __future__ import annotations

import math

import numpy as np

from ..writing import atomic_write_bytes, atomic_write_json, atomic_write_text
from ..profile import HeadProfile
from .stats import VARIANTS, summarise


def layer_groups(num_layers: int) -> list[list[int]]:
    """Initial / middle / final thirds of the layers (``numpy.array_split``)."""
    return [list(map(int, g)) for g in np.array_split(np.arange(num_layers), 3)]


def select_heads(within: np.ndarray, chance: np.ndarray, separator: np.ndarray,
                 min_heads: int, max_heads: int) -> dict:
    """The head-selection score and the selected heads.

    ``score = sqrt(w · s)`` with ``w = excess / max(excess)``, ``excess =
    max(0, within_sentence - within_chance)`` and ``s = separator / max(separator)``
    (norm-based separator share): a head must both keep its high-similarity
    pairs inside sentences beyond what its distance profile explains *and*
    route its output through separators.  Heads with ``score >= 0.5 · max`` are
    selected, at least ``min_heads`` and at most ``max_heads`` (by score, ties
    to the lower head index); weights are proportional to score and sum to 1.
    """
    within = np.asarray(within, np.float64)
    excess = np.maximum(within - np.asarray(chance, np.float64), 0.0)
    sep = np.asarray(separator, np.float64)
    wn = excess / excess.max() if excess.max() > 0 else np.zeros_like(excess)
    sn = sep / sep.max() if sep.max() > 0 else np.zeros_like(sep)
    score = np.sqrt(wn * sn)
    n = score.shape[0]
    order = sorted(range(n), key=lambda i: (-score[i], i))
    top = score.max() if n else 0.0
    chosen = [i for i in order if top > 0 and score[i] >= 0.5 * top]
    lo, hi = min(min_heads, n), min(max_heads, n)
    if len(chosen) < lo:
        chosen = order[:lo]
    chosen = chosen[:hi]
    sel_scores = score[chosen]
    weights = sel_scores / sel_scores.sum() if sel_scores.sum() > 0 else np.full(len(chosen), 1.0 / len(chosen))
    return {"score": score, "within_component": wn, "separator_component": sn, "excess": excess,
            "chosen": chosen, "weights": weights}


def _fmt(x: float, pct: bool = False) -> str:
    return f"{100 * x:.1f}%" if pct else f"{x:.3g}"


def evaluate_claims(rep: dict, num_layers: int, num_heads: int) -> list[dict]:
    """The paper's claims with this run's numbers and a verdict (rules in docs/study.md)."""
    init, mid, fin = layer_groups(num_layers)
    q = rep["variants"]["quantile"]
    base = rep["baseline"]
    lay = q["layers"]
    ratio = np.asarray(lay["mean_distance"]) / max(base["mean_distance"], 1e-12)
    lift = np.asarray(lay["within_sentence"]) / np.maximum(np.asarray(lay["within_chance"]), 1e-12)
    g = lambda arr, grp: float(np.mean(np.asarray(arr)[grp])) if grp else float("nan")
    claims = []

    a_ok = g(ratio, init) > g(ratio, mid)
    b_ok = g(ratio, mid) < 1.0
    c_ok = g(lift, fin) >= max(g(lift, init), g(lift, mid))
    n_ok = a_ok + b_ok + c_ok
    claims.append({
        "claim": "Layer evolution: long-range in initial layers, short-range in middle, sentence-bounded in final",
        "paper": "high-similarity pairs long-range early, short-range in the middle, within sentences at the end",
        "this_run": (f"mean distance / all-pairs mean: initial {g(ratio, init):.2f}, middle {g(ratio, mid):.2f}, "
                     f"final {g(ratio, fin):.2f}; within-sentence lift over chance: initial {g(lift, init):.2f}, "
                     f"middle {g(lift, mid):.2f}, final {g(lift, fin):.2f}"),
        "checks": {"initial_longer_than_middle": bool(a_ok), "middle_shorter_than_chance": bool(b_ok),
                   "final_most_sentence_bounded": bool(c_ok)},
        "verdict": "reproduced" if n_ok == 3 else ("partly" if n_ok else "not reproduced"),
    })

    att = rep["attention"]
    sw = np.asarray(att["separator_weight"]).reshape(num_layers, num_heads).mean(1)
    sn = np.asarray(att["separator_norm"]).reshape(num_layers, num_heads).mean(1)
    others = init + mid
    w_ok = g(sw, fin) > g(sw, others)
    n_ok2 = g(sn, fin) > g(sn, others)
    claims.append({
        "claim": "Separator focus in final layers",
        "paper": "heads of the final layers concentrate on separators ([SEP], '.', ',')",
        "this_run": (f"separator share by weight: final {_fmt(g(sw, fin), True)} vs earlier {_fmt(g(sw, others), True)}; "
                     f"by norm: final {_fmt(g(sn, fin), True)} vs earlier {_fmt(g(sn, others), True)}"),
        "verdict": "reproduced" if (w_ok and n_ok2) else ("partly" if (w_ok or n_ok2) else "not reproduced"),
    })

    within = np.asarray(q["within_sentence"])
    wl = np.asarray(q["within_lift"])
    above = int((within > 0.33).sum())
    above_lift = int(((within > 0.33) & (wl > 1.0)).sum())
    best = int(np.argmax(within))
    claims.append({
        "claim": "Within-sentence preference above 33%",
        "paper": "some heads have more than 33% of high-similarity pairs inside one sentence",
        "this_run": (f"{above} of {within.size} heads above 33% ({above_lift} of them above chance); best "
                     f"L{best // num_heads}H{best % num_heads} {_fmt(within[best], True)} vs chance "
                     f"{_fmt(q['within_chance'][best], True)}; all pairs: {_fmt(base['same_sentence_share'], True)}"),
        "verdict": "reproduced" if above_lift else ("partly" if above else "not reproduced"),
    })

    il = np.asarray(q["identical_lift"])
    imd = np.asarray(q["identical_mean_distance"])
    rb = int(np.argmax(il))
    rep_heads = np.flatnonzero(il >= 2.0)
    long_range = [int(i) for i in rep_heads if imd[i] >= 0.8 * base["mean_distance"]]
    claims.append({
        "claim": "Repetition heads (identical tokens across the text)",
        "paper": "a head (BERT-12 L11H8) pairs identical tokens across the whole text",
        "this_run": (f"{rep_heads.size} heads with identical-token lift >= 2, {len(long_range)} of them long-range; "
                     f"strongest L{rb // num_heads}H{rb % num_heads}: {_fmt(q['identical'][rb], True)} identical "
                     f"vs chance {_fmt(q['identical_chance'][rb], True)} (lift {il[rb]:.1f}), mean distance of its "
                     f"identical pairs {imd[rb]:.1f} vs all pairs {base['mean_distance']:.1f}"),
        "verdict": "reproduced" if long_range else ("partly" if rep_heads.size else "not reproduced"),
    })

    f = rep["focus"]
    uo, un = np.asarray(f["unique_observed"]), np.asarray(f["unique_null"])
    n_more = int((uo > un).sum())
    claims.append({
        "claim": "Token-centred focus: heads of a layer focus on different tokens",
        "paper": "each head's high-similarity elements centre on a token, unique across the heads of a layer",
        "this_run": ("distinct focus tokens per layer (share of heads), observed vs permutation null: "
                     + ", ".join(f"L{l} {uo[l]:.2f}/{un[l]:.2f}" for l in range(num_layers))),
        "verdict": "reproduced" if n_more == num_layers else ("partly" if n_more else "not reproduced"),
    })

    # Kobayashi et al.: the tokens that soak up attention weight ([CLS], [SEP],
    # punctuation) have small ‖f(x)‖, so their norm-based share is smaller.
    cats = list(att["categories"])
    sink = [cats.index(c) for c in ("cls", "sep", "sentence_punct", "clause_punct", "other_punct")]
    kw = np.asarray(att["share_weight"])[:, sink].sum(-1)
    kn = np.asarray(att["share_norm"])[:, sink].sum(-1)
    frac = float((kn < kw).mean())
    hw = np.asarray(att["separator_weight"])
    hn = np.asarray(att["separator_norm"])
    claims.append({
        "claim": "Norms vs weights (Kobayashi et al.)",
        "paper": "weights overstate attention to [CLS], [SEP] and punctuation; norm-based shares are smaller",
        "this_run": (f"share of [CLS]+[SEP]+punctuation smaller by norm than by weight in {frac:.0%} of heads "
                     f"(mean weight {_fmt(kw.mean(), True)} vs norm {_fmt(kn.mean(), True)}); separators alone: "
                     f"weight {_fmt(hw.mean(), True)} vs norm {_fmt(hn.mean(), True)}"),
        "verdict": "reproduced" if frac >= 0.75 else ("partly" if frac >= 0.5 else "not reproduced"),
    })
    return claims


def build_report(study) -> tuple[dict, dict]:
    """``(report, selection)`` from a finished :class:`~headseg.analysis.study.Study`."""
    cfg, info, acc = study.cfg, study.info, study.acc
    L, H = info.num_layers, info.num_heads
    rep = summarise(acc, cfg.short_range)
    tok = study.loaded.tokenizer
    rep["focus"]["top_token"] = tok.convert_ids_to_tokens([int(i) for i in rep["focus"]["top_token_id"]])
    sel = select_heads(rep["variants"]["quantile"]["within_sentence"], rep["variants"]["quantile"]["within_chance"],
                       rep["attention"]["separator_norm"], cfg.min_heads, cfg.max_heads)
    report = {
        "schema": 1,
        "model": info.to_dict(),
        "corpus": study.corpus,
        "parameters": cfg.parameters(),
        "sampling": study.sampling,
        "windows": int(acc["windows"]),
        **rep,
        "histograms": {
            "all_pairs": acc["pairs_all"].tolist(),
            "high": {v: acc["high_all"][i].tolist() for i, v in enumerate(VARIANTS)},
        },
        "selection": {
            "rule": "score = sqrt(w*s); w = max(0, within - chance)/max, s = separator_norm/max; "
                    "selected: score >= 0.5*max, clipped to [min_heads, max_heads]; weights ∝ score",
            "score": sel["score"].tolist(),
            "within_component": sel["within_component"].tolist(),
            "separator_component": sel["separator_component"].tolist(),
            "selected": [{"layer": i // H, "head": i % H, "score": float(sel["score"][i]), "weight": float(w)}
                         for i, w in zip(sel["chosen"], sel["weights"])],
        },
    }
    report["claims"] = evaluate_claims(report, L, H)
    return report, sel


def make_profile(study, report: dict, sel: dict) -> HeadProfile:
    """The head profile (``heads.json``) of a finished study: the selected heads ``sel`` with their weights,
    scores and the report's statistics for each.
    """
    info, H = study.info, study.info.num_heads
    q = report["variants"]["quantile"]
    att = report["attention"]
    stats = {}
    for i in sel["chosen"]:
        stats[f"L{i // H}H{i % H}"] = {
            "within_sentence": q["within_sentence"][i],
            "within_chance": q["within_chance"][i],
            "mean_distance": q["mean_distance"][i],
            "separator_norm": att["separator_norm"][i],
            "separator_weight": att["separator_weight"][i],
            "identical_lift": q["identical_lift"][i],
            "focus_token": report["focus"]["top_token"][i],
        }
    return HeadProfile(
        model_fingerprint=info.fingerprint,
        heads=[(i // H, i % H) for i in sel["chosen"]],
        weights=[float(w) for w in sel["weights"]],
        scores=[float(sel["score"][i]) for i in sel["chosen"]],
        model_name=info.name,
        num_layers=info.num_layers,
        num_heads=info.num_heads,
        corpus=study.corpus["description"],
        parameters=dict(study.cfg.parameters(), corpus_fingerprint=study.corpus["fingerprint"],
                        windows=int(study.acc["windows"]), rule=report["selection"]["rule"]),
        statistics={"baseline": report["baseline"], "heads": stats},
    )


def render_markdown(report: dict, figures: list[str]) -> str:
    """``report.md``: the report in words and tables, linking the ``figures`` written beside it."""
    m = report["model"]
    L, H = m["num_layers"], m["num_heads"]
    q = report["variants"]["quantile"]
    qa = report["variants"]["attention"]
    att = report["attention"]
    base = report["baseline"]
    lines = [
        f"# Similarity-matrix study: {m['name']}",
        "",
        f"Model `{m['name']}` ({m['fingerprint']}), {L} layers x {H} heads. Corpus: {report['corpus']['description']} "
        f"({report['corpus']['documents']} documents, {report['corpus']['tokens']:,} tokens, fingerprint "
        f"{report['corpus']['fingerprint']}). {report['windows']:,} windows of up to {report['parameters']['seq_len']} "
        f"tokens ({report['sampling']['passes']} sampling pass(es)).",
        "",
        f"High-similarity elements: top {report['parameters']['top_fraction']:.0%} of content-token pairs per matrix "
        f"(quantile); attention variant: of those, pairs with symmetrised attention >= "
        f"{report['parameters']['attention_threshold']} x uniform. All pairs: mean distance {base['mean_distance']:.1f}, "
        f"same sentence {base['same_sentence_share']:.1%}, identical tokens {base['identical_share']:.2%}.",
        "",
        "## Verdicts",
        "",
        "| claim | this run | verdict |",
        "|---|---|---|",
    ]
    for c in report["claims"]:
        lines.append(f"| {c['claim']} | {c['this_run']} | **{c['verdict']}** |")
    lines += ["", "## Per layer (quantile variant; attention variant in brackets)", "",
              "| layer | mean distance | short-range share | within sentence | chance | sep. share weight | sep. share norm | unique focus obs / null |",
              "|---|---|---|---|---|---|---|---|"]
    sw = np.asarray(att["separator_weight"]).reshape(L, H).mean(1)
    sn = np.asarray(att["separator_norm"]).reshape(L, H).mean(1)
    for l in range(L):
        lq, la = q["layers"], qa["layers"]
        lines.append(
            f"| {l} | {lq['mean_distance'][l]:.1f} [{la['mean_distance'][l]:.1f}] | {lq['short_share'][l]:.1%} "
            f"[{la['short_share'][l]:.1%}] | {lq['within_sentence'][l]:.1%} [{la['within_sentence'][l]:.1%}] | "
            f"{lq['within_chance'][l]:.1%} | {sw[l]:.1%} | {sn[l]:.1%} | "
            f"{report['focus']['unique_observed'][l]:.2f} / {report['focus']['unique_null'][l]:.2f} |")
    lines += ["", "## Selected heads", "", report["selection"]["rule"], "",
              "| head | score | weight | within sentence | chance | separator (norm) | focus token |",
              "|---|---|---|---|---|---|---|"]
    for s in report["selection"]["selected"]:
        i = s["layer"] * H + s["head"]
        lines.append(f"| L{s['layer']}H{s['head']} | {s['score']:.3f} | {s['weight']:.3f} | {q['within_sentence'][i]:.1%} | "
                     f"{q['within_chance'][i]:.1%} | {att['separator_norm'][i]:.1%} | `{report['focus']['top_token'][i]}` |")
    lines += ["", "## All heads (quantile variant)", "",
              "| head | mean dist | within | lift | identical lift | sep. weight | sep. norm | attn-variant overlap | focus token (share) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for i in range(L * H):
        lines.append(
            f"| L{i // H}H{i % H} | {q['mean_distance'][i]:.1f} | {q['within_sentence'][i]:.1%} | {q['within_lift'][i]:.2f} | "
            f"{q['identical_lift'][i]:.2f} | {att['separator_weight'][i]:.1%} | {att['separator_norm'][i]:.1%} | "
            f"{qa['overlap'][i]:.1%} | `{report['focus']['top_token'][i]}` ({report['focus']['top_token_share'][i]:.0%}) |")
    if figures:
        lines += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
    return "\n".join(lines) + "\n"


def make_figures(report: dict, out) -> list[str]:
    """Write the PNG figures into ``out``; returns their file names.  Each is drawn on a ``Figure`` of its
    own, without pyplot, so the host's matplotlib backend and open figures stay as they are."""
    import io

    from matplotlib.figure import Figure

    def subplots(*grid, **kw):
        fig = Figure(figsize=kw.pop("figsize"))
        return fig, fig.subplots(*grid, **kw)

    m = report["model"]
    L, H = m["num_layers"], m["num_heads"]
    q = report["variants"]["quantile"]
    base = report["baseline"]
    names = []

    def save(fig, name):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=72)
        atomic_write_bytes(out / name, buf.getvalue())
        names.append(name)

    def heat(ax, values, title, fmt="{:.2f}"):
        arr = np.asarray(values, dtype=float).reshape(L, H)
        im = ax.imshow(arr, aspect="auto", cmap="viridis")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(H))
        ax.set_yticks(range(L))
        ax.figure.colorbar(im, ax=ax, fraction=0.046)
        return arr

    fig, axes = subplots(1, 3, figsize=(15, 3.6), gridspec_kw={"wspace": 0.35})
    fig.subplots_adjust(bottom=0.17, left=0.05, right=0.97)
    heat(axes[0], np.asarray(q["mean_distance"]) / max(base["mean_distance"], 1e-12),
         "mean distance of high elements / all pairs (quantile)")
    heat(axes[1], np.asarray(report["variants"]["attention"]["mean_distance"]) / max(base["mean_distance"], 1e-12),
         "same, attention variant")
    hall = np.asarray(report["histograms"]["all_pairs"], float)
    hq = np.asarray(report["histograms"]["high"]["quantile"], float).reshape(L, H, -1).sum(1)
    d = np.arange(hall.shape[0])
    axes[2].plot(d, hall / max(hall.sum(), 1), "k--", label="all pairs")
    for l in range(L):
        axes[2].plot(d, hq[l] / max(hq[l].sum(), 1), label=f"layer {l}")
    axes[2].set_yscale("log")
    axes[2].set_xlabel("|i - j|")
    axes[2].set_title("distance distribution of high elements", fontsize=9)
    axes[2].legend(fontsize=7)
    save(fig, "fig_distance.png")

    fig, axes = subplots(1, 3, figsize=(15, 3.6), gridspec_kw={"wspace": 0.35})
    fig.subplots_adjust(bottom=0.17, left=0.05, right=0.97)
    heat(axes[0], q["within_sentence"], "within-sentence share (quantile)")
    heat(axes[1], q["within_lift"], "within-sentence lift over chance")
    heat(axes[2], q["identical_lift"], "identical-token lift over chance")
    save(fig, "fig_sentence_repetition.png")

    att = report["attention"]
    fig, axes = subplots(1, 3, figsize=(15, 3.6), gridspec_kw={"wspace": 0.35})
    fig.subplots_adjust(bottom=0.17, left=0.05, right=0.97)
    heat(axes[0], att["separator_weight"], "separator share, weight-based")
    heat(axes[1], att["separator_norm"], "separator share, norm-based")
    f = report["focus"]
    axes[2].plot(range(L), f["unique_observed"], "o-", label="observed")
    axes[2].plot(range(L), f["unique_null"], "s--", label="permutation null")
    axes[2].set_xlabel("layer")
    axes[2].set_title("distinct focus tokens / heads per layer", fontsize=9)
    axes[2].legend(fontsize=7)
    save(fig, "fig_separator_focus.png")

    fig, ax = subplots(figsize=(6, 3.6))
    fig.subplots_adjust(bottom=0.15)
    heat(ax, report["selection"]["score"], "head-selection score (x = selected)")
    for s in report["selection"]["selected"]:
        ax.text(s["head"], s["layer"], "x", ha="center", va="center", color="red", fontsize=10)
    save(fig, "fig_selection.png")
    return names


def write_outputs(study, figures: bool = True) -> dict:
    """Write report.json, report.md, figures and heads.json into the study's out dir."""
    out = study.out
    report, sel = build_report(study)
    names = make_figures(report, out) if figures else []
    atomic_write_json(out / "report.json", _clean(report))
    atomic_write_text(out / "report.md", render_markdown(report, names))
    make_profile(study, report, sel).save(out / "heads.json")
    return report


def _clean(obj):
    """JSON-safe copy: NaN/inf become None, numpy scalars become Python numbers."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj
