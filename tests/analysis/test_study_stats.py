"""The study's statistics on hand-built matrices with known answers, and against brute force."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from headseg.analysis.errors import HeadsegError
from headseg.analysis.study.report import evaluate_claims, layer_groups, select_heads
from headseg.analysis.study.stats import (
    CATEGORIES,
    StudyAccumulator,
    conditional_chance,
    distance_summary,
    distinct_count,
    focus_tokens,
    summarise,
    token_category_index,
    top_k_count,
)


def acc_for(L, H, seq_len=16, vocab=50, **kw):
    return StudyAccumulator(L, H, seq_len, vocab, **kw)


def dominant_pair_z(c, pairs, d=4, seed=0):
    """Context vectors ``[N, C, d]`` where head n's largest dot product is exactly ``pairs[n]``."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=0.01, size=(len(pairs), c, d)).astype(np.float32)
    for n, (i, j) in enumerate(pairs):
        z[n, i, 0] = z[n, j, 0] = 10.0
    return z


def test_top_k_count():
    assert top_k_count(10, 0.1) == 1
    assert top_k_count(10, 0.05) == 1  # at least one element
    assert top_k_count(7875, 0.05) == 394  # ceil(393.75)
    assert top_k_count(100, 0.2) == 20  # no float round-up to 21


def test_hand_built_pairs_distance_sentence_identity_and_attention():
    # 1 layer x 2 heads, 5 content tokens, top 10% of 10 pairs = 1 element per matrix.
    c = 5
    pairs = [(0, 1), (2, 4)]
    z = dominant_pair_z(c, pairs)[None]  # [1, 2, 5, 4]
    ids = np.array([[5, 6, 7, 5, 7]])
    sent = np.array([[0, 0, 1, 1, 1]])
    attn = np.full((1, 2, c, c), 0.1, np.float32)  # below uniform 1/7 everywhere ...
    attn[0, 0, 0, 1] = attn[0, 0, 1, 0] = 0.5  # ... except head 0's pair
    acc = acc_for(1, 2, seq_len=8, top_fraction=0.1)
    acc.add_pairs(z, attn, ids, sent, np.array([0]), window_len=c + 2)
    a = acc.arrays
    # All pairs by distance: 4 at d=1, 3 at d=2, 2 at d=3, 1 at d=4.
    assert a["pairs_all"].tolist() == [0, 4, 3, 2, 1, 0, 0, 0]
    # Same sentence: (0,1) d1, (2,3) d1, (3,4) d1, (2,4) d2.
    assert a["pairs_same"].tolist() == [0, 3, 1, 0, 0, 0, 0, 0]
    # Identical ids: (0,3) d3, (2,4) d2.
    assert a["pairs_ident"].tolist() == [0, 0, 1, 1, 0, 0, 0, 0]
    q, att = 0, 1
    assert a["high_all"][q, 0].tolist() == [0, 1, 0, 0, 0, 0, 0, 0]
    assert a["high_all"][q, 1].tolist() == [0, 0, 1, 0, 0, 0, 0, 0]
    assert a["high_same"][q, :, :].sum(-1).tolist() == [1, 1]
    assert a["high_ident"][q].sum(-1).tolist() == [0, 1]
    # Attention variant keeps head 0's element only (0.5 >= 1/7; 0.1 < 1/7).
    assert a["high_all"][att].sum(-1).tolist() == [1, 0]
    # Focus: head 0 pairs tokens 5 and 6 (tie -> smaller id 5), head 1 pairs 7 with 7.
    assert a["focus_counts"][0, 5] == 1 and a["focus_counts"][1, 7] == 1
    assert a["unique_obs"].tolist() == [1.0]  # two heads, two different focus tokens
    assert int(a["windows"]) == 1


