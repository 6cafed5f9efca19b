"""max_tokens in any tokenizer: the limit holds for every segment, measured by the counter itself."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headseg.analysis.errors import HeadsegError, ModelError
from headseg.analysis.model import embedded_model_path
from headseg.segmenter import topics
from headseg.segmenter.limits import repair_cuts
from headseg.api import Segmenter
from headseg.segmenter.search import SegmentCost
from headseg.segmenter.tokens import resolve_token_counter

# Words that make subword counts non-additive: a word longer than WordPiece's
# 100-character limit is one [UNK] however long, while its halves are many tokens.
WORDS = st.sampled_from([
    "the", "river", "rose", "quickly.", "Farmers", "moved!", "cattle?", "😀", "中文", "東京タワー", "naïve",
    "e\u0301te\u0301", "\r\n", "\t", "\n\n", "  ", "x" * 150, "antidisestablishmentarianism", "3.5", "—", ",",
    "Dr.", "«quote»",
])
TEXTS = st.lists(WORDS, min_size=0, max_size=40).map(lambda ws: " ".join(ws))
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def words(s: str) -> int:
    return len(s.split())


def words_squared(s: str) -> int:
    """Superadditive on purpose: the search's per-unit sums underestimate every merged span."""
    return len(s.split()) ** 2


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch", window_tokens=64)


@pytest.fixture(scope="module")
def model_count(tokenizer):
    """The embedded model's token count, by transformers (independent of the tokenizers-based counter)."""
    return lambda s: len(tokenizer(s, add_special_tokens=False, verbose=False)["input_ids"])


def _check(text, result, count, max_tokens):
    assert "".join(s.text for s in result) == text
    pos = 0
    for s in result:
        assert s.start == pos and text[s.start:s.end] == s.text
        pos = s.end
        assert count(s.text) <= max_tokens
        assert s.token_count == count(s.text)
    assert pos == len(text)


@SETTINGS
@given(text=TEXTS, max_tokens=st.integers(1, 30), level=st.sampled_from(["topic", "unit"]))
def test_whitespace_counter_limit_holds(seg, text, max_tokens, level):
    _check(text, seg.segment(text, max_tokens=max_tokens, token_counter=words, level=level), words, max_tokens)


@SETTINGS
@given(text=TEXTS, max_tokens=st.integers(1, 30), min_chars=st.none() | st.integers(1, 80))
def test_model_tokenizer_directory_limit_holds(seg, model_count, text, max_tokens, min_chars):
    result = seg.segment(text, max_tokens=max_tokens, min_chars=min_chars,
                         token_counter=str(embedded_model_path()))
    _check(text, result, model_count, max_tokens)


@SETTINGS
@given(text=TEXTS, max_tokens=st.integers(1, 60), max_chars=st.none() | st.integers(20, 200))
def test_superadditive_counter_limit_holds(seg, text, max_tokens, max_chars):
    result = seg.segment(text, max_tokens=max_tokens, max_chars=max_chars, token_counter=words_squared)
    _check(text, result, words_squared, max_tokens)
    if max_chars is not None:
        assert all(len(s.text) <= max_chars for s in result)


def test_repair_splits_what_the_additive_search_let_through(seg, monkeypatch):
    calls = []
    real = topics.repair_cuts

    def spy(cost, cuts, fits):
        out = real(cost, cuts, fits)
        calls.append((list(cuts), out))
        return out

    monkeypatch.setattr(topics, "repair_cuts", spy)
    text = " ".join(f"Sentence number {w} is here." for w in ("one", "two", "three", "four", "five", "six"))
    # 5 words a unit: 25 "tokens" each; two units add up to 50 <= 60 but count 100 together.
    # A huge penalty makes the search merge as much as the estimate allows.
    result = seg.segment(text, max_tokens=60, token_counter=words_squared, penalty=1e6)
    _check(text, result, words_squared, 60)
    # the search without the target (whose confident boundaries stay apart, issue 48), then the target's:
    # the first check had to cut, and the target's search keeps what it cut
    (before, after), (_, final) = calls
    assert len(before) < len(after) == 5 and final == after


def test_repair_cuts_at_the_least_scatter_boundary():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 8))
    labels = [0, 0, 0, 0, 1, 1, 2, 2, 2]
    x = centres[labels] + 0.01 * rng.normal(size=(9, 8))
    cost = SegmentCost(x)
    assert repair_cuts(cost, [], lambda a, b: b - a <= 4) == [4, 6]
    assert repair_cuts(cost, [4, 6], lambda a, b: b - a <= 4) == [4, 6]
    assert repair_cuts(cost, [], lambda a, b: b - a <= 1) == list(range(1, 9))


def test_token_count_without_counter_is_the_model_count_the_limit_uses(seg, tokenizer):
    text = "The river rose quickly after the storm. Farmers moved their cattle to higher ground! " * 3
    result = seg.segment(text, max_tokens=12)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    for s in result:
        n = sum(1 for a, _ in enc if s.start <= a < s.end)
        assert s.token_count == n <= 12
    assert seg(text, max_tokens=12).to_dict() == result.to_dict()


def test_special_tokens_are_charged_once_per_segment(seg, model_count):
    def with_specials(s):
        return model_count(s) + 2

    text = "Rain fell. The river rose. Cattle moved. Nobody slept. " * 4
    result = seg.segment(text, max_tokens=20, token_counter=with_specials, penalty=1e6)
    _check(text, result, with_specials, 20)
    # the overhead is not paid per unit: segments hold several units
    assert len(result) < len(seg.units(text))


def test_counter_loading_and_errors(seg, tmp_path, model_count, tokenizer):
    text = "a fairly long sentence " * 40
    # a tokenizer.json that truncates at 8 tokens must not cap the count
    data = json.loads((embedded_model_path() / "tokenizer.json").read_text(encoding="utf-8"))
    data["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}
    (tmp_path / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    count = resolve_token_counter(str(tmp_path))
    assert count(text) == model_count(text) > 8
    assert resolve_token_counter(tmp_path / "tokenizer.json")(text) == model_count(text)
    # a tokenizer object works too
    from tokenizers import Tokenizer

    assert resolve_token_counter(Tokenizer.from_file(str(tmp_path / "tokenizer.json")))(text) == model_count(text)
    assert resolve_token_counter(tokenizer)(text) == resolve_token_counter("embedded")(text) == model_count(text)
    # a directory without tokenizer.json (vocab.txt only): transformers builds the tokenizer offline
    vocab_only = tmp_path / "vocab-only"
    tokenizer.save_pretrained(vocab_only)
    (vocab_only / "tokenizer.json").unlink()
    assert resolve_token_counter(vocab_only)(text) == model_count(text)

    with pytest.raises(ModelError, match="no such directory"):
        resolve_token_counter(str(tmp_path / "missing"))
    with pytest.raises(ModelError, match="not in the local"):
        resolve_token_counter("no-such-org/no-such-model")
    with pytest.raises(HeadsegError, match="callable"):
        seg.segment(text, max_tokens=5, token_counter=42)
    with pytest.raises(HeadsegError, match="must return an int"):
        seg.segment(text, max_tokens=5, token_counter=lambda s: "3")
    with pytest.raises(HeadsegError, match="cannot be met"):
        seg.segment(text, max_tokens=3, token_counter=lambda s: len(s) + 5)