def brute_force(z, attn, ids, sent, frac, thr, window_len, seq_len):
    """Independent recomputation with plain loops over pairs."""
    g, n, c, _ = z.shape
    out = {k: np.zeros((2, n, seq_len), np.int64) for k in ("all", "same", "ident")}
    pairs_all = np.zeros(seq_len, np.int64)
    focus = []
    pairs = [(i, j) for i in range(c) for j in range(i + 1, c)]
    k = math.ceil(frac * len(pairs))
    for b in range(g):
        for i, j in pairs:
            pairs_all[j - i] += 1
        tops = []
        for h in range(n):
            s = z[b, h].astype(np.float64) @ z[b, h].astype(np.float64).T
            ranked = sorted(pairs, key=lambda p: -s[p])[:k]
            cnt = Counter()
            for i, j in ranked:
                in_att = (attn[b, h, i, j] + attn[b, h, j, i]) / 2 * window_len >= thr
                for v, keep in ((0, True), (1, in_att)):
                    if keep:
                        out["all"][v, h, j - i] += 1
                        out["same"][v, h, j - i] += sent[b, i] == sent[b, j]
                        out["ident"][v, h, j - i] += ids[b, i] == ids[b, j]
                cnt[ids[b, i]] += 1
                cnt[ids[b, j]] += 1
            best = max(cnt.values())
            tops.append(min(t for t, v in cnt.items() if v == best))
        focus.append(tops)
    return out, pairs_all, np.array(focus)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_add_pairs_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    L, H, g, c, d = 2, 3, 3, 11, 6
    n = L * H
    z = rng.normal(size=(g, n, c, d)).astype(np.float32)
    raw = rng.random((g, n, c, c)).astype(np.float32) ** 4
    attn = raw / raw.sum(-1, keepdims=True)
    ids = rng.integers(0, 6, size=(g, c))
    sent = np.sort(rng.integers(0, 3, size=(g, c)), axis=1)
    acc = acc_for(L, H, seq_len=16, vocab=10, top_fraction=0.15, attention_threshold=1.0)
    acc.add_pairs(z, attn, ids, sent, np.arange(g), window_len=c + 2)
    want, pairs_all, focus = brute_force(z, attn, ids, sent, 0.15, 1.0, c + 2, 16)
    a = acc.arrays
    np.testing.assert_array_equal(a["pairs_all"], pairs_all)
    np.testing.assert_array_equal(a["high_all"], want["all"])
    np.testing.assert_array_equal(a["high_same"], want["same"])
    np.testing.assert_array_equal(a["high_ident"], want["ident"])
    expect_counts = np.zeros((n, 10), np.int64)
    for b in range(g):
        for h in range(n):
            expect_counts[h, focus[b, h]] += 1
    np.testing.assert_array_equal(a["focus_counts"], expect_counts)
    obs = np.array([[len(set(focus[b, l * H : (l + 1) * H])) / H for l in range(L)] for b in range(g)]).sum(0)
    np.testing.assert_allclose(a["unique_obs"], obs)
    # Same-sentence and identical pairs over all pairs, by brute force.
    same = np.zeros(16, np.int64)
    ident = np.zeros(16, np.int64)
    for b in range(g):
        for i in range(c):
            for j in range(i + 1, c):
                same[j - i] += sent[b, i] == sent[b, j]
                ident[j - i] += ids[b, i] == ids[b, j]
    np.testing.assert_array_equal(a["pairs_same"], same)
    np.testing.assert_array_equal(a["pairs_ident"], ident)


def test_permutation_null_limits():
    # All content tokens identical: every head's focus token is that token, observed and null alike.
    L, H, c = 1, 4, 8
    rng = np.random.default_rng(3)
    z = rng.normal(size=(1, L * H, c, 4)).astype(np.float32)
    attn = np.full((1, L * H, c, c), 1.0 / c, np.float32)
    acc = acc_for(L, H, vocab=20, top_fraction=0.1)
    acc.add_pairs(z, attn, np.full((1, c), 9), np.zeros((1, c), int), np.array([0]), window_len=c + 2)
    assert acc["unique_obs"].tolist() == [0.25]
    assert acc["unique_null"].tolist() == [0.25]
    assert acc["unique_null_ge"].tolist() == [1]


def test_null_is_seeded_by_sample_index():
    L, H, c = 1, 4, 10
    rng = np.random.default_rng(4)
    z = rng.normal(size=(1, L * H, c, 4)).astype(np.float32)
    attn = np.full((1, L * H, c, c), 1.0 / c, np.float32)
    ids = rng.integers(0, 5, size=(1, c))
    runs = []
    for idx in (7, 7, 8):
        acc = acc_for(L, H, vocab=20, top_fraction=0.2, null_permutations=3)
        acc.add_pairs(z, attn, ids, np.zeros((1, c), int), np.array([idx]), window_len=c + 2)
        runs.append(acc["unique_null"].copy())
    assert runs[0] == runs[1]


def test_focus_tokens_and_distinct_count():
    deg = np.array([[1, 0, 2, 0], [3, 1, 0, 1]], float)
    ids = np.array([4, 2, 9, 2])
    # head 0: 4->1, 2->0, 9->2 => 9; head 1: 4->3, 2->2 => 4
    assert focus_tokens(deg, ids).tolist() == [9, 4]
    # tie between ids 2 and 4 goes to 2
    assert focus_tokens(np.array([1.0, 1.0, 0.0, 0.0]), ids) == 2
    assert distinct_count(np.array([[1, 1, 2], [3, 4, 5]]), axis=1).tolist() == [2, 3]


def test_distance_summary_and_conditional_chance():
    hist = np.array([0, 2, 0, 2])
    ds = distance_summary(hist, short_range=1)
    assert ds["mean_distance"] == pytest.approx(2.0)
    assert ds["short_share"] == pytest.approx(0.5)
    pairs_all = np.array([0, 10, 4, 8])
    same_all = np.array([0, 10, 2, 0])  # p_same = 1, 0.5, 0
    assert conditional_chance(hist, same_all, pairs_all) == pytest.approx(0.5)
    assert conditional_chance(np.array([0, 0, 4, 0]), same_all, pairs_all) == pytest.approx(0.5)
    # no high elements: chance 0, not NaN
    assert conditional_chance(np.zeros(4), same_all, pairs_all) == 0.0


def test_add_attention_weight_and_norm_shares():
    # One window: [CLS] the . [SEP] + one padding position.
    tokens = ["[CLS]", "the", ".", "[SEP]"]
    special = np.array([True, False, False, True])
    cats = np.full((1, 5), -1)
    cats[0, :4] = token_category_index(tokens, special)
    assert [CATEGORIES[i] for i in cats[0, :4]] == ["cls", "frequent", "sentence_punct", "sep"]
    attn = np.zeros((1, 1, 5, 5), np.float32)
    attn[0, 0, :, :4] = [0.1, 0.2, 0.3, 0.4]  # every row the same, nothing on padding
    fnorm = np.array([[[1.0, 2.0, 1.0, 0.5, 99.0]]], np.float32)
    mask = np.array([[True, True, True, True, False]])
    acc = acc_for(1, 1)
    acc.add_attention(attn, fnorm, cats, mask)
    assert int(acc["queries"]) == 4
    k = {c: i for i, c in enumerate(CATEGORIES)}
    w = acc["share_weight"][0] / 4
    assert w[k["cls"]] == pytest.approx(0.1) and w[k["sep"]] == pytest.approx(0.4)
    # norm-based: contributions 0.1, 0.4, 0.3, 0.2 (sum 1.0)
    nrm = acc["share_norm"][0] / 4
    assert nrm[k["frequent"]] == pytest.approx(0.4) and nrm[k["sep"]] == pytest.approx(0.2)
    assert nrm[k["sentence_punct"]] == pytest.approx(0.3)
    assert acc["fnorm_count"].tolist()[k["sep"]] == 1
    assert acc["fnorm_sum"][0, k["frequent"]] == pytest.approx(2.0)
    s = summarise(acc, short_range=4)
    # separators = sep + sentence_punct + clause_punct
    assert s["attention"]["separator_weight"][0] == pytest.approx(0.7)
    assert s["attention"]["separator_norm"][0] == pytest.approx(0.5)


def test_token_categories_punctuation_split():
    toks = ["[CLS]", ",", ";", "(", "word", "##s", "!", "[SEP]"]
    cats = [CATEGORIES[i] for i in token_category_index(toks, np.array([1, 0, 0, 0, 0, 0, 0, 1], bool))]
    assert cats == ["cls", "clause_punct", "clause_punct", "other_punct", "other", "other", "sentence_punct", "sep"]


def test_state_round_trip_is_exact():
    rng = np.random.default_rng(5)
    acc = acc_for(1, 2, vocab=10, top_fraction=0.2)
    z = rng.normal(size=(2, 2, 6, 3)).astype(np.float32)
    attn = np.full((2, 2, 6, 6), 1 / 6, np.float32)
    acc.add_pairs(z, attn, rng.integers(0, 10, (2, 6)), np.zeros((2, 6), int), np.arange(2), window_len=8)
    other = acc_for(1, 2, vocab=10, top_fraction=0.2)
    other.load_state(acc.state())
    for k, v in acc.arrays.items():
        np.testing.assert_array_equal(other[k], v)
        assert other[k].dtype == v.dtype
    with pytest.raises(HeadsegError):
        acc_for(1, 3, vocab=10).load_state(acc.state())


def test_select_heads_rule():
    within = np.array([0.5, 0.4, 0.3, 0.2])
    chance = np.array([0.3, 0.3, 0.3, 0.1])  # excess .2 .1 0 .1
    sep = np.array([0.1, 0.4, 0.9, 0.1])
    sel = select_heads(within, chance, sep, min_heads=1, max_heads=3)
    # score = sqrt(excess/.2 * sep/.9)
    want = np.sqrt(np.array([1, 0.5, 0, 0.5]) * sep / 0.9)
    np.testing.assert_allclose(sel["score"], want)
    assert sel["chosen"] == [1, 0]  # .471 and .333 >= .5 * .471; .236 is not
    assert sel["weights"].sum() == pytest.approx(1.0)
    np.testing.assert_allclose(sel["weights"], want[[1, 0]] / want[[1, 0]].sum())
    # min_heads fills up by rank; all-zero scores give uniform weights
    z = select_heads(np.zeros(4), np.zeros(4), np.zeros(4), min_heads=2, max_heads=3)
    assert z["chosen"] == [0, 1] and z["weights"].tolist() == [0.5, 0.5]


def test_layer_groups():
    assert layer_groups(6) == [[0, 1], [2, 3], [4, 5]]
    assert layer_groups(12)[2] == [8, 9, 10, 11]


def _report(L, H, within, chance, ident_lift, sep_w, sep_n, uo, un, layer_dist, layer_within, layer_chance):
    n = L * H
    return {
        "baseline": {"mean_distance": 40.0, "same_sentence_share": 0.2},
        "variants": {"quantile": {
            "layers": {"mean_distance": layer_dist, "within_sentence": layer_within, "within_chance": layer_chance},
            "within_sentence": within, "within_chance": chance, "within_lift": list(np.array(within) / np.array(chance)),
            "identical": [0.1] * n, "identical_chance": [0.01] * n, "identical_lift": ident_lift,
            "identical_mean_distance": [45.0] * n,
        }},
        "attention": {"separator_weight": sep_w, "separator_norm": sep_n, "categories": list(CATEGORIES),
                      # one sink category column (sep) carrying the separator shares, the rest elsewhere
                      "share_weight": [[0, w, 0, 0, 0, 0, 1 - w] for w in sep_w],
                      "share_norm": [[0, x, 0, 0, 0, 0, 1 - x] for x in sep_n]},
        "focus": {"unique_observed": uo, "unique_null": un},
    }


def test_claim_verdicts_follow_documented_rules():
    L, H = 3, 2
    rep = _report(
        L, H,
        within=[0.2, 0.5, 0.3, 0.3, 0.3, 0.3], chance=[0.2, 0.25, 0.3, 0.3, 0.3, 0.3],
        ident_lift=[1, 1, 5, 1, 1, 1],
        sep_w=[0.1, 0.1, 0.2, 0.2, 0.5, 0.5], sep_n=[0.05, 0.05, 0.1, 0.1, 0.2, 0.2],
        uo=[0.9, 0.9, 0.9], un=[0.5, 0.5, 0.5],
        layer_dist=[45.0, 20.0, 30.0], layer_within=[0.2, 0.3, 0.6], layer_chance=[0.2, 0.3, 0.3],
    )
    verdicts = [c["verdict"] for c in evaluate_claims(rep, L, H)]
    assert verdicts == ["reproduced"] * 6
    rep["focus"]["unique_observed"] = [0.4, 0.9, 0.4]
    rep["variants"]["quantile"]["layers"]["mean_distance"] = [10.0, 20.0, 50.0]
    rep["attention"]["share_norm"] = [[0, x, 0, 0, 0, 0, 1 - x] for x in [0.05, 0.05, 0.1, 0.1, 0.6, 0.6]]
    v = {c["claim"].split(":")[0].split(" (")[0]: c["verdict"] for c in evaluate_claims(rep, L, H)}
    assert v["Token-centred focus"] == "partly"
    assert v["Layer evolution"] == "partly"  # only the final-layer sentence check holds
    assert v["Norms vs weights"] == "partly"  # norm < weight in 4 of 6 heads


def test_merge_of_shards_equals_the_whole_and_refuses_other_settings():
    rng = np.random.default_rng(3)
    g, c = 4, 7
    z = rng.normal(size=(g, 12, c, 4)).astype(np.float32)
    attn = rng.dirichlet(np.ones(c), size=(g, 12, c)).astype(np.float32)
    ids = rng.integers(0, 10, (g, c))
    sent = np.repeat(np.arange(2), [3, 4])[None].repeat(g, 0)
    whole = StudyAccumulator(3, 4, 16, 10, top_fraction=0.2)
    whole.add_pairs(z, attn, ids, sent, np.arange(g), window_len=c + 2)
    parts = [StudyAccumulator(**whole.settings()) for _ in range(2)]
    parts[0].add_pairs(z[:1], attn[:1], ids[:1], sent[:1], np.arange(1), window_len=c + 2)
    parts[1].add_pairs(z[1:], attn[1:], ids[1:], sent[1:], np.arange(1, g), window_len=c + 2)
    merged = StudyAccumulator(**whole.settings()).merge(parts[0]).merge(parts[1])
    for k, v in whole.arrays.items():
        if v.dtype.kind == "f":
            np.testing.assert_allclose(merged[k], v, rtol=1e-12, err_msg=k)
        else:
            np.testing.assert_array_equal(merged[k], v, err_msg=k)
    assert int(merged["windows"]) == g and merged["pairs_all"].sum() == g * c * (c - 1) // 2
    with pytest.raises(HeadsegError, match="different top_fraction"):
        merged.merge(StudyAccumulator(3, 4, 16, 10, top_fraction=0.1))
